"""Load and faults through a real LiteLLM proxy with the guard, against the strict upstream.

    apt-get install wrk redis-server      # the load generator and the summary cache (Debian)
    .venv/bin/python -m bench.load [--seconds 60] [--faults]

100 concurrent clients (one `wrk` per request class, so each class has its own status counts and
latency percentiles) post a mix for `--seconds`:

| class       | clients | what                                                          | intended answer |
|-------------|---------|---------------------------------------------------------------|-----------------|
| fitting     | 45      | 12-turn agent conversations (~3k tokens) into 32k             | 200             |
| overflowing | 30      | 40-turn agent conversations into 8k: fitted by the guard      | 200             |
| compaction  | 10      | a 300-396 message loop (~100k tokens) into 32k: summarized    | 200             |
| hopeless    | 10      | one 12k-token user message into 8k: cannot be cut             | 400 (the guard) |
| miscount    | 5       | 4k tokens to a model whose upstream enforces 3,000 tokens     | 400 (provider)  |
|             |         | behind an 8k `model_info`: the guard's limits are wrong       |                 |

The upstream (`tests/e2e/upstream.py`, its own process) counts every request with tiktoken and
refuses what exceeds its window. The summary cache runs with its defaults (an in-memory LRU in
front of Redis); with `--faults` it has no in-memory layer (`memory_entries: 0`), so every
compaction request goes through Redis while Redis is killed and restarted.

With `--faults`, during the run: Redis is killed at 25% of the run and restarted at 50%; the
summarizer answers 500 from 55% to 70% and is slower than its 2 s timeout from 70% to 85%.

Checks (exit 1 if any fails): every request answered (no socket errors or timeouts), every class
got only its intended status, 0 requests over the window at the upstream (but for the miscount
model, by construction), and the guard's `context_guard_counting_misses_total` equals the
upstream's refusals of the miscount model.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx  # noqa: E402

from bench.traces import agent_trace  # noqa: E402
from tests.e2e.conftest import free_port, start_proxy  # noqa: E402
from tests.e2e.redis_server import Redis  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-load-0123456789abcdef"
WINDOWS = "gpt-4o-32k=32768,gpt-4o-8k=8192,gpt-4o-undersized=3000,gpt-4o-summarizer=128000"
MISCOUNT_MODEL = "gpt-4o-undersized"
_PIN = shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2
PIN_PROXY = ["taskset", "-c", "0"] if _PIN else []
PIN_LOAD = ["taskset", "-c", "1"] if _PIN else []


def config(upstream_port: int, redis_port: int, memory_entries: int | None = None) -> str:
    base = f"http://127.0.0.1:{upstream_port}/v1"
    return f"""
model_list:
  - model_name: agent
    litellm_params: {{model: openai/gpt-4o-32k, api_base: "{base}", api_key: dummy}}
    model_info: {{max_input_tokens: 32768, max_output_tokens: 4096}}
  - model_name: small
    litellm_params: {{model: openai/gpt-4o-8k, api_base: "{base}", api_key: dummy}}
    model_info: {{max_input_tokens: 8192, max_output_tokens: 2048}}
  - model_name: undersized
    litellm_params: {{model: openai/{MISCOUNT_MODEL}, api_base: "{base}", api_key: dummy}}
    model_info: {{max_input_tokens: 8192, max_output_tokens: 2048}}
  - model_name: summarizer
    litellm_params: {{model: openai/gpt-4o-summarizer, api_base: "{base}", api_key: dummy}}
    model_info: {{max_input_tokens: 128000, max_output_tokens: 4096}}
litellm_settings:
  callbacks: [guard.proxy.context_guard]
  num_retries: 0
  request_timeout: 120
general_settings:
  master_key: {KEY}
  coordination_redis: {{host: 127.0.0.1, port: {redis_port}}}
context_guard:
  defaults:
    default_max_tokens: 256
  summarizer:
    model: summarizer
    timeout_seconds: 2
    failure_threshold: 3
    cooldown_seconds: 3
  cache:
    cooldown_seconds: 2
""" + (f"    memory_entries: {memory_entries}\n" if memory_entries is not None else "")


@dataclass(frozen=True)
class RequestClass:
    name: str
    clients: int
    intended: int  # the HTTP status every request of the class must get
    bodies: Callable[[], list[dict[str, Any]]]


def _fitting() -> list[dict[str, Any]]:
    return [
        {"model": "agent", "messages": agent_trace(turns=12, seed=s, scale=0.05)["messages"], "max_tokens": 256}
        for s in range(20)
    ]


def _overflowing() -> list[dict[str, Any]]:
    return [
        {"model": "small", "messages": agent_trace(turns=40, seed=s, scale=0.05)["messages"], "max_tokens": 256}
        for s in range(20)
    ]


def _compaction() -> list[dict[str, Any]]:
    trace = agent_trace()["messages"]
    return [{"model": "agent", "messages": trace[:n]} for n in range(300, len(trace) + 1, 8)]


def _hopeless() -> list[dict[str, Any]]:
    return [
        {"model": "small", "messages": [{"role": "user", "content": f"case {s}: " + "word " * 12_000}]}
        for s in range(5)
    ]


def _miscount() -> list[dict[str, Any]]:
    return [
        {
            "model": "undersized",
            "messages": [{"role": "user", "content": f"case {s}: " + "word " * 4_000}],
            "max_tokens": 100,
        }
        for s in range(5)
    ]


CLASSES = [
    RequestClass("fitting", 45, 200, _fitting),
    RequestClass("overflowing", 30, 200, _overflowing),
    RequestClass("compaction", 10, 200, _compaction),
    RequestClass("hopeless", 10, 400, _hopeless),
    RequestClass("miscount", 5, 400, _miscount),
]

LUA = """
bodies = {
%s
}
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) i = 0; statuses = {} end
function request()
  i = (i %% #bodies) + 1
  return wrk.format("POST", "/chat/completions",
    {["Content-Type"] = "application/json", ["Authorization"] = "Bearer %s"}, bodies[i])
end
function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end
function done(summary, latency, requests)
  for _, t in ipairs(threads) do
    for status, n in pairs(t:get("statuses")) do io.write(string.format("STATUS %%d %%d\\n", status, n)) end
  end
  io.write(string.format("LATENCY %%d %%d %%d %%d %%d\\n", latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, summary.requests))
  local e = summary.errors
  io.write(string.format("ERRORS %%d %%d %%d %%d %%d\\n", e.connect, e.read, e.write, e.status, e.timeout))
end
"""


class Cluster:
    """The upstream (own process, counts only), redis-server and one proxy with the guard."""

    def __init__(self, workdir: Path, memory_entries: int | None = 0) -> None:
        self.workdir = workdir
        self.upstream_port = free_port()
        self.upstream = subprocess.Popen(
            [
                *PIN_LOAD,
                sys.executable,
                "-m",
                "tests.e2e.upstream",
                "--port",
                str(self.upstream_port),
                "--windows",
                WINDOWS,
                "--no-record",
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.redis = Redis(workdir)
        self.redis.start()
        self.proxy, self.url, self.log = start_proxy(
            config(self.upstream_port, self.redis.port, memory_entries), workdir, prefix=PIN_PROXY
        )

    def upstream_stats(self) -> dict[str, Any]:
        return httpx.get(f"http://127.0.0.1:{self.upstream_port}/_stats", timeout=10).json()

    def control(self, **settings: Any) -> None:
        httpx.post(f"http://127.0.0.1:{self.upstream_port}/_control", json=settings, timeout=10).raise_for_status()

    def metric(self, name: str) -> float:
        text = httpx.get(self.url + "/metrics/", headers={"authorization": f"Bearer {KEY}"}, timeout=30).text
        return sum(
            float(line.split()[-1])
            for line in text.splitlines()
            if line.startswith(name + "{") or line.startswith(name + " ")
        )

    def close(self) -> None:
        self.proxy.terminate()
        try:
            self.proxy.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proxy.kill()
        self.redis.stop()
        self.upstream.terminate()


def faults(cluster: Cluster, seconds: float, log: list[str]) -> threading.Thread:
    """Redis killed at 25% and restarted at 50%; the summarizer failing 55-70%, too slow 70-85%."""
    start = time.monotonic()

    def at(share: float, what: str, fn: Callable[[], None]) -> None:
        time.sleep(max(0.0, start + share * seconds - time.monotonic()))
        fn()
        log.append(f"{time.monotonic() - start:5.1f} s  {what}")

    def timeline() -> None:
        at(0.25, "redis-server killed", cluster.redis.stop)
        at(0.50, "redis-server restarted", cluster.redis.start)
        at(0.55, "summarizer answers 500", lambda: cluster.control(fail_summaries=True))
        at(0.70, "summarizer slower than its timeout", lambda: cluster.control(fail_summaries=False, summary_delay=3.0))
        at(0.85, "summarizer healthy", lambda: cluster.control(summary_delay=0.0))

    thread = threading.Thread(target=timeline, daemon=True)
    thread.start()
    return thread


async def drive(url: str, clients: dict[str, int], seconds: float) -> dict[str, dict[str, Any]]:
    """A Python stand-in for wrk (for CI, where wrk may be missing): `clients[name]` concurrent
    clients per class, each posting that class's bodies in turn for `seconds`. Per class: status
    counts, transport errors (any exception: connection, timeout) and latencies."""
    import asyncio

    bodies = {c.name: [json.dumps(b) for b in c.bodies()] for c in CLASSES if clients.get(c.name)}
    results = {name: {"statuses": {}, "errors": 0, "latencies": []} for name in bodies}
    stop = time.monotonic() + seconds
    headers = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}

    async def client(http: httpx.AsyncClient, name: str, k: int) -> None:
        r, i = results[name], k
        while time.monotonic() < stop:
            payload = bodies[name][i % len(bodies[name])]
            i += 1
            t = time.perf_counter()
            try:
                resp = await http.post(url + "/chat/completions", content=payload, headers=headers)
                r["statuses"][resp.status_code] = r["statuses"].get(resp.status_code, 0) + 1
            except Exception:  # a request not answered: what the run must never see
                r["errors"] += 1
            r["latencies"].append(time.perf_counter() - t)

    limits = httpx.Limits(max_connections=sum(clients.values()) + 5)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        await asyncio.gather(*(client(http, name, k) for name in bodies for k in range(clients[name])))
    return results


def parse(out: str) -> dict[str, Any]:
    statuses = {int(a): int(b) for a, b in re.findall(r"^STATUS (\d+) (\d+)$", out, re.M)}
    lat = [int(x) for x in re.search(r"^LATENCY (\d+) (\d+) (\d+) (\d+) (\d+)$", out, re.M).groups()]  # type: ignore[union-attr]
    errors = [int(x) for x in re.search(r"^ERRORS (\d+) (\d+) (\d+) (\d+) (\d+)$", out, re.M).groups()]  # type: ignore[union-attr]
    return {
        "statuses": statuses,
        "p50_ms": lat[0] / 1000,
        "p90_ms": lat[1] / 1000,
        "p99_ms": lat[2] / 1000,
        "max_ms": lat[3] / 1000,
        "requests": lat[4],
        "socket_errors": errors[0] + errors[1] + errors[2] + errors[4],  # connect, read, write, timeout
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--faults", action="store_true")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every class's clients")
    args = parser.parse_args(argv)
    for tool in ("wrk", "redis-server"):
        if shutil.which(tool) is None:
            print(f"{tool} not found: apt-get install {tool}", file=sys.stderr)
            return 1
    work = Path(tempfile.mkdtemp(prefix="guard-load-"))
    cluster = Cluster(work, memory_entries=0 if args.faults else None)
    events: list[str] = []
    try:
        scripts = {}
        for c in CLASSES:
            items = ",\n".join(f"[==[{json.dumps(b)}]==]" for b in c.bodies())
            scripts[c.name] = work / f"{c.name}.lua"
            scripts[c.name].write_text(LUA % (items, KEY))
        misses_before = cluster.metric("context_guard_counting_misses_total")
        timeline = faults(cluster, args.seconds, events) if args.faults else None
        procs = {
            c.name: subprocess.Popen(
                [
                    *PIN_LOAD,
                    "wrk",
                    "-t1",
                    f"-c{max(1, round(c.clients * args.scale))}",
                    f"-d{args.seconds}s",
                    "--timeout",
                    "60s",
                    "-s",
                    str(scripts[c.name]),
                    cluster.url,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for c in CLASSES
        }
        results = {name: parse(p.communicate()[0]) for name, p in procs.items()}
        if timeline is not None:
            timeline.join()
        time.sleep(2)  # failure callbacks run after the response
        stats = cluster.upstream_stats()
        misses = cluster.metric("context_guard_counting_misses_total") - misses_before
        cache_errors = cluster.metric('context_guard_summary_cache_total{op="get",result="error"}')
        cache_timeouts = cluster.metric('context_guard_summary_cache_total{op="get",result="timeout"}')
        summaries = {k: v for k, v in _labelled(cluster, "context_guard_summaries_total").items()}
    finally:
        cluster.close()

    clients = sum(max(1, round(c.clients * args.scale)) for c in CLASSES)
    print(f"{args.seconds} s, {clients} concurrent clients, faults {'on' if args.faults else 'off'}")
    for line in events:
        print(f"  fault at {line}")
    ok = True
    print(
        f"{'class':12s} {'requests':>8s} {'statuses':24s} {'p50':>8s} {'p90':>8s} {'p99':>8s} {'max':>8s}  socket errors"
    )
    for c in CLASSES:
        r = results[c.name]
        unintended = sum(n for s, n in r["statuses"].items() if s != c.intended)
        ok &= unintended == 0 and r["socket_errors"] == 0 and r["requests"] > 0
        statuses = " ".join(f"{s}:{n}" for s, n in sorted(r["statuses"].items()))
        print(
            f"{c.name:12s} {r['requests']:8d} {statuses:24s} {r['p50_ms']:7.0f}ms {r['p90_ms']:7.0f}ms {r['p99_ms']:7.0f}ms {r['max_ms']:7.0f}ms  {r['socket_errors']}"
        )
    over = {m: n for m, n in stats["refused_too_long"].items() if m != MISCOUNT_MODEL}
    refused_miscount = stats["refused_too_long"].get(MISCOUNT_MODEL, 0)
    total = sum(r["requests"] for r in results.values())
    unintended_total = sum(n for c in CLASSES for s, n in results[c.name]["statuses"].items() if s != c.intended)
    print(
        f"requests answered: {total:,} ({total / args.seconds:.1f}/s); unintended statuses: {unintended_total}; "
        f"socket errors/timeouts: {sum(r['socket_errors'] for r in results.values())}"
    )
    print(
        f"upstream: {stats['requests']:,} requests ({stats['summary_calls']} summary calls); over the window: "
        f"{sum(over.values())} {over or ''}; miscount model refused {refused_miscount}"
    )
    print(f"counting misses in the guard's metrics: {misses:.0f} (the upstream refused {refused_miscount})")
    print(f"summaries: {summaries}; summary cache reads failed: {cache_errors:.0f}, timed out: {cache_timeouts:.0f}")
    ok &= not over and misses == refused_miscount
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def _labelled(cluster: Cluster, name: str) -> dict[str, float]:
    text = httpx.get(cluster.url + "/metrics/", headers={"authorization": f"Bearer {KEY}"}, timeout=30).text
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            label = line[line.index("{") + 1 : line.index("}")]
            out[label.split("=", 1)[-1].strip('"')] = float(line.split()[-1])
    return out


if __name__ == "__main__":
    sys.exit(main())
