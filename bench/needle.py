"""Needle retention: does relevance-aware cutting keep the fact the last question asks about?

    .venv/bin/python -m bench.needle [--cases 200]

For each case, an agent conversation (bench.traces.agent_trace, its own seed) gets one fact planted
in a random line of an old plain-text tool result (a file read or a test run, in the oldest 60%
of the conversation); the last user message asks about that fact. The request is fitted into half
of its size with the deterministic strategies (no summarizer), once with `relevance: bm25` and
once with `relevance: off` (strictly oldest first). A case counts as kept when the fact's value
is still in the fitted messages. Prints both retention rates and how many cases differ.
"""

from __future__ import annotations

import argparse
import json
import os
import random
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bench.traces import agent_trace  # noqa: E402
from guard.core.config import Deployment  # noqa: E402
from guard.core.errors import ContextWindowExceeded  # noqa: E402
from guard.core.policy import load_policy_set  # noqa: E402
from guard.fit.engine import Engine  # noqa: E402

PROJECTS = ["atlas", "borealis", "cobalt", "dynamo", "ember", "fjord", "granite", "helix"]


def case(seed: int) -> tuple[dict[str, Any], str]:
    rng = random.Random(10_000 + seed)
    body = agent_trace(turns=60, seed=seed)
    msgs = body["messages"]
    project = rng.choice(PROJECTS)
    value = f"{rng.choice('ABCDEFGHJKLMNPQRSTUVWXYZ')}{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"
    old = [
        i
        for i, m in enumerate(msgs[: int(len(msgs) * 0.6)])
        if m["role"] == "tool" and not m["content"].lstrip().startswith("{")
    ]
    i = rng.choice(old)
    lines = msgs[i]["content"].splitlines() or [""]
    at = rng.randint(0, len(lines))
    lines.insert(at, f"# NOTE: the rollback key for the {project} deployment is {value}")
    msgs[i] = {**msgs[i], "content": "\n".join(lines)}
    msgs.append({"role": "user", "content": f"What is the rollback key for the {project} deployment?"})
    return body, value


def fit(engine: Engine, body: dict[str, Any]) -> dict[str, Any] | None:
    try:
        return engine.fit(json.loads(json.dumps(body)), model="half").body
    except ContextWindowExceeded:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--ratios", default="0.5,0.25", help="fractions of the input that fit")
    args = parser.parse_args(argv)
    ok = True
    for ratio in (float(r) for r in args.ratios.split(",")):
        ok &= measure(args.cases, ratio)
    return 0 if ok else 1


def measure(cases: int, ratio: float) -> bool:
    kept = {"bm25": 0, "off": 0}
    only = {"bm25": 0, "off": 0}
    total = 0
    for seed in range(cases):
        body, value = case(seed)
        probe = Engine(model_map=None)
        size = probe.fit(body, model="gpt-4o").report.input_tokens_before
        window = int(size * ratio) + 4096 + 1024  # that share of the input fits, next to output and margin
        results = {}
        for mode in ("bm25", "off"):
            engine = Engine(
                load_policy_set(
                    {"defaults": {"relevance": mode, "safety_margin_tokens": 1024, "safety_margin_ratio": 0.0}}
                ),
                deployments={
                    "half": Deployment("half", "gpt-4o", {"max_input_tokens": window, "max_output_tokens": 4096})
                },
                model_map=None,
            )
            out = fit(engine, body)
            results[mode] = out is not None and value in json.dumps(out["messages"][:-1], ensure_ascii=False)
            kept[mode] += results[mode]
        total += 1
        if results["bm25"] != results["off"]:
            only["bm25" if results["bm25"] else "off"] += 1
    print(f"{total} agent conversations fitted into {ratio:.0%} of their size, a fact planted in an old tool result:")
    for mode in ("bm25", "off"):
        print(
            f"  relevance={mode:<4}  fact kept in {kept[mode]}/{total} = {kept[mode] / total:.1%}  (kept only by this mode: {only[mode]})"
        )
    return kept["bm25"] >= kept["off"]


if __name__ == "__main__":
    raise SystemExit(main())
