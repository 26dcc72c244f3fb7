"""A cut's drop split by a user message it keeps: one summary per run of dropped messages.

Where a person writes in the middle of an agent's work (a pasted error, a new instruction) and the
agent goes on for many steps, a new cut comes to drop messages on both sides of that user message,
which the guard keeps (the last user message is pinned). One summary of the whole drop would go in
the place of the drop's last marker, after the user message, and take the place of the summary the
cut before sent ahead of it: the prompt would change right after the pinned messages, and the
user message (often the largest in the request) would go again uncached.

So such a drop is summarized run by run: each run before a kept user message gets the summary a
cut that dropped exactly that run asked for (found in the summary cache, the same bytes in the same
place), and only the last run a new one, in what the room leaves it. Where an earlier run's summary
is not in the cache, or the room leaves the last too little, the whole drop is summarized as one
(`guard.fit.cut_summaries.summarized`)."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any

from guard.dialects import Dialect, cache_breakpoint
from guard.fit import summary
from guard.fit.conversation import Context, Conversation
from guard.fit.spans import MIN_SUMMARY, SUMMARY_MARK, WITHHELD, CachedSummaries, SummaryRequest

Message = Mapping[str, Any]


def runs_of(dialect: Dialect, messages: Sequence[Message], left_out: list[int], cut: Conversation) -> list[list[int]]:
    """The runs of `left_out` (indices of `messages` a cut dropped) between the user messages the cut
    `cut` keeps: one run where it keeps none inside the drop."""
    if len(left_out) < 2:
        return [left_out]
    kept = {o for o in cut.origin if left_out[0] < o < left_out[-1]}
    users = sorted(i for i in kept if dialect.is_user_turn(messages[i]))
    out: list[list[int]] = [[] for _ in range(len(users) + 1)]
    for i in left_out:
        out[bisect.bisect_right(users, i)].append(i)
    return [run for run in out if run]


def run_request(
    dialect: Dialect, messages: Sequence[Message], counts: Sequence[int], run: list[int], tokens: int
) -> SummaryRequest:
    """The request for a summary (of `tokens` at most) of the messages at `run`."""
    picked = [messages[i] for i in run]
    return SummaryRequest(
        dialect=dialect.name,
        messages=tuple(picked),
        span_tokens=sum(counts[i] for i in run),
        max_tokens=tokens,
        lines=tuple(summary.transcript(dialect, picked)),
    )


def by_runs(
    dialect: Dialect,
    sizes: tuple[Sequence[Message], Sequence[int]],
    cut: tuple[Conversation, Context],
    runs: list[list[int]],
    room: int,
    budget: Callable[[int], int],
) -> Generator[Any, Any, tuple[list[tuple[SummaryRequest, str]], SummaryRequest | None, str | None] | None]:
    """How the cut `cut` (its conversation and report) of a history (`sizes`: its messages and their counts)
    summarizes each run of its drop (`runs`, at least two) in at most `room` tokens more
    (`budget`: a summary's output budget given its room in the request): the earlier runs'
    requests and their cached texts, the last run's request and its cached text (None: not in
    the cache); no request for the last where the room leaves it too little for a summary (its
    markers stay). None where the drop goes as one summary instead: an earlier run's summary is
    not in the cache."""
    (messages, counts), (conv, part) = sizes, cut
    earlier = [run_request(dialect, messages, counts, run, budget(room)) for run in runs[:-1]]
    found = yield CachedSummaries(tuple(earlier))
    texts = [_text(t) for t in found] if isinstance(found, (tuple, list)) else []
    if len(texts) != len(earlier) or not all(texts):
        return None
    replaced = sum(n for n, o in zip(conv.counts, conv.origin) if o < 0)
    taken = sum(_summary(dialect, part, r, t, None)[1] for r, t in zip(earlier, texts))
    tokens = budget(room + replaced - taken)
    if tokens < MIN_SUMMARY:  # (the last run keeps its markers: the earlier runs' summaries stay in place)
        return list(zip(earlier, texts)), None, None
    last = run_request(dialect, messages, counts, runs[-1], tokens)
    got = yield CachedSummaries((last,))
    return list(zip(earlier, texts)), last, (_text(got[0]) if isinstance(got, (tuple, list)) and got else "") or None


def _text(found: Any) -> str:
    """A cached summary's text ("" for none, or a cut remembered as withheld)."""
    return found.strip() if isinstance(found, str) and found != WITHHELD else ""


def _summary(
    dialect: Dialect, part: Context, request: SummaryRequest, text: str, breakpoint: Any
) -> tuple[Message, int]:
    msg = dialect.marker(SUMMARY_MARK.format(m=len(request.messages), n=request.span_tokens) + text, breakpoint)
    return msg, part.counter.message(dialect, msg)


def put_runs(
    conv: Conversation,
    part: Context,
    runs: tuple[list[list[int]], Sequence[int]],
    summaries: list[tuple[SummaryRequest, str]],
    room: int,
    source: str,
) -> Conversation | str:
    """`conv` with each run's summary (`runs`: the drop's runs and the history's counts;
    `summaries`: each run's request and text, the runs after the last of them keeping their
    markers) in the place of the run's last marker (its other markers removed), those runs' tokens
    and items moved from the drop onto the summaries in the report (`part`). Or why they cannot go in."""
    spans, counts = runs
    firsts = [run[0] for run in spans[1:]]
    at: list[list[int]] = [[] for _ in spans]
    previous = -1
    for i, o in enumerate(conv.origin):
        if o >= 0:
            previous = o
        else:  # (a marker stands for the messages dropped right after the kept message before it)
            at[bisect.bisect_right(firsts, previous + 1)].append(i)
    if not all(at):
        return "summary_without_marker"
    put: dict[int, tuple[Message, int]] = {}
    for spots, (request, text) in zip(at, summaries):
        # a prompt-cache breakpoint the drop moved onto a run's marker moves onto its summary
        breakpoints = [bp for i in spots if (bp := cache_breakpoint(conv.messages[i])) is not None]
        put[spots[-1]] = _summary(conv.dialect, part, request, text, breakpoints[-1] if breakpoints else None)
    gone = {i for spots in at[: len(summaries)] for i in spots}
    replaced, total = sum(conv.counts[i] for i in gone), sum(n for _, n in put.values())
    drop = next(a for a in part.actions if a.kind == "drop_oldest_turns")
    # the dropped messages' tokens as the fit had them (after its other steps), shared between the
    # summarized runs and those left with their markers (`rest`) as their counts are: the latter's,
    # less their markers, stay the drop's saving
    rest = [i for run in spans[len(summaries) :] for i in run]
    markers = sum(conv.counts[i] for spots in at[len(summaries) :] for i in spots)
    whole, mine = drop.tokens_saved + replaced + markers, sum(r.span_tokens for r, _ in summaries)
    still = max(0, whole - round(whole * mine / max(1, mine + sum(counts[i] for i in rest))) - markers) if rest else 0
    saved = drop.tokens_saved - still + replaced - total
    if total - replaced > room:
        return "summary_oversized"
    if saved <= 0:
        return "summary_not_shorter"
    part.adjust("drop_oldest_turns", still - drop.tokens_saved, -(drop.items - len(rest)))
    part.record("summarize", saved, drop.items - len(rest))
    part.summarized.message = put[max(put)][0]
    part.summarized.span = [i for run in spans[: len(summaries)] for i in run]
    part.summarized.report = {
        "source": source,
        "calls": part.summarized.calls,
        "span_messages": sum(len(r.messages) for r, _ in summaries),
        "span_tokens": sum(r.span_tokens for r, _ in summaries),
        "summary_tokens": total,
        "runs": len(summaries),
    }
    return conv.replacing(gone, put)
