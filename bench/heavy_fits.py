"""Heavy fits on a busy worker (issue 36, item 3): what a bound on the fits of long bodies working at
once does to the requests beside them, on a real one-worker LiteLLM proxy (LiteLLM's
`mock_response` as the upstream, the proxy on core 0 and the clients on core 1, as bench.overhead).

    .venv/bin/python -m bench.heavy_fits [--seconds 20] [--rounds 2] [--settings 0 1 2 1:0.25]

Two kinds of clients at once, closed loops:

- light: 4 clients posting agent conversations that fit a 32k window (bench.overhead's "fitting");
- heavy: 3 clients posting the last request of real agent loops (bench/corpus: 64 messages or more,
  over the window), each pass salted in its task message so every request is a conversation the
  worker has no record of: its fit replays the history's past turns (a prefix fit per crossing),
  what a worker pays for every long conversation after a restart without Redis.

Per `heavy_fits` setting (`concurrency[:wait_seconds]`; 0: no bound, the guard before this bench) it
prints requests/s, p50 and p99 of each kind, and how many heavy fits waited past `wait_seconds` and
went the deterministic path (the `x-context-guard-busy` header). The stock proxy serves the light
clients alone as the yardstick of their latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx  # noqa: E402

from bench.overhead import KEY, SALT, WINDOW, closed_loop, fitting, poster  # noqa: E402
from bench.overhead import config as overhead_config  # noqa: E402
from tests.e2e.conftest import start_proxy, stop_proxy  # noqa: E402

_PIN = shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2
LIGHT, HEAVY = 4, 3


def config(setting: str | None) -> str:
    """The proxy's config: stock (None), or guarded with `heavy_fits` as `concurrency[:wait]`
    (bench.overhead's, with a `context_guard:` section)."""
    if setting is None:
        return overhead_config(False)
    concurrency, _, wait = setting.partition(":")
    section = f"    concurrency: {int(concurrency)}\n    wait_seconds: {float(wait or 1.0)}\n"
    return overhead_config(True) + "context_guard:\n  heavy_fits:\n" + section


def chat_runs() -> list[dict[str, Any]]:
    """The real agent loops of bench.cache in chat completions (the route these benches post to)."""
    from bench.traces import agent_runs, swe_runs
    from guard.dialects import OPENAI, detect

    return [body for _, body in [*swe_runs(), *agent_runs()] if detect(body) is OPENAI]


def heavy_bodies() -> list[str]:
    """The last request of each real agent loop of 64 messages or more over the window, salted."""
    from bench.cache import requests
    from guard.core.encodings import get_encoding
    from guard.core.tokens import TokenCounter
    from guard.dialects import OPENAI

    counter = TokenCounter(get_encoding("o200k_base"))
    out = []
    for body in chat_runs():
        *_, last = requests(body)
        messages = [dict(m) for m in last["messages"]]
        task = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
        if task is None or len(messages) < 64 or not isinstance(messages[task].get("content"), str):
            continue
        messages[task]["content"] = f"{messages[task]['content']}\n{SALT}"
        sent = {"model": "agent", "messages": messages, "max_tokens": 1024}
        if counter.body(OPENAI, sent) > WINDOW:
            out.append(json.dumps(sent))
    return out


def renamed_turns(body: dict[str, Any], k: int, salt: str | None = None) -> list[dict[str, Any]]:
    """A loop's messages but its system prompt, copied, their call ids prefixed with `k` (so loops
    put one after another never share an id), each non-empty text ending in `salt` where given."""
    out = []
    for m in body["messages"]:
        if m.get("role") == "system":
            continue
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [{**t, "id": f"{k}-{t.get('id')}"} for t in m["tool_calls"]]
        if m.get("tool_call_id"):
            m["tool_call_id"] = f"{k}-{m['tool_call_id']}"
        if salt is not None and isinstance(m.get("content"), str) and m["content"]:
            m["content"] += f" {salt}"
        out.append(m)
    return out


def long_bodies(messages: int = 3000, count: int = 3) -> list[str]:
    """Histories of `messages` messages or more, each the real loops' turns one after another
    (their calls renamed apart) after one task: an agent session of hours, a conversation's first
    request on a worker after a restart without Redis, fresh text (every message salted). Each
    replays its last 6 rooms' crossings."""
    runs = chat_runs()
    out = []
    for c in range(count):
        history: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
        history.append({"role": "user", "content": f"Work through these tasks, one after another. {SALT}"})
        k = 0
        while len(history) < messages:
            body = runs[(c + k) % len(runs)]
            k += 1
            # fresh text on every pass (each message salted): no memo of an earlier one helps
            history.extend(renamed_turns(body, k, salt=SALT))
        while history[-1].get("role") == "assistant":
            history.pop()
        out.append(json.dumps({"model": "agent", "messages": history, "max_tokens": 1024}))
    return out


@dataclass
class Kind:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    busy: int = 0
    statuses: dict[str, int] = field(default_factory=dict)


async def drive(url: str, light: list[str], heavy: list[str], seconds: float, with_heavy: bool) -> dict[str, Kind]:
    headers = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
    stop = time.monotonic() + seconds
    out = {"light": Kind(), "heavy": Kind()}

    def client(http: httpx.AsyncClient, kind: str, bodies: list[str], k: int) -> Coroutine[Any, Any, None]:
        def tally(answer: httpx.Response | Exception, latency: float) -> None:
            tallied, what = out[kind], None
            if isinstance(answer, Exception):  # a request not answered
                what = type(answer).__name__
            else:
                tallied.busy += answer.headers.get("x-context-guard-busy") is not None
                what = None if answer.status_code == 200 else f"{answer.status_code}:{answer.text[:80]}"
            if what is not None:
                tallied.errors += 1
                tallied.statuses[what] = tallied.statuses.get(what, 0) + 1
            tallied.latencies.append(latency)

        salt = lambda i: f"\u27e8run {kind} {k:02d} {i:05d}\u27e9"  # noqa: E731
        return closed_loop(poster(http, url, headers), bodies, k * 5, salt, stop, tally)

    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=LIGHT + HEAVY + 2)) as http:
        tasks = [client(http, "light", light, k) for k in range(LIGHT)]
        if with_heavy:
            tasks += [client(http, "heavy", heavy, k) for k in range(HEAVY)]
        await asyncio.gather(*tasks)
    return out


def measure(setting: str | None, light: list[str], heavy: list[str], seconds: float) -> dict[str, Kind]:
    work = Path(tempfile.mkdtemp(prefix="guard-heavy-"))
    proc, url, _ = start_proxy(config(setting), work, prefix=["taskset", "-c", "0"] if _PIN else [])
    try:
        asyncio.run(drive(url, light, heavy, min(5.0, seconds / 3), setting is not None))  # warm-up
        return asyncio.run(drive(url, light, heavy, seconds, setting is not None))
    finally:
        stop_proxy(proc)
        shutil.rmtree(work, ignore_errors=True)


def _q(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * q))] * 1e3 if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--settings", nargs="+", default=["0", "1", "2", "1:0.25"])
    parser.add_argument("--long", type=int, default=0, help="heavy bodies: histories of this many messages")
    args = parser.parse_args(argv)
    light, heavy = fitting()[0], long_bodies(args.long) if args.long else heavy_bodies()
    print(
        f"light: {len(light)} bodies; heavy: {len(heavy)} bodies, {min(map(len, heavy)):,}-{max(map(len, heavy)):,} bytes"
    )
    if _PIN:
        os.sched_setaffinity(0, {1})
    runs: dict[str, list[dict[str, Kind]]] = {}
    for _ in range(args.rounds):
        for setting in [None, *args.settings]:
            runs.setdefault(str(setting), []).append(measure(setting, light, heavy, args.seconds))
    print(
        f"\n{'heavy_fits':>10s} {'light/s':>8s} {'p50':>7s} {'p99':>7s} {'heavy/s':>8s} {'p50':>7s} {'p99':>8s} "
        f"{'busy':>5s} {'errors':>6s}"
    )
    ok = True
    for setting, results in runs.items():
        rate = {k: statistics.median(len(r[k].latencies) / args.seconds for r in results) for k in ("light", "heavy")}
        lat = {k: [x for r in results for x in r[k].latencies] for k in ("light", "heavy")}
        errors = sum(r[k].errors for r in results for k in r)
        busy = sum(r["heavy"].busy for r in results)
        ok &= errors == 0
        name = "stock" if setting == "None" else setting
        print(
            f"{name:>10s} {rate['light']:8.1f} {_q(lat['light'], 0.5):7.1f} {_q(lat['light'], 0.99):7.1f} "
            f"{rate['heavy']:8.1f} {_q(lat['heavy'], 0.5):7.1f} {_q(lat['heavy'], 0.99):8.1f} {busy:5d} {errors:6d}"
        )
    for setting, results in runs.items():
        for r in results:
            for k, kind in r.items():
                if kind.statuses:
                    print(f"{setting} {k}: {kind.statuses}")
    print("no errors" if ok else "ERRORS")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
