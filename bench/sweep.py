"""bench.cache over several window ratios at once, summed up against issue 34's bars.

    .venv/bin/python -m bench.sweep [--ratios 0.3,0.5,0.7] [--match moatless/] [--client N:K]
        [--outputs 2048,4096 | --outputs 2048-2303] [--factors 0.90,0.97:4] [--tools toggle:6] [--corpus DIR] [--summarize]
        [--set NAME=VALUE] [--out rows.json] [--against old.json] [--jobs 2]
    .venv/bin/python -m bench.sweep --trace moatless/django__django-12284 --ratios 0.5 [--client N:K]

Each (ratio, loop) pair is one `bench.cache` row (default policy but for the `--set` settings, such
as `last_resort_cuts=recut`; no idle gaps; no summarizer but with `--summarize`, bench.cache's
scripted one), worked out in `--jobs` processes. Per ratio it prints the loops over the room: the mean and median
bill over the overflowing turns against the carrying best cuts' (`best_carry_bill_over`), how many
loops are over 1.0x, over the carrying best + 0.05, under its hit - 0.05, the new cuts, needless
breaks and the room used (minimum: on every cut turn, and `at_bar` on the new cuts whose request a
whole-turn cut could keep at the room bar, `bench.cache.room_used_at_the_bar`). `--corpus`
replays another folder of agent loops (a held-out
set converted by bench/corpus/agents/convert.py) instead of the whole bench; `--against` lists the
loops whose bill moved by more than 0.005 since an earlier `--out`. `--trace LOOP` prints one
loop turn by turn instead (at the first ratio): the untrimmed and the guarded request's tokens, the
guarded one's cached prefix, its room used, and whether its cut is new or the prefix broke.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

_LOOPS: dict[tuple[str | None, str | None], list[tuple[str, dict[str, Any]]]] = {}  # (read once a process)


def _loops(match: str | None, corpus: str | None) -> list[tuple[str, dict[str, Any]]]:
    if (match, corpus) not in _LOOPS:
        from bench import cache, traces

        if corpus:
            bench_corpus, traces.AGENTS_CORPUS = traces.AGENTS_CORPUS, Path(corpus)
            try:
                _LOOPS[match, corpus] = [(n, b) for n, b in traces.agent_runs() if not match or match in n]
            finally:
                traces.AGENTS_CORPUS = bench_corpus
        else:
            _LOOPS[match, corpus] = cache.loops(match=match)
    return _LOOPS[match, corpus]


@dataclass(frozen=True)
class How:
    """How every loop is replayed besides its ratio: the client that edits its history before each
    request (`bench.clients`, NAME:N), bench.cache's scripted summarizer, policy settings, and the
    `max_tokens` of each request (`outputs`, `bench.cache.outputs_of`; none: bench.cache's OUTPUT:
    with other outputs the best cuts' columns are those of the room of the loop's last turn), and
    a learned calibration factor that changes during the loop (`factors`, `bench.cache.with_factors`:
    the policy then sets `calibration_mode: auto`), and a tool list that changes (`tools`,
    `bench.cache.with_tools`)."""

    client: str | None = None
    summarize: bool = False
    settings: Mapping[str, Any] = field(default_factory=dict)
    outputs: tuple[int, ...] = ()
    factors: str | None = None
    tools: str | None = None

    def edited(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The loop as this client sends it."""
        from bench import cache
        from bench.clients import named

        edited = cache.with_client(body, named(self.client) if self.client else None)
        return cache.with_tools(cache.with_factors(cache.with_outputs(edited, self.outputs), self.factors), self.tools)


def _row(task: tuple[float, int, str | None, str | None, How]) -> dict[str, Any]:
    from bench import cache

    ratio, index, match, corpus, how = task
    name, body = _loops(match, corpus)[index]
    edited = how.edited(body)
    base = cache.replay(name, edited, None)
    policy = cache.window_policy(
        edited if how.client else body, ratio, **{**how.settings, **cache.factor_settings(edited)}
    )
    run = cache.replay(name, edited, policy, cache.Scripted() if how.summarize else None)
    return {"ratio": ratio, **cache.row(name, base, run, None if how.client else edited)}


def rows(
    ratios: list[float], match: str | None, corpus: str | None, how: How | str | None = None, jobs: int = 2
) -> list[dict[str, Any]]:
    """Every (ratio, loop) row; `how` a `How`, or a client's NAME:N alone."""
    how = how if isinstance(how, How) else How(client=how)
    count = len(_loops(match, corpus))
    tasks = [(r, i, match, corpus, how) for r in ratios for i in range(count)]
    if jobs <= 1:
        return [_row(t) for t in tasks]
    with ProcessPoolExecutor(jobs) as pool:
        return list(pool.map(_row, tasks, chunksize=1))


def trace(name: str, ratio: float, corpus: str | None, how: How) -> str:
    from bench import cache

    loops = dict(_loops(None, corpus))
    if name not in loops:
        near = sorted(n for n in loops if name in n)
        listed = f"did you mean: {', '.join(near)}" if near else f"loops: {', '.join(sorted(loops))}"
        raise SystemExit(f"no loop named {name!r}; {listed}")
    body = dict(loops[name])
    edited = how.edited(body)
    base = cache.replay(name, edited, None)
    policy = cache.window_policy(edited if how.client else body, ratio, **how.settings)
    run = cache.replay(name, edited, policy, cache.Scripted() if how.summarize else None)
    lines = [f"{name} at {ratio:.0%}, room {run.room}", "turn  untrimmed    sent  cached  room  "]
    sent = iter(run.turns)
    prev = 0
    for i, b in enumerate(base.turns):
        if i in run.refused:  # (a refused turn sends nothing: the next is in run.turns' place)
            lines.append(f"{i:>4} {b.sent:>10}  refused")
            continue
        t = next(sent)
        lines.append(
            f"{i:>4} {b.sent:>10} {t.sent:>7} {t.cached:>7}  "
            f"{'-' if t.room_used is None else f'{t.room_used:.2f}'}"
            f"{'  new cut' if t.new_cut and t.cut else ''}{'  break' if i and t.cached < prev else ''}"
            f"{'  over' if run.room is not None and b.sent > run.room else ''}"
        )
        prev = t.sent
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]]) -> str:
    lines = [
        "ratio loops  mean  best  median best_med  >1.0x  >best+.05  hit<best-.05  new_cuts needless room_min  at_bar"
        "  summarized"
    ]
    for ratio in sorted({r["ratio"] for r in rows}):
        over = [r for r in rows if r["ratio"] == ratio and r["bill_over"] is not None]
        if not over:
            continue
        bills = [r["bill_over"] for r in over]
        best = [r["best_carry_bill_over"] for r in over if r["best_carry_bill_over"] is not None]
        above = [
            r
            for r in over
            if r["best_carry_bill_over"] is not None and r["bill_over"] > r["best_carry_bill_over"] + 0.05
        ]
        low_hit = [r for r in over if r["hit_best_cut"] is not None and r["hit"] < r["hit_best_cut"] - 0.05]
        rooms = [r["room_min"] for r in over if r["room_min"] is not None]
        at_bar = [r["room_min_bar"] for r in over if r.get("room_min_bar") is not None]
        lines.append(
            f"{ratio:<5} {len(over):>5} {statistics.mean(bills):.4f} "
            f"{statistics.mean(best) if best else float('nan'):.4f} {statistics.median(bills):.4f} "
            f"{statistics.median(best) if best else float('nan'):.4f}   {sum(b > 1.0 for b in bills):>4} "
            f"{len(above):>10} {len(low_hit):>13} {sum(r['new_cuts'] for r in over):>9} "
            f"{sum(r['needless'] for r in over):>8} {min(rooms) if rooms else float('nan'):.3f}"
            f"   {min(at_bar) if at_bar else float('nan'):.3f}"
            # (the cut turns that sent a summary of what their cut dropped: with --summarize)
            f"  {sum(r.get('summarized', 0) for r in over)}/{sum(r['cut'] for r in over)}"
        )
        for r in sorted(over, key=lambda r: -r["bill_over"]):
            flags = []
            if r["bill_over"] > 1.0:
                flags.append(">1.0x")
            if r in above:
                flags.append(">best+.05")
            if r in low_hit:
                flags.append("hit")
            if flags:
                best_carry, rules = r["best_carry_bill_over"], r.get("best_rules_bill_over")
                lines.append(
                    f"      {r['loop']:<58} bill {r['bill_over']:.3f} best "
                    f"{'-' if best_carry is None else f'{best_carry:.3f}'} "
                    f"rules {'-' if rules is None else f'{rules:.3f}'} new_cuts {r['new_cuts']} "
                    f"room_min {r['room_min'] if r['room_min'] is None else round(r['room_min'], 3)} " + " ".join(flags)
                )
    return "\n".join(lines)


def moved(rows: list[dict[str, Any]], old: list[dict[str, Any]], by: float = 0.005) -> str:
    before = {(r["ratio"], r["loop"]): r for r in old}
    lines = []
    for r in rows:
        o = before.get((r["ratio"], r["loop"]))
        if o is None or r["bill_over"] is None or o["bill_over"] is None:
            continue
        if abs(r["bill_over"] - o["bill_over"]) > by or r["new_cuts"] != o["new_cuts"]:
            lines.append(
                f"{r['ratio']:<5} {r['loop']:<58} bill {o['bill_over']:.3f} -> {r['bill_over']:.3f} "
                f"new_cuts {o['new_cuts']} -> {r['new_cuts']}"
            )
    return "\n".join(lines) if lines else "no loop moved"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ratios", default="0.3,0.5,0.7")
    parser.add_argument("--match", default=None)
    parser.add_argument("--corpus", default=None, help="a folder of converted agent loops instead of the bench's")
    parser.add_argument("--client", default=None, help="NAME:N (bench.clients)")
    parser.add_argument("--outputs", default=None, help="max_tokens turn by turn: A,B,... in turn, or LOW-HIGH drawn")
    parser.add_argument("--factors", default=None, help="a learned factor that changes: RATIO,RATIO,...:TURNS")
    parser.add_argument("--tools", default=None, help="a tool list that changes: add:K, drop:K or toggle:K")
    parser.add_argument("--out", default=None, help="write every row to this JSON file")
    parser.add_argument("--against", default=None, help="an earlier --out: list the loops that moved")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--trace", default=None, help="one loop, turn by turn")
    parser.add_argument("--summarize", action="store_true", help="with bench.cache's scripted summarizer")
    parser.add_argument("--set", action="append", default=[], help="policy setting name=value (repeatable)")
    args = parser.parse_args(argv)
    ratios = [float(r) for r in args.ratios.split(",")]
    from bench.cache import counting_note, outputs_of, setting

    if note := counting_note():
        print(note)

    settings = {k: setting(v) for k, v in (s.split("=", 1) for s in args.set)}
    outputs = outputs_of(args.outputs) if args.outputs else ()
    how = How(args.client, args.summarize, settings, outputs, args.factors, args.tools)
    if args.trace:
        print(trace(args.trace, ratios[0], args.corpus, how))
        return
    out = rows(ratios, args.match, args.corpus, how, args.jobs)
    if args.out:
        Path(args.out).write_text(json.dumps(out))
    print(summary(out))
    if args.against:
        print(moved(out, json.loads(Path(args.against).read_text())))


if __name__ == "__main__":
    main()
