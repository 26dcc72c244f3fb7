"""Replica safety over bench.sweep's loops: does a worker that never saw a conversation send what
the one that served every turn sends?

    .venv/bin/python -m bench.replicas [--ratios 0.3,0.5,0.7] [--match tau2/] [--corpus DIR] [--summarize] [--jobs 2]

Each (ratio, loop) pair is replayed turn by turn (`bench.cache.requests`, default policy at that
share of the loop's size, no idle gaps) through one engine that serves every turn and, on every
turn, a new engine with no record of the conversation (another worker or replica, no shared store),
which must find the same cut by replaying the history. With `--summarize`, both ask one
`bench.cache.Scripted` summarizer, whose cache they share (as workers share a Redis summary cache).
Prints each row whose bytes differ on some turn (turn, tokens the served engine sent, tokens the
new one sent; "refused" where only the new one refused), then how many rows differ. Clients that
edit their history (Aider, Moatless Tools' requests as sent) are expected among them: for those,
the conversation's record in the shared store is what keeps workers in step (docs/operations.md).
`--corpus` replays a folder of converted loops instead (as `bench.sweep --corpus`: a family held out).
"""

from __future__ import annotations

import argparse
import json
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def differing(task: tuple[str, float, bool, str | None]) -> tuple[str, float, list[tuple[Any, ...]]]:
    """The turns of one loop at one ratio where a new engine sends other bytes than the served one."""
    from bench.cache import STEP_SECONDS, Scripted, engine_for, fit, requests, window_policy
    from bench.sweep import _loops
    from guard.core.errors import ContextWindowExceeded

    name, ratio, summarize, corpus = task
    body = dict(dict(_loops(None, corpus))[name])
    policy = window_policy(body, ratio)
    now = [0.0]
    served = engine_for(body, policy, clock=lambda: now[0])
    summarizer = Scripted() if summarize else None
    out: list[tuple[Any, ...]] = []
    for t, request in enumerate(requests(body)):
        now[0] += STEP_SECONDS
        other = engine_for(body, policy, clock=lambda: now[0])
        try:
            sent = fit(served, request, summarizer)
        except ContextWindowExceeded:  # (its newest turn alone over the room: refused by both)
            continue
        try:
            fresh = fit(other, request, summarizer)
        except ContextWindowExceeded:
            out.append((t, sent.report.input_tokens_after, "refused"))
            continue
        if json.dumps(fresh.body) != json.dumps(sent.body):
            out.append((t, sent.report.input_tokens_after, fresh.report.input_tokens_after))
    return name, ratio, out


def main(argv: list[str] | None = None) -> None:
    from bench.sweep import _loops

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ratios", default="0.3,0.5,0.7")
    parser.add_argument("--match")
    parser.add_argument("--corpus", default=None, help="a folder of converted agent loops instead of the bench's")
    parser.add_argument("--summarize", action="store_true", help="with bench.cache's scripted summarizer")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    names = [n for n, _ in _loops(args.match, args.corpus)]
    tasks = [(n, float(r), args.summarize, args.corpus) for r in args.ratios.split(",") for n in names]
    rows = 0
    with ProcessPoolExecutor(args.jobs) as pool:
        for name, ratio, turns in pool.map(differing, tasks, chunksize=1):
            if turns:
                rows += 1
                print(f"{ratio:<4} {name:<58} {len(turns)} turns: {turns[:4]}", flush=True)
    print(f"rows whose bytes differ on some turn: {rows} of {len(tasks)}")


if __name__ == "__main__":
    main()
