"""Heavy fits in a real proxy (issue 36, item 3): long agent conversations sent at once take turns;
one that finds no turn within `wait_seconds` (here 0) is fitted the deterministic way and served,
and its conversation's next turn carries that cut (its prompt starts with the one before)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.traces import agent_trace
from tests.e2e.conftest import Proxy, proxy_config, start_proxy, stop_proxy

pytestmark = pytest.mark.slow


def conversation(seed: int, turns: int = 120) -> list[dict[str, Any]]:
    body = agent_trace(turns=turns, seed=seed, scale=0.05)
    messages = [m for m in body["messages"] if m.get("role") != "assistant" or m.get("tool_calls") or m.get("content")]
    messages[1] = {**messages[1], "content": f"{messages[1]['content']} (task {seed})"}
    while messages[-1].get("role") == "assistant":
        messages.pop()
    return messages


async def _send(url: str, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    headers = {"authorization": "Bearer sk-master"}
    async with httpx.AsyncClient(timeout=120) as http:
        return await asyncio.gather(*(http.post(url + "/chat/completions", json=b, headers=headers) for b in bodies))


def test_long_conversations_at_once_take_turns_and_one_past_its_wait_is_served_the_deterministic_way(
    upstream: Any, tmp_path: Path
) -> None:
    config = proxy_config(upstream.port) + "  heavy_fits: {concurrency: 1, wait_seconds: 0.0}\n"
    events = tmp_path / "events.jsonl"
    events.touch()
    proc, url, log = start_proxy(config, tmp_path, {"GUARD_E2E_LOG": str(events)})
    proxy = Proxy(url, upstream, log, events)
    try:
        proxy.reset()
        histories = [conversation(seed) for seed in range(4)]
        assert all(len(h) >= 64 for h in histories)
        replies = asyncio.run(_send(url, [{"model": "small", "messages": h, "max_tokens": 256} for h in histories]))
        assert [r.status_code for r in replies] == [200] * 4
        assert len(proxy.received) == 4
        assert all(got["input_tokens"] + got["body"]["max_tokens"] <= got["window"] for got in proxy.received)
        busy = [i for i, r in enumerate(replies) if r.headers.get("x-context-guard-busy") == "replay_skipped"]
        assert busy, "no fit found the only turn taken"  # the four arrive while the first one's replay runs
        assert all(replies[i].headers["x-context-guard-cache-temperature"] == "warm;anchored" for i in busy)
        # the next turn of a hurried conversation, alone: its anchored cut carried, the prompt grows
        i = busy[0]
        sent = next(g["body"]["messages"] for g in proxy.received if f"(task {i})" in json.dumps(g["body"]))
        later = [*histories[i], {"role": "user", "content": "and now?"}]
        (reply,) = asyncio.run(_send(url, [{"model": "small", "messages": later, "max_tokens": 256}]))
        assert reply.status_code == 200 and "x-context-guard-busy" not in reply.headers
        assert proxy.received[-1]["body"]["messages"][: len(sent)] == sent
    finally:
        stop_proxy(proc)
