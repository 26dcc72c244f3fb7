"""The planner: count, budget, run strategies least destructive first, fit or reject.

`plan()` is a generator and does no I/O. When the policy allows summarization and the driver can
summarize, it yields a `SummaryRequest` and expects the summary text (or None) to be sent back;
`run()` drives it synchronously, and an async shell can drive the same generator with awaits.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import math
from dataclasses import dataclass, replace
from collections.abc import Mapping
from typing import Any, Callable, Generator, Sequence, TypeVar

from guard.budget import OUTPUT_KEYS, Budget, make_budget, requested_output
from guard.conversation import Context, Conversation, tool_chars
from guard.dialects import MARKER_PREFIX, Dialect, cache_breakpoint, compact_json, content_texts, group_messages, map_texts
from guard import jsontext, reasoning, relevance, summary
from guard.errors import ContextWindowExceeded, Shortfall
from guard.limits import ModelLimits
from guard.policy import STRATEGY_ORDER, Policy
from guard.report import Report, Skipped
from guard.strategies import STRATEGIES
from guard.strategies.compact import compacted
from guard.strategies.dedupe import DUPLICATE_MARK
from guard.strategies.drop import droppable_groups
from guard.temperature import Anchor, Temperature
from guard.tokens import TokenCounter

_NEWEST_TURN_STEPS = frozenset({"truncate_recent_tool_results"})  # lossy steps inside keep_recent_groups
_LOSSY_STEPS = frozenset({"truncate_tool_results", "drop_oldest_turns"})
# near-lossless rewrites of one message at a time that run on every conversation over its room,
# even once an earlier step got it to the mark: each message then has one form, turn after turn
_ON_EVERY_OVERFLOW = frozenset({"compact_json", "drop_metadata"})
# a carried cut's drop passes over a turn that would leave less than this share of the room, for
# later, smaller ones, where they can do (the room a cut deep enough to last may still leave)
ROOM_BAR = 0.6
SUMMARY_MARK = MARKER_PREFIX + " summary of {m} earlier messages ({n} tokens)]\n"


@dataclass(frozen=True)
class SummaryRequest:
    """The span of older messages the planner wants summarized, and the summary's budget."""

    dialect: str
    messages: tuple[Mapping[str, Any], ...]
    span_tokens: int
    max_tokens: int
    lines: tuple[str, ...] = ()  # the messages' transcript lines (`summary.transcript`), if rendered


@dataclass(frozen=True)
class CachedSummaries:
    """Which of these spans already have a summary (cache lookups only, no LLM call)? The driver
    answers with a tuple: the cached text or None, per request."""

    requests: tuple[SummaryRequest, ...]


@dataclass(frozen=True)
class SummaryAnswer:
    """What a driver sends back for a SummaryRequest: the summary, or why there is none.

    `source` says where it came from ("cache" or "llm"), `calls` how many LLM calls it took.
    A plain string (or None) is accepted too."""

    text: str | None
    reason: str | None = None
    source: str = "llm"
    calls: int = 0


@dataclass(frozen=True)
class Fitted:
    """A fitted request body (a new object; the caller's is untouched) and the report of the fit."""

    body: dict[str, Any]
    report: Report


Plan = Generator["SummaryRequest | CachedSummaries", Any, Fitted]
_T = TypeVar("_T")


def plan(
    body: Mapping[str, Any],
    *,
    dialect: Dialect,
    limits: ModelLimits,
    policy: Policy,
    counter: TokenCounter,
    exact: bool,
    can_summarize: bool = False,
    family: str = "other",
    adaptive_thinking: bool = False,
    calibration: tuple[str, str] | None = None,
    temperature: Temperature | None = None,
) -> Plan:
    """`temperature`: what the shell knows of the conversation's provider cache (see
    guard.temperature); None: nothing (the stateless band grid)."""
    messages = dialect.messages(body)
    cut_from: int | None = None
    anchor: Anchor | None = None
    key = dialect.output_key(body, limits.model)
    requested = requested_output(body, key)
    budget, source = make_budget(limits, policy, requested)
    # a cap that leaves no room for the body's thinking budget is refused before any work
    reasoning.fit_reasoning(
        body, family=family, model=limits.model, max_tokens=budget.reserved_output, requested=requested,
        without_room=policy.thinking_without_room, adaptive=adaptive_thinking,
    )
    counts = counter.messages(dialect, messages)
    fixed = counter.fixed(dialect, body)
    before = fixed + sum(counts)
    ctx = Context(counter=counter, policy=policy, stop_at=budget.stop_at(before))
    ctx.originals, ctx.original_counts = tuple(messages), tuple(counts)
    ctx.transcript = functools.cache(functools.partial(summary.transcript, dialect, ctx.originals))
    if policy.relevance == "bm25":
        ctx.relevance = functools.partial(_relevant_origins, dialect, ctx.originals, ctx.transcript)
    conv: Conversation | _Unchanged = _Unchanged(dialect, tuple(messages), tuple(counts), fixed)

    if not budget.fits(before):
        budget = _clamp_output(budget, before, policy, ctx, reasoning.output_floor(body, family, adaptive_thinking))
        summarizing = can_summarize and policy.allows("summarize")
        # (with a summarizer the carried prefix is summarized: see `_fit_prefix`)
        carried = yield from _carried(dialect, tuple(messages), tuple(counts), fixed, budget, policy, ctx, temperature, summarizing)
        if carried is not None:
            conv, ctx, cut_from, anchor = carried
        else:
            full = Conversation.build(dialect, messages, counts, fixed, policy.keep_recent_groups, policy.keep_first_user_turn)
            ctx.stop_at, ctx.floor, ctx.target, ctx.room = budget.stop_at(before), budget.floor, budget.target, budget.room
            ctx.band = budget.band
            conv, ctx = yield from _fit(full, ctx, policy, summarizing)

    after = conv.total
    fitted = budget.fits(after)
    changed = conv.messages != tuple(messages)
    by_policy = any(a.kind == "clamp_output" for a in ctx.actions)
    if requested is not None and budget.reserved_output < requested and not by_policy:
        ctx.record("clamp_output", 0, 1)  # lowered to a model or policy cap: an action, not "unchanged"
    updates, thinking = reasoning.fit_reasoning(
        body, family=family, model=limits.model, max_tokens=budget.reserved_output, requested=requested,
        without_room=policy.thinking_without_room, adaptive=adaptive_thinking,
    )
    if thinking:
        ctx.record("clamp_thinking", 0, len(thinking))
    report = Report(
        model=limits.model,
        dialect=dialect.name,
        window_rule=limits.rule,
        context_window=limits.context_window,
        max_input_tokens=limits.max_input_tokens,
        max_output_tokens=limits.max_output_tokens,
        limits_source=limits.source,
        input_tokens_before=before,
        input_tokens_after=after,
        max_tokens=budget.reserved_output,
        max_tokens_requested=requested,
        max_tokens_source="clamped_by_policy" if by_policy else source,
        output_key=key,
        safety_margin_tokens=budget.margin,
        room=budget.room,
        target=budget.target,
        fits=fitted,
        outcome="fitted" if changed or ctx.actions else "unchanged",
        exact_count=exact,
        calibration_factor=counter.factor,
        calibration_key=calibration[0] if calibration else None,
        calibration_source=calibration[1] if calibration else "static",
        messages_before=len(messages),
        messages_after=len(conv.messages),
        actions=ctx.actions,
        skipped=ctx.skipped,
        breakdown=_breakdown(conv, counter, body),
        summary=ctx.summary,
        reasoning=[c.to_dict() for c in thinking],
        unseen_state=dialect.unseen_state(body),
        cache_temperature=temperature.state if temperature is not None else None,
        idle_seconds=None if temperature is None or temperature.idle_seconds is None else round(temperature.idle_seconds, 3),
        anchor=anchor.to_dict() if anchor is not None else None,
    )
    if not fitted:
        report.outcome = "rejected"
        report.reason = "no allowed strategy brings the input within the room"
        shortfall = Shortfall(
            limits.model, limits.rule, limits.max_input_tokens, after, budget.reserved_output, budget.margin,
            trimmed=after < before, fixed_tokens=conv.fixed,
        )
        raise ContextWindowExceeded(shortfall, report)
    out = dict(body)
    if changed:
        out = dialect.with_messages(body, conv.messages)
        report.fitted_messages_sha256 = _sha256(list(conv.messages))
        if isinstance(conv, Conversation):
            report.cut = _cut(dialect, tuple(messages), conv)
            report.cut_from = cut_from
    out[key] = budget.reserved_output
    reasoning.apply(out, updates)
    for other in OUTPUT_KEYS:  # every output limit the body carries says the same: the reserved one
        if other != key and out.get(other) is not None:
            out[other] = budget.reserved_output
    return Fitted(out, report)


def _fit(conv: Conversation, ctx: Context, policy: Policy, can_summarize: bool) -> Generator[Any, Any, tuple[Conversation, Context]]:
    """Run the strategies on a conversation over its room (the context holds its marks)."""
    start, originals, original_counts = conv, ctx.originals, ctx.original_counts
    spans = _spans(conv, ctx) if can_summarize else []
    cut = yield from _rounds(conv, ctx, policy, can_summarize, spans)
    kinds = {a.kind for a in ctx.actions}
    if "drop_oldest_turns" in kinds and "summarize" not in kinds:
        cut, ctx = _without_wasted_cuts(start, cut, ctx, policy)
        ctx.originals, ctx.original_counts = originals, original_counts  # (for what reads the fit after it)
    return _orphans_restored(cut, ctx, originals), ctx


def crossing(dialect: Dialect, messages: tuple[Mapping[str, Any], ...], counts: tuple[int, ...], fixed: int, target: int, band: int) -> int:
    """Where the conversation last crossed a band: the shortest prefix, ending at a turn boundary,
    whose tokens (`counts`, per message) are already in the same band above the low-water mark
    as the whole request's. Every turn from that prefix up to the next crossing gets the cut the
    prefix got (see `_carried`). `len(messages)` if the request itself is the crossing turn."""
    total = fixed + sum(counts)
    k = math.ceil(max(0, total - target) / band)
    threshold = target + (k - 1) * band
    groups = group_messages(dialect, messages)
    running = fixed
    for j, n in enumerate(counts):
        if j and groups[j] != groups[j - 1] and running > threshold:
            return j
        running += n
    return len(messages)


def _carried(
    dialect: Dialect, messages: tuple[Mapping[str, Any], ...], counts: tuple[int, ...], fixed: int,
    budget: Budget, policy: Policy, ctx: Context, temperature: Temperature | None = None, summarizing: bool = False,
) -> Generator[Any, Any, tuple[Conversation, Context, int, Anchor | None] | None]:
    """The cut of the turn where the conversation crossed its current band, carried forward.

    Agents resend their history, so the prefix up to the last crossing (`crossing`) is the same
    on every turn until the next one. That prefix is fitted as if it were the request, to the
    stop mark of the whole request's band (its tokens minus the band's whole quanta, so whatever
    the client adds before the next crossing, less than a band, still fits), and its edits are
    applied to this request: the messages after the prefix go as sent (JSON compacted, as on
    every overflow). Every turn of a band then sends the same cut, byte for byte, whatever the
    strategies would decide on the growing history, so a provider's cached prefix keeps hitting;
    at a crossing the prefix moves, and the cut is made once, a band deeper. None when the
    carried cut does not fit (the request is then fitted whole). With `summarizing` the prefix is
    summarized as any request is (see `_fit_prefix`)."""
    # bands are counted on the messages as they go once the request is over its room, JSON
    # compacted: a compacted message by its count scaled by its tool results' length (no encoding
    # of the whole history; this over-states compact JSON by 2-3%, so what is added before the
    # next crossing rarely counts more than its estimate). Pure functions of each message: the
    # same on every turn.
    forms = [compacted(dialect, msg) for msg in messages] if policy.allows("compact_json") else list(messages)
    lossless = list(counts)
    for i, (form, msg) in enumerate(zip(forms, messages)):
        if form is not msg:
            lossless[i] = min(counts[i], math.ceil(counts[i] * tool_chars(dialect, form) / max(1, tool_chars(dialect, msg))))
    known: dict[int, tuple[str, str]] = {}  # summaries the prefixes tried here got, by span (see `_fit_prefix`)
    anchor = temperature.anchor if temperature is not None else None
    if anchor is not None and (anchor.length > len(messages) or sum(counts[: anchor.length]) != anchor.prefix_tokens):
        anchor = None  # not this history's prefix (another conversation with the same task, or edited)
    if temperature is not None and temperature.state == "warm" and anchor is not None:
        # the anchor's cut, carried while it fits under the target (the cached prefix holds)
        held = yield from _carried_at(dialect, messages, counts, forms, lossless, fixed, budget, policy, ctx, anchor.length, anchor.mark, summarizing, known)
        if held is not None and held[0].total <= budget.target:
            return (*held, anchor)
    target, band = budget.target, budget.band
    total = fixed + sum(lossless)
    k = math.ceil(max(0, total - target) / band)
    if temperature is not None and (temperature.state == "cold" or anchor is not None):
        # a cold cache (nothing to break) or an anchor that no longer fits: cut the whole request
        # to the bottom of the band, so the cut lasts a band of growth (where no turn boundary
        # lies between the room bar and that mark: as deep as a crossing turn is cut)
        for mark in dict.fromkeys((budget.floor, total - k * band)):
            anchor = Anchor(len(messages), mark, sum(counts))
            made = yield from _carried_at(dialect, messages, counts, forms, lossless, fixed, budget, policy, ctx, anchor.length, mark, summarizing, known)
            if made is not None:
                return (*made, anchor)
        return None
    m = crossing(dialect, messages, tuple(lossless), fixed, target, band)
    mark = fixed + sum(lossless[:m]) - k * band  # the prefix minus the whole request's bands (at most the target)
    made = yield from _carried_at(dialect, messages, counts, forms, lossless, fixed, budget, policy, ctx, m, mark, summarizing, known)
    return None if made is None else (*made, None)


def _carried_at(
    dialect: Dialect, messages: tuple[Mapping[str, Any], ...], counts: tuple[int, ...], forms: list[Mapping[str, Any]],
    lossless: list[int], fixed: int, budget: Budget, policy: Policy, ctx: Context, m: int, mark: int,
    summarizing: bool = False, known: dict[int, tuple[str, str]] | None = None,
) -> Generator[Any, Any, tuple[Conversation, Context, int] | None]:
    """The cut of the first `m` messages down to `mark`, carried to this request (see `_carried`)."""
    if mark <= fixed:
        return None
    # the prefix's pinned and newest turns alone may be over its mark (newest turns that fill most
    # of a small room): then no cut lasts a band, and the prefix is cut as deep as it can go; that
    # cut is carried while the request fits, and the request is fitted whole once it does not
    floor = fixed + _kept_whole(dialect, messages[:m], lossless[:m], policy)
    deepest = floor > mark
    mark = max(mark, floor)
    question = _query(dialect, messages[:m])
    cut, part = yield from _fit_prefix(dialect, messages[:m], counts[:m], fixed, budget, policy, ctx, mark, question, summarizing, known)
    if part.relevance is not None:
        # the band's question is the one its prefix ended with; the first question asked since
        # that is about something the cut removed takes its place, once: a later one waits for the
        # next crossing (agents that send each tool's output as a user message ask every turn)
        later = _questions(dialect, messages[m:])
        after = [line.split("] ", 1)[-1] for line in summary.transcript(dialect, messages[m:])] if later else []
        for asked in dict.fromkeys(later):
            # (the question itself holds its terms: what else is sent must)
            if asked != question and _cuts_into(cut, part, asked, [line for line in after if line != asked]):
                cut, part = yield from _fit_prefix(dialect, messages[:m], counts[:m], fixed, budget, policy, ctx, mark, asked, summarizing, known)
                break
    if cut.total > mark and not deepest:
        return None
    # what follows the prefix goes JSON compacted where that saves tokens (counted exactly: less
    # than a band of messages, most of them counted on earlier turns already)
    tail, tail_counts = list(forms[m:]), list(counts[m:])
    changed = [j for j, msg in enumerate(tail) if msg is not messages[m + j]]
    for j, n in zip(changed, ctx.counter.messages(dialect, [tail[j] for j in changed])):
        if n < tail_counts[j]:
            part.record("compact_json", tail_counts[j] - n, 1)
            tail_counts[j] = n
        else:
            tail[j] = messages[m + j]
    rest = len(messages) - m
    conv = replace(
        cut, messages=cut.messages + tuple(tail), counts=cut.counts + tuple(tail_counts), groups=cut.groups + (-1,) * rest,
        pinned=cut.pinned + (False,) * rest, recent=cut.recent + (True,) * rest, pending=cut.pending + (None,) * rest,
        origin=cut.origin + tuple(range(m, len(messages))),
    )
    if conv.total > budget.room:
        return None
    part.originals, part.original_counts = messages, counts
    return conv, part, m


def _kept_whole(dialect: Dialect, messages: tuple[Mapping[str, Any], ...], counts: Sequence[int], policy: Policy) -> int:
    """Tokens of the messages no step but the last resort cuts: pinned ones and the newest turns."""
    built = Conversation.build(dialect, messages, counts, 0, policy.keep_recent_groups, policy.keep_first_user_turn)
    return sum(n for n, pinned, recent in zip(counts, built.pinned, built.recent) if pinned or recent)


def _fit_prefix(
    dialect: Dialect, messages: tuple[Mapping[str, Any], ...], counts: tuple[int, ...], fixed: int,
    budget: Budget, policy: Policy, ctx: Context, mark: int, question: str | None, summarizing: bool = False,
    known: dict[int, tuple[str, str]] | None = None,
) -> Generator[Any, Any, tuple[Conversation, Context]]:
    """The prefix of a carried cut fitted to `mark`, its lossy steps ranking by `question`; with
    `summarizing`, summarized as any request is (its spans, and so its cached summary, stay the
    same all band). `known`: the summaries earlier prefixes of this request got, by span (a
    prefix's spans step in quarter bands from its oldest droppable turn, so span k is the same
    for every prefix of the request that has it): a second try reuses them instead of asking
    again, and the request's summary calls are counted across tries."""
    band = budget.band
    # the last resort (cutting inside the newest turns) is for the request, not for its prefix: a
    # prefix that needs it cannot be carried, and the request is fitted whole instead
    policy = policy.model_copy(update={"strategies": [s for s in policy.strategies if s != "truncate_recent_tool_results"]})
    part = Context(counter=ctx.counter, policy=policy, stop_at=mark, floor=mark - band, target=budget.target,
                   room=min(budget.room, mark), band=band, ceiling=mark, every_overflow=False,
                   least=math.ceil(budget.room * ROOM_BAR))
    part.originals, part.original_counts = messages, counts
    part.transcript = functools.cache(functools.partial(summary.transcript, dialect, part.originals))
    if policy.relevance == "bm25":
        part.relevance = functools.partial(_relevant_origins, dialect, part.originals, part.transcript, query=question)
    for action in ctx.actions:  # the output clamp of this request
        part.record(action.kind, action.tokens_saved, action.items)
    if known is not None:
        part.summaries = known
    part.summary_calls = ctx.summary_calls
    prefix = Conversation.build(dialect, messages, counts, fixed, policy.keep_recent_groups, policy.keep_first_user_turn)
    cut, part = yield from _fit(prefix, part, policy, can_summarize=summarizing)
    ctx.summary_calls = part.summary_calls
    if known is not None:
        known.update(part.summaries)  # (a restored snapshot holds a copy)
    return cut, part


def _cuts_into(cut: Conversation, part: Context, question: str, tail: Sequence[str]) -> bool:
    """Whether `question` asks about something only the part `cut` removed held: a term of it
    that the prefix's history has is in none of the messages the cut keeps, nor in `tail` (the
    transcript lines of the messages after the prefix)."""
    if part.transcript is None:
        return False
    lines = part.transcript()
    kept = [lines[o] if msg is part.originals[o] else summary.transcript(cut.dialect, (msg,))[0]
            for o, msg in zip(cut.origin, cut.messages) if o >= 0]
    return relevance.lost_terms(question, lines, [*kept, *tail])


def _questions(dialect: Dialect, messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The user turns' transcript lines without their label (what relevance scores against), in order."""
    users = [m for m in messages if dialect.is_user_turn(m)]
    return [line.split("] ", 1)[-1] for line in summary.transcript(dialect, tuple(users))] if users else []


def _query(dialect: Dialect, messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The last user message's question (see `_questions`)."""
    users = [m for m in messages if dialect.is_user_turn(m)]
    return _questions(dialect, users[-1:])[0] if users else None


@dataclass(frozen=True)
class _Unchanged:
    """The fast path's stand-in for a Conversation: a request that fits needs no grouping."""

    dialect: Dialect
    messages: tuple[Mapping[str, Any], ...]
    counts: tuple[int, ...]
    fixed: int

    @property
    def total(self) -> int:
        return self.fixed + sum(self.counts)


def _rounds(
    conv: Conversation, ctx: Context, policy: Policy, can_summarize: bool, spans: list[list[int]] | None = None
) -> Generator[Any, Any, Conversation]:
    """Run the strategies in order until the stop mark. Round 1 counts lossless rewrites by
    estimate; settling makes every count exact, and if the estimates were optimistic, round 2
    carries on from there with exact counts only."""
    names = list(STRATEGY_ORDER)
    for estimate in (True, False):
        ctx.estimate = estimate
        checkpoint: tuple[Conversation, Context] | None = None
        i = 0
        while i < len(names):
            name = names[i]
            i += 1
            if ctx.done(conv) and not (estimate and name in _ON_EVERY_OVERFLOW and ctx.every_overflow):
                break
            if spans and estimate and checkpoint is None:
                conv = yield from _reuse(conv, ctx, spans)  # a conversation once compacted stays so
                if ctx.done(conv):
                    break
                checkpoint = (conv, ctx.snapshot())
            if name == "clamp_output" or not policy.allows(name) or name in ctx.exhausted:
                continue
            if name == "summarize":
                if can_summarize and estimate:
                    known = len(ctx.summaries)
                    conv = yield from _summarize(conv, ctx, spans or [])
                    if len(ctx.summaries) > known and checkpoint is not None:
                        # a new summary: redo every step with the largest known summary in place
                        # first, exactly as the next fit of this request (which finds it cached)
                        # will; spans only grow, so this ends
                        conv, saved = checkpoint
                        summaries, calls = dict(ctx.summaries), ctx.summary_calls
                        ctx.restore(saved)
                        ctx.summaries, ctx.summary_calls = summaries, calls
                        checkpoint = (conv, saved)
                        conv = _apply_largest(conv, ctx, spans or [])
                        i = 0
                elif estimate:
                    ctx.skipped.append(Skipped("summarize", "no_summarizer"))
                continue
            if name in _NEWEST_TURN_STEPS:
                # the low-water mark is a target for older history only: the newest turns are cut
                # just enough to fit the room, and only if nothing else could (judged on exact
                # counts: round 1's estimates of lossless rewrites may overstate)
                if estimate or conv.total <= ctx.room:
                    continue
                saved_stop, ctx.stop_at = ctx.stop_at, max(ctx.stop_at, ctx.room)
                conv = STRATEGIES[name](conv, ctx)
                ctx.stop_at = saved_stop
                continue
            if name in _LOSSY_STEPS and estimate:
                # lossy cuts are measured on exact counts: estimates decide nothing that stays,
                # so the same history is cut the same way whichever round gets there
                conv = conv.settled(ctx)
                if ctx.done(conv):
                    break
            ctx.requantize(conv)
            conv = STRATEGIES[name](conv, ctx)
        conv = conv.settled(ctx)
        if ctx.done(conv):
            break
    return conv


def _without_wasted_cuts(start: Conversation, fitted: Conversation, ctx: Context, policy: Policy) -> tuple[Conversation, Context]:
    """Once turns had to be dropped, cut again from the start with the drop decided before any
    truncation: which turns go then depends only on the history's lossless state (so a growing
    conversation keeps the same cut), and the results that stay are truncated only if the drop
    still leaves the request over its mark (less lost, more of the room used)."""
    again = Context(
        counter=ctx.counter,
        policy=policy,
        stop_at=ctx.stop_at,
        floor=ctx.floor,
        target=ctx.target,
        room=ctx.room,
        band=ctx.band,
        ceiling=ctx.ceiling,
        every_overflow=ctx.every_overflow,
        least=ctx.least,
        skipped=list(ctx.skipped),
        relevance=ctx.relevance,
        transcript=ctx.transcript,
        _relevant=ctx._relevant,
    )
    for action in ctx.actions:
        if action.kind == "clamp_output":
            again.record(action.kind, action.tokens_saved, action.items)
    again.exhausted.update({"truncate_tool_results", "summarize"})  # the summarizer had its turn in the first pass
    conv = _drained(_rounds(start, again, policy, can_summarize=False))  # never yields: no summaries
    if not again.done(conv) and "drop_oldest_turns" in {a.kind for a in again.actions}:
        again.exhausted.discard("truncate_tool_results")
        again.exhausted.add("drop_oldest_turns")
        conv = _drained(_rounds(conv, again, policy, can_summarize=False))
    newest_cut = {a.kind for a in again.actions} & _NEWEST_TURN_STEPS - {a.kind for a in ctx.actions}
    # a carried cut's prefix is decided once per band (drop-first exists to keep a cut from moving
    # with the history, which cannot happen there): where dropping first would leave less than the
    # room bar and the first pass more, the first pass stands
    fuller = ctx.ceiling is not None and conv.total < ctx.least and ctx.done(fitted) and fitted.total > conv.total
    if again.done(conv) and conv.total <= ctx.room and not newest_cut and not fuller:  # never at the newest turns' cost
        return conv, again
    return fitted, ctx


def _orphans_restored(conv: Conversation, ctx: Context, originals: tuple[Mapping[str, Any], ...]) -> Conversation:
    """A result dedupe replaced by a marker whose first copy a later step dropped, summarized or
    truncated is sent again (as compact JSON) if the room allows: keeping the first copy must not
    lose the only copy."""
    if not ctx.duplicate_of:
        return conv
    where = {o: i for i, o in enumerate(conv.origin) if o >= 0}
    for (later, slot), (first, first_slot) in sorted(ctx.duplicate_of.items(), key=lambda kv: kv[0][0]):
        j = where.get(later)
        if j is None:
            continue
        current = dict(conv.dialect.tool_results(conv.messages[j])).get(slot)
        original = dict(conv.dialect.tool_results(originals[later])).get(slot)
        texts = content_texts(current)
        if not texts or not texts[0].startswith(DUPLICATE_MARK.split("{", 1)[0]) or original is None:
            continue  # not (or no longer) a marker
        i = where.get(first)
        if i is not None:
            kept = dict(conv.dialect.tool_results(conv.messages[i])).get(first_slot)
            source = dict(conv.dialect.tool_results(originals[first])).get(first_slot)
            if kept is not None and content_texts(kept) in (content_texts(source), [jsontext.compact(t) for t in content_texts(source)]):
                continue  # the first copy is there, whole
        restored = conv.dialect.with_tool_result(conv.messages[j], slot, map_texts(original, jsontext.compact))
        count = ctx.counter.message(conv.dialect, restored)
        if conv.total - conv.counts[j] + count > ctx.room:
            ctx.skipped.append(Skipped("dedupe", "first_copy_cut_no_room_to_restore"))
            continue
        old = conv.counts[j]
        conv = replace(conv, messages=conv.messages[:j] + (restored,) + conv.messages[j + 1 :],
                       counts=conv.counts[:j] + (count,) + conv.counts[j + 1 :])
        ctx.adjust("dedupe", old - count, -1)  # that duplicate is sent after all
    return conv


def _drained(gen: Generator[Any, Any, _T]) -> _T:
    """The value of a plan that never yields (no summarizer)."""
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def _clamp_output(budget: Budget, total: int, policy: Policy, ctx: Context, reasoning_floor: int = 0) -> Budget:
    """Lower the reserved output toward the policy floor (shared windows only, if allowed), never
    below what the body's thinking budget needs to stay valid."""
    floor = policy.min_output_tokens
    if floor is not None:
        floor = max(floor, reasoning_floor)
    if (
        not policy.allows("clamp_output")
        or floor is None
        or budget.limits.rule != "shared"
        or budget.reserved_output <= floor
    ):
        return budget
    needed = budget.limits.max_input_tokens - budget.margin - total  # output that would fit as is
    new = max(floor, min(budget.reserved_output, needed))
    ctx.record("clamp_output", budget.reserved_output - new, 1)
    return budget.with_output(new)


def _spans(start: Conversation, ctx: Context) -> list[list[int]]:
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


def _request(conv: Conversation, ctx: Context, span: list[int]) -> SummaryRequest:
    key = tuple(span)
    hit = ctx.requests.get(key)
    if hit is None:
        lines = ctx.transcript() if ctx.transcript is not None else None  # rendered once per request
        if span and span == list(range(span[0], span[-1] + 1)):  # spans are contiguous: slices
            part = slice(span[0], span[-1] + 1)
            messages, counts = ctx.originals[part], ctx.original_counts[part]
            texts = lines[part] if lines is not None else ()
        else:
            messages = tuple(ctx.originals[i] for i in span)
            counts = tuple(ctx.original_counts[i] for i in span)
            texts = [lines[i] for i in span] if lines is not None else ()
        hit = ctx.requests[key] = SummaryRequest(
            dialect=conv.dialect.name,
            messages=tuple(messages),
            span_tokens=sum(counts),
            max_tokens=ctx.policy.summary_max_tokens,
            lines=tuple(texts),
        )
    return hit


def _reuse(conv: Conversation, ctx: Context, spans: list[list[int]]) -> Generator[Any, Any, Conversation]:
    """Before any other step: look up which spans already have a summary and put the largest in."""
    if ctx.done(conv):
        return conv
    answers = yield CachedSummaries(tuple(_request(conv, ctx, span) for span in spans))
    if isinstance(answers, (tuple, list)):
        for k, text in enumerate(answers[: len(spans)]):
            if isinstance(text, str) and text.strip() and k not in ctx.summaries:  # (one this request asked for stays its)
                ctx.summaries[k] = (text.strip(), "cache")
    return _apply_largest(conv, ctx, spans)


def _apply_largest(conv: Conversation, ctx: Context, spans: list[list[int]]) -> Conversation:
    for k in sorted(ctx.summaries, reverse=True):
        if k >= len(spans):  # (known for a longer prefix of this request, see `_fit_prefix`)
            continue
        text, source = ctx.summaries[k]
        new = _apply(conv, ctx, spans[k], _request(conv, ctx, spans[k]), text, source)
        if new is not None:
            return new
    return conv


def _summarize(conv: Conversation, ctx: Context, spans: list[list[int]]) -> Generator[Any, Any, Conversation]:
    """Ask for a summary of the smallest span beyond those already known that brings the input
    below the summary low-water mark (or of the largest span there is)."""
    options = [k for k in range(len(spans)) if k > max(ctx.summaries, default=-1)]
    if not options:
        ctx.skipped.append(Skipped("summarize", "nothing_to_summarize" if not spans else "nothing_more_to_summarize"))
        return conv
    target = ctx.ceiling if ctx.ceiling is not None else math.floor(ctx.room * ctx.policy.summary_low_water_ratio)
    chosen = options[-1]
    for k in options:
        if _after(conv, ctx, spans[k]) + ctx.policy.summary_max_tokens <= target:
            chosen = k
            break
    request = _request(conv, ctx, spans[chosen])
    answer = yield request
    if not isinstance(answer, SummaryAnswer):
        answer = SummaryAnswer(answer if isinstance(answer, str) else None, None if isinstance(answer, str) else "no_summary")
    ctx.summary_calls += answer.calls
    if not isinstance(answer.text, str) or not answer.text.strip():
        ctx.summary = {**(ctx.summary or {"span_messages": len(request.messages), "span_tokens": request.span_tokens}), "calls": ctx.summary_calls}
        ctx.summary.setdefault("source", "none")
        ctx.skipped.append(Skipped("summarize", answer.reason or "summary_empty"))
        return conv
    ctx.summaries[chosen] = (answer.text.strip(), answer.source)
    new = _apply(conv, ctx, spans[chosen], request, answer.text.strip(), answer.source)
    if new is None:
        ctx.skipped.append(Skipped("summarize", "summary_not_shorter"))
        return conv
    return new


def _covered(conv: Conversation, ctx: Context, span: list[int]) -> set[int]:
    """Current indices of the span's messages, and of the summary already standing for part of it."""
    inside = set(span)
    out = {i for i, o in enumerate(conv.origin) if o in inside}
    if ctx.summary_message is not None:
        out |= {i for i, m in enumerate(conv.messages) if m is ctx.summary_message}
    return out


def _after(conv: Conversation, ctx: Context, span: list[int]) -> int:
    return conv.total - sum(conv.counts[i] for i in _covered(conv, ctx, span))


def _apply(conv: Conversation, ctx: Context, span: list[int], request: SummaryRequest, text: str, source: str) -> Conversation | None:
    """The conversation with the span (and any smaller summary of it) replaced by the summary, or
    None if that would not save tokens."""
    replaced = _covered(conv, ctx, span)
    if not replaced:
        return None
    # a prompt-cache breakpoint among the summarized messages moves onto the summary
    breakpoints = [bp for i in sorted(replaced) if (bp := cache_breakpoint(conv.messages[i])) is not None]
    msg = conv.dialect.marker(SUMMARY_MARK.format(m=len(span), n=request.span_tokens) + text, breakpoints[-1] if breakpoints else None)
    count = ctx.counter.message(conv.dialect, msg)
    saved = sum(conv.counts[i] for i in replaced) - count
    if saved <= 0:
        return None
    if ctx.summary_span is not None:
        ctx.adjust("summarize", 0, -len(ctx.summary_span))  # the new summary takes the old one's place
    ctx.record("summarize", saved, len(span))
    ctx.summary_message, ctx.summary_span = msg, span
    ctx.summary = {
        "source": source,
        "calls": ctx.summary_calls,
        "span_messages": len(span),
        "span_tokens": request.span_tokens,
        "summary_tokens": count,
    }
    return conv.replacing(replaced, {min(replaced): (msg, count)})


def _relevant_origins(
    dialect: Dialect, messages: tuple[Mapping[str, Any], ...], transcript: Callable[[], list[str]],
    summarized: frozenset[int], edges: tuple[int, ...], query: str | None = None,
) -> frozenset[int]:
    """Indices of the messages (not system, not the last user turn or its copies, not summarized,
    not after the last of `edges`) the last user message is about. Each band of the history (between two
    edges) is judged with BM25's statistics of the history up to its own end, so a band, once
    whole, keeps its verdicts however far the conversation grows."""
    users = [i for i, m in enumerate(messages) if dialect.is_user_turn(m)]
    if not users:
        return frozenset()
    lines = transcript()
    last = users[-1]
    if query is None:  # (a carried cut scores its prefix against the whole request's question)
        query = lines[last].split("] ", 1)[-1]  # without the "[user]" label every user line would share
    # earlier copies of the question are not what it is about: agent frameworks resend the same
    # nudge ("please proceed") as a user turn, and each copy would match it best, set the bar of
    # what counts as relevant and move with every new copy
    candidates = [
        i for i, m in enumerate(messages[: edges[-1] + 1])
        if lines[i] != lines[last] and lines[i].split("] ", 1)[-1] != query and i not in summarized and not dialect.is_system(m)
    ]
    ends = [bisect.bisect_right(candidates, edge) for edge in edges]
    hot = relevance.relevant_in_bands(query, [lines[i] for i in candidates], ends)
    return frozenset(candidates[j] for j in hot)


def _breakdown(conv: Conversation | _Unchanged, counter: TokenCounter, body: Mapping[str, Any]) -> dict[str, int]:
    system = tool_results = history = 0
    for msg, n in zip(conv.messages, conv.counts):
        if conv.dialect.is_system(msg):
            system += n
        elif conv.dialect.tool_results(msg) and not conv.dialect.is_user_turn(msg):
            tool_results += n
        else:
            history += n
    for key in conv.dialect.system_keys:  # a pinned prompt outside the list of turns
        if key in body:
            system += counter.fixed(conv.dialect, {key: body[key]}) - counter.fixed(conv.dialect, {})
    return {
        "system": system,
        "history": history,
        "tool_results": tool_results,
        "tools_and_framing": conv.total - system - history - tool_results,
    }


def _cut(dialect: Dialect, originals: tuple[Mapping[str, Any], ...], conv: Conversation) -> str:
    """The fingerprint of a cut (see Report.cut): the messages dropped, and every message edited
    or inserted with its hash, in order. A message whose only edit is compact JSON is left out:
    that rewrite is a pure function of the message, applied to all of them once a conversation is
    over its room (which every cut conversation is), so new JSON results would otherwise change
    the fingerprint while the prompt still starts with the previous one."""
    edits: list[Any] = []
    for msg, origin in zip(conv.messages, conv.origin):
        if origin < 0:
            edits.append(["inserted", _sha256(msg)])
            continue
        original = originals[origin]
        if msg is original or msg == original or msg == compacted(dialect, original):
            continue
        edits.append([origin, _sha256(msg)])
    kept = set(conv.origin)
    dropped = [i for i in range(len(originals)) if i not in kept]
    return _sha256(["over-room", dropped, edits])[:16]


def _sha256(value: Any) -> str:
    data = compact_json(value)  # key order is kept
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


def run(p: Plan, summarize: Callable[[SummaryRequest], "str | None"] | None = None) -> Fitted:
    """Drive a plan synchronously; a failing summarizer counts as no summary, and there is no
    cache to look in."""
    try:
        request = next(p)
        while True:
            answer: Any = None
            if isinstance(request, CachedSummaries):
                answer = (None,) * len(request.requests)
            elif summarize is not None:
                try:
                    answer = summarize(request)
                except Exception:  # the deterministic path must go on
                    answer = None
            request = p.send(answer)
    except StopIteration as stop:
        return stop.value
