"""Summary spans: which runs of older messages a summary may stand for, the summary requests the
planner yields for them, and putting a summary (new or cached) in their place.

A span starts at the oldest droppable turn group and ends on a quantum of the original tokens, so a
growing conversation keeps the same spans, cache keys and, once compacted, the same summary. The
state of one fit's summaries (the texts known per span, the one in place, the calls made, the
requests built) is a `Summaries` (guard.fit.summary), `Context.summarized`.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from guard.core.content import MARKER_PREFIX, cache_breakpoint
from guard.core.report import Skipped
from guard.dialects import by_name
from guard.fit import summary
from guard.fit.conversation import Context, Conversation
from guard.fit.strategies.drop import droppable_groups

SUMMARY_MARK = MARKER_PREFIX + " summary of {m} earlier messages ({n} tokens)]\n"


@dataclass(frozen=True)
class SummaryRequest:
    """The span of older messages the planner wants summarized, and the summary's budget."""

    dialect: str
    messages: tuple[Mapping[str, Any], ...]
    span_tokens: int
    max_tokens: int
    lines: tuple[str, ...] = ()  # the messages' transcript lines (`summary.transcript`), if rendered
    # a span whose messages are not all in `messages` (a client slid its oldest out since the
    # summary was made, `guard.fit.slid`): the digest it is known by (`summary.span_digest`) and the
    # messages it holds. A driver finds its summary by the digest and never asks the summarizer
    # (the messages it would need are gone); "": the span is `messages`
    span: str = ""
    span_messages: int = 0

    @property
    def size(self) -> int:
        """The messages the span holds."""
        return self.span_messages if self.span else len(self.messages)


def digest_of(request: SummaryRequest) -> str:
    """The digest `request`'s span is known by (`summary.span_digest`), which keys its summary."""
    return request.span or summary.span_digest(lines_of(request))


def lines_of(request: SummaryRequest) -> list[str]:
    """The transcript lines of `request`'s messages (`summary.transcript`): those the planner
    rendered once for the whole request, where it did."""
    if len(request.lines) == len(request.messages):
        return list(request.lines)
    return summary.transcript(by_name(request.dialect), request.messages)


@dataclass(frozen=True)
class CachedSummaries:
    """Which of these spans already have a summary (cache lookups only, no LLM call)? The driver
    answers with a tuple: the cached text or None, per request."""

    requests: tuple[SummaryRequest, ...]


WITHHELD = "\x00withheld"  # what a driver stores for a `WithheldSummary` (no summary text is this)


@dataclass(frozen=True)
class WithheldSummary(CachedSummaries):
    """A cut went without the summary it left room for (refused, or the summarizer failed): a
    driver that keeps a summary cache stores `WITHHELD` under the key of its one request
    (`withheld_request`: the span's, and a line naming the cut, so a key of its own) and answers
    as to any lookup. Every worker's replay then sizes that cut as it was sent, and the turns that
    carry it do not ask again (`guard.fit.cut_summaries`). A driver that knows only
    `CachedSummaries` answers it as a lookup, which changes nothing."""


def withheld_request(request: SummaryRequest, m: int, mark: int) -> SummaryRequest:
    """What a cut of the first `m` messages to `mark` is remembered by as having gone without the
    summary `request` asks for (`WithheldSummary`): its messages and transcript lines and one more
    naming the cut, so that its cache key is not the summary's, whatever a driver keys on."""
    note = f"[context-guard: the cut of the first {m} messages to {mark} tokens went without this summary]"
    lines = (*request.lines, note) if len(request.lines) == len(request.messages) else ()
    return replace(request, messages=(*request.messages, {"role": "system", "content": note}), lines=lines)


@dataclass(frozen=True)
class SummaryAnswer:
    """What a driver sends back for a SummaryRequest: the summary, or why there is none.

    `source` says where it came from ("cache" or "llm"), `calls` how many LLM calls it took.
    A plain string (or None) is accepted too."""

    text: str | None
    reason: str | None = None
    source: str = "llm"
    calls: int = 0


def candidates(start: Conversation, ctx: Context) -> list[list[int]]:
    """The spans a summary may cover, as indices of the request's own messages, smallest first.

    Every span starts at the oldest droppable turn group and runs over contiguous whole groups; a
    span ends where the original tokens first reach a whole number of *quanta* (`room * (1 -
    summary_low_water_ratio)` tokens each). The candidates depend only on the older messages as
    the client sent them, so a conversation that grows keeps the same spans, the same cache keys
    and, once compacted, the same summary and a byte-identical prefix."""
    groups = droppable_groups(start)
    run: list[list[int]] = []
    for group in groups:
        if run and run[-1][-1] + 1 != group[0]:
            break
        run.append(group)
    quantum = max(1, ctx.room - math.floor(ctx.room * ctx.policy.summary_low_water_ratio))
    if ctx.ceiling is not None:
        # a carried cut's prefix: its mark already lasts a band, so spans step finely (a quarter
        # band), and the summary lands just under the mark rather than far below it
        quantum = max(1, ctx.band // 4)
    spans: list[list[int]] = []
    span: list[int] = []
    tokens = 0
    for group in run:
        span += group
        tokens += sum(start.counts[i] for i in group)
        if tokens >= (len(spans) + 1) * quantum:
            spans.append(list(span))
            while tokens >= (len(spans) + 1) * quantum:  # a big group may cross several quanta
                spans.append(spans[-1])
    return list({tuple(s): s for s in spans}.values())


def output_budget(ctx: Context) -> int:
    """The output one summary may take: the policy's `summary_max_tokens`, at most an eighth of
    the room being fitted (never below 64). The planner leaves space for the whole budget when it
    picks a span, so in a small room (a few thousand tokens) the policy's 1,024 would make it
    summarize far more than needed and send a request that uses half its room or less."""
    return summary_budget(ctx.policy.summary_max_tokens, ctx.room)


MIN_SUMMARY = 64  # the smallest output budget a summary is asked with


def summary_budget(max_tokens: int, room: int) -> int:
    """`output_budget` of a policy's `summary_max_tokens` in a room."""
    return max(MIN_SUMMARY, min(max_tokens, room // 8))


def span_request(conv: Conversation, ctx: Context, span: list[int]) -> SummaryRequest:
    key = tuple(span)
    hit = ctx.summarized.requests.get(key)
    if hit is None:
        lines = ctx.history.transcript() if ctx.history.transcript is not None else None  # rendered once per request
        if span and span == list(range(span[0], span[-1] + 1)):  # spans are contiguous: slices
            part = slice(span[0], span[-1] + 1)
            messages, counts = ctx.history.messages[part], ctx.history.counts[part]
            texts = lines[part] if lines is not None else ()
        else:
            messages = tuple(ctx.history.messages[i] for i in span)
            counts = tuple(ctx.history.counts[i] for i in span)
            texts = [lines[i] for i in span] if lines is not None else ()
        hit = ctx.summarized.requests[key] = SummaryRequest(
            dialect=conv.dialect.name,
            messages=tuple(messages),
            span_tokens=sum(counts),
            max_tokens=output_budget(ctx),
            lines=tuple(texts),
        )
    return hit


def reuse(conv: Conversation, ctx: Context, spans: list[list[int]]) -> Generator[Any, Any, Conversation]:
    """Before any other step: look up which spans already have a summary and put the largest in."""
    if ctx.done(conv):
        return conv
    answers = yield CachedSummaries(tuple(span_request(conv, ctx, span) for span in spans))
    if isinstance(answers, (tuple, list)):
        for k, text in enumerate(answers[: len(spans)]):
            if (
                isinstance(text, str) and text.strip() and k not in ctx.summarized.known
            ):  # (one this request asked for stays its)
                ctx.summarized.known[k] = (text.strip(), "cache")
    return apply_largest(conv, ctx, spans)


def apply_largest(conv: Conversation, ctx: Context, spans: list[list[int]]) -> Conversation:
    for k in sorted(ctx.summarized.known, reverse=True):
        if k >= len(spans):  # (known for a longer prefix of this request, see `_Cuts._prefix` in guard.fit.carried)
            continue
        text, source = ctx.summarized.known[k]
        new = _apply(conv, ctx, spans[k], span_request(conv, ctx, spans[k]), text, source)
        if new is not None:
            return new
    return conv


def summarize(conv: Conversation, ctx: Context, spans: list[list[int]]) -> Generator[Any, Any, Conversation]:
    """Ask for a summary of the smallest span beyond those already known that brings the input
    below the summary low-water mark (or of the largest span there is)."""
    options = [k for k in range(len(spans)) if k > max(ctx.summarized.known, default=-1)]
    if not options:
        ctx.skipped.append(Skipped("summarize", "nothing_to_summarize" if not spans else "nothing_more_to_summarize"))
        return conv
    target = ctx.ceiling if ctx.ceiling is not None else math.floor(ctx.room * ctx.policy.summary_low_water_ratio)
    budget, chosen = output_budget(ctx), options[-1]
    for k in options:
        if _after(conv, ctx, spans[k]) + budget <= target:
            chosen = k
            break
    if ctx.least and _after(conv, ctx, spans[chosen]) + budget < ctx.least:
        # even a summary of its whole budget would leave less than a carried cut's room bar (one
        # big turn in a small room): the deterministic steps that keep to the bar cut instead
        ctx.skipped.append(Skipped("summarize", "below_room_bar"))
        return conv
    request = span_request(conv, ctx, spans[chosen])
    answer = yield request
    if not isinstance(answer, SummaryAnswer):
        answer = SummaryAnswer(
            answer if isinstance(answer, str) else None, None if isinstance(answer, str) else "no_summary"
        )
    ctx.summarized.calls += answer.calls
    if not isinstance(answer.text, str) or not answer.text.strip():
        ctx.summarized.report = {
            **(ctx.summarized.report or {"span_messages": len(request.messages), "span_tokens": request.span_tokens}),
            "calls": ctx.summarized.calls,
        }
        ctx.summarized.report.setdefault("source", "none")
        ctx.skipped.append(Skipped("summarize", answer.reason or "summary_empty"))
        return conv
    ctx.summarized.known[chosen] = (answer.text.strip(), answer.source)
    new = _apply(conv, ctx, spans[chosen], request, answer.text.strip(), answer.source)
    if new is None:
        ctx.skipped.append(Skipped("summarize", "summary_not_shorter"))
        return conv
    return new


def _covered(conv: Conversation, ctx: Context, span: list[int]) -> set[int]:
    """Current indices of the span's messages, and of the summary already standing for part of it."""
    inside = set(span)
    out = {i for i, o in enumerate(conv.origin) if o in inside}
    if ctx.summarized.message is not None:
        out |= {i for i, m in enumerate(conv.messages) if m is ctx.summarized.message}
    return out


def _after(conv: Conversation, ctx: Context, span: list[int]) -> int:
    return conv.total - sum(conv.counts[i] for i in _covered(conv, ctx, span))


def _apply(
    conv: Conversation, ctx: Context, span: list[int], request: SummaryRequest, text: str, source: str
) -> Conversation | None:
    """The conversation with the span (and any smaller summary of it) replaced by the summary, or
    None if that would not save tokens."""
    replaced = _covered(conv, ctx, span)
    if not replaced:
        return None
    # a prompt-cache breakpoint among the summarized messages moves onto the summary
    breakpoints = [bp for i in sorted(replaced) if (bp := cache_breakpoint(conv.messages[i])) is not None]
    msg = conv.dialect.marker(
        SUMMARY_MARK.format(m=len(span), n=request.span_tokens) + text, breakpoints[-1] if breakpoints else None
    )
    count = ctx.counter.message(conv.dialect, msg)
    saved = sum(conv.counts[i] for i in replaced) - count
    if saved <= 0:
        return None
    if ctx.summarized.span is not None:
        ctx.adjust("summarize", 0, -len(ctx.summarized.span))  # the new summary takes the old one's place
    ctx.record("summarize", saved, len(span))
    ctx.summarized.message, ctx.summarized.span = msg, span
    ctx.summarized.request = request
    ctx.summarized.report = {
        "source": source,
        "calls": ctx.summarized.calls,
        "span_messages": len(span),
        "span_tokens": request.span_tokens,
        "summary_tokens": count,
    }
    return conv.replacing(replaced, {min(replaced): (msg, count)})
