"""Cache temperature through a real proxy with two workers and a real Redis (issue 24, item 3):
a conversation idle past its cache TTL is cut deep and anchored, and whichever worker serves the
next turns carries the anchored cut (the record is shared through Redis)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bench.traces import coding_trace
from tests.e2e.redis_server import Redis, proxy_with_redis, require_redis_server

require_redis_server()

WINDOW = 9_000
TTL = 8  # seconds: the test's provider forgets a cached prefix after this (well above a loaded 2-core turn)


def config(upstream_port: int, redis_port: int) -> str:
    return f"""
model_list:
  - model_name: loop
    litellm_params: {{model: openai/gpt-4o-8k, api_base: "http://127.0.0.1:{upstream_port}/v1", api_key: dummy}}
    model_info: {{max_input_tokens: {WINDOW}, max_output_tokens: 1024}}
litellm_settings:
  callbacks: [guard.proxy.context_guard]
  num_retries: 0
general_settings:
  master_key: sk-master
  coordination_redis: {{host: 127.0.0.1, port: {redis_port}}}
context_guard:
  defaults:
    default_max_tokens: 256
    safety_margin_tokens: 0
    safety_margin_ratio: 0.0
    cache_ttl_seconds: {TTL}
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any, Redis]]:
    with proxy_with_redis(tmp_path_factory.mktemp("temperature"), config, {"gpt-4o-8k": WINDOW}) as running:
        yield running


def send(url: str, messages: list[dict[str, Any]]) -> httpx.Response:
    # a new connection each time: the kernel spreads the requests over both workers
    return httpx.post(
        url + "/chat/completions",
        json={"model": "loop", "messages": messages, "tools": TOOLS},
        headers={"authorization": "Bearer sk-master", "connection": "close"},
        timeout=120,
    )


BODY = coding_trace(turns=120, seed=5)
TOOLS = BODY.get("tools")


def test_a_cold_conversation_is_anchored_and_every_worker_carries_the_anchor(setup):
    url, upstream, redis = setup
    msgs = BODY["messages"]
    ends = list(range(90, 130, 2))
    for end in ends[:4]:  # warm, overflowing turns: the stateless band grid
        r = send(url, msgs[:end])
        assert r.status_code == 200, r.text
        assert r.headers["x-context-guard-cache-temperature"] == "warm"
    assert any(k.startswith("context-guard:seen:") for k in redis.keys())
    time.sleep(TTL + 1.5)
    upstream.requests.clear()
    r = send(url, msgs[: ends[4]])
    assert r.status_code == 200, r.text
    assert r.headers["x-context-guard-cache-temperature"] == "cold;anchored"
    anchored_cut = r.headers["x-context-guard-cut"]
    carried = 0
    for end in ends[5:15]:
        r = send(url, msgs[:end])
        assert r.status_code == 200, r.text
        assert r.headers["x-context-guard-cache-temperature"] == "warm;anchored"
        carried += r.headers["x-context-guard-cut"] == anchored_cut
    assert carried >= 5  # both workers carried the anchor the cold turn set
    sent = [
        json.dumps(req["body"]["messages"]) for req in upstream.requests if req["path"].endswith("/chat/completions")
    ]
    # while the anchor holds, each prompt starts with the previous one, byte for byte
    same = sum(later.startswith(earlier[:-1]) for earlier, later in zip(sent, sent[1:]))
    assert same >= carried - 1
    assert upstream.stats["refused_too_long"] == {}
