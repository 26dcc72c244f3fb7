"""Counts against the provider's own: real requests whose provider reported the input tokens it
billed (bench/corpus/usage), counted by the guard and by `litellm.token_counter`.

    .venv/bin/python -m bench.usage

Per corpus file (one agent family, model and domain), the ratio of each count to the provider's:
min, median and max, and the share of requests under-counted (a count under the provider's lets a
request through that the provider refuses; one over it cuts history that would have fit)."""

from __future__ import annotations

import gzip
import json
import os
import statistics
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from guard.core.policy import load_policy_set  # noqa: E402
from guard.fit.engine import Engine  # noqa: E402

CORPUS = Path(__file__).parent / "corpus" / "usage"


def requests() -> list[tuple[str, dict[str, Any], int]]:
    """(corpus name, request body, the provider's input tokens) of every logged request."""
    out = []
    for path in sorted(CORPUS.glob("*.json.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
        system = {"role": "system", "content": data["system"]}
        for sim in data["simulations"]:
            for end, billed in sim["usage"]:
                body = {"model": data["model"], "messages": [system, *sim["messages"][:end]], "tools": data["tools"]}
                out.append((path.name.removesuffix(".json.gz"), body, billed))
    return out


def guard_count(engine: Engine, body: dict[str, Any]) -> int:
    counter, _ = engine.counter_for(body["model"], engine.policy_for(body["model"]))
    from guard.dialects import detect

    return counter.body(detect(body), body)


def main() -> None:
    import litellm

    engine = Engine(load_policy_set({}))
    rows: dict[str, list[tuple[float, float]]] = {}
    for name, body, billed in requests():
        ours = guard_count(engine, body)
        theirs = litellm.token_counter(model=body["model"], messages=body["messages"], tools=body["tools"])
        rows.setdefault(name, []).append((ours / billed, theirs / billed))
    print("| requests | count | ratio to the provider's: min | median | max | under-counted |")
    print("|---|---|---|---|---|---|")
    for name, pairs in rows.items():
        for label, i in (("guard", 0), ("litellm.token_counter", 1)):
            values = [p[i] for p in pairs]
            under = sum(v < 1.0 for v in values) / len(values)
            print(
                f"| {name} ({len(values)}) | {label} | {min(values):.3f} | {statistics.median(values):.3f} | "
                f"{max(values):.3f} | {under:.0%} |"
            )


if __name__ == "__main__":
    main()
