"""Proxy overhead: the LiteLLM proxy with the guard versus the same proxy without it, same run.

    apt-get install wrk        # the load generator (Debian package)
    .venv/bin/python -m bench.proxy_bench [--connections 100] [--seconds 20] [--rounds 2]

Both proxies front the same upstream (tests/e2e/upstream.py in its own process) and get the same
load: `wrk` with 100 connections posting 50 different agent conversations that fit (so the guard
counts, finds they fit and only makes max_tokens explicit). Rounds alternate bare/guarded to
spread machine noise. Bars (engine issue #3): added p50 latency <= 3%, throughput >= 95%.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bench.traces import agent_trace  # noqa: E402
from tests.e2e.conftest import free_port, start_proxy  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# Pin the proxy to core 0 and the load generator and upstream to core 1 (when taskset exists and
# the machine has two cores or more), so the two runs compete less with their own load.
_PIN = shutil.which("taskset") is not None and (os.cpu_count() or 1) >= 2
PIN_PROXY = ["taskset", "-c", "0"] if _PIN else []
PIN_LOAD = ["taskset", "-c", "1"] if _PIN else []


def config(upstream_port: int, guarded: bool) -> str:
    callbacks = "  callbacks: guard.proxy.context_guard\n" if guarded else ""
    return f"""
model_list:
  - model_name: small
    litellm_params: {{model: openai/gpt-4o-32k, api_base: "http://127.0.0.1:{upstream_port}/v1", api_key: dummy}}
    model_info: {{max_input_tokens: 32768, max_output_tokens: 4096}}
litellm_settings:
{callbacks}  num_retries: 0
general_settings:
  master_key: sk-bench-0123456789abcdef
"""


def lua_script(bodies: list[str]) -> str:
    items = ",\n".join(f"[==[{b}]==]" for b in bodies)
    return f"""
bodies = {{
{items}
}}
i = 0
request = function()
  i = (i % #bodies) + 1
  return wrk.format("POST", "/chat/completions",
    {{["Content-Type"] = "application/json", ["Authorization"] = "Bearer sk-bench-0123456789abcdef"}}, bodies[i])
end
"""


def parse_wrk(out: str) -> dict[str, float]:
    def ms(value: str) -> float:
        num, unit = re.match(r"([\d.]+)(\w+)", value).groups()  # type: ignore[union-attr]
        return float(num) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]

    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    return {
        "p50_ms": ms(p50.group(1)) if p50 else float("nan"),
        "p99_ms": ms(p99.group(1)) if p99 else float("nan"),
        "rps": float(rps.group(1)) if rps else 0.0,
        "non_2xx": float(non2xx.group(1)) if non2xx else 0.0,
        "socket_errors": 1.0 if errors else 0.0,
    }


def run_wrk(url: str, script: Path, connections: int, seconds: int) -> dict[str, float]:
    cmd = [
        *PIN_LOAD,
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{seconds}s",
        "--latency",
        "--timeout",
        "30s",
        "-s",
        str(script),
        url,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return parse_wrk(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        print("wrk not found: apt-get install wrk", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="guard-bench-"))
    bodies = []
    for seed in range(50):
        body = agent_trace(turns=12, seed=seed, scale=0.05)
        body = {"model": "small", "messages": body["messages"], "max_tokens": 256}
        bodies.append(json.dumps(body))
    script = work / "load.lua"
    script.write_text(lua_script(bodies))
    up_port = free_port()
    upstream = subprocess.Popen(
        [
            *PIN_LOAD,
            sys.executable,
            "-m",
            "tests.e2e.upstream",
            "--port",
            str(up_port),
            "--windows",
            "gpt-4o-32k=32768",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    results: dict[str, list[dict[str, float]]] = {"bare": [], "guarded": []}
    try:
        time.sleep(1.5)
        for _ in range(args.rounds):
            for name in ("bare", "guarded"):
                d = work / name
                d.mkdir(exist_ok=True)
                proc, url, _ = start_proxy(config(up_port, name == "guarded"), d, prefix=PIN_PROXY)
                try:
                    run_wrk(url, script, 10, 3)  # warm-up
                    r = run_wrk(url, script, args.connections, args.seconds)
                    results[name].append(r)
                    print(
                        f"{name:8s} p50 {r['p50_ms']:.1f} ms  p99 {r['p99_ms']:.1f} ms  {r['rps']:.1f} req/s  non-2xx {int(r['non_2xx'])}"
                    )
                finally:
                    proc.terminate()
                    proc.wait(timeout=30)
    finally:
        upstream.terminate()
    bare_p50 = statistics.median(r["p50_ms"] for r in results["bare"])
    guard_p50 = statistics.median(r["p50_ms"] for r in results["guarded"])
    bare_rps = statistics.median(r["rps"] for r in results["bare"])
    guard_rps = statistics.median(r["rps"] for r in results["guarded"])
    print(
        f"added p50 latency {100 * (guard_p50 / bare_p50 - 1):+.1f}% (bar <= +3%); "
        f"throughput {100 * guard_rps / bare_rps:.1f}% of the bare proxy (bar >= 95%)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
