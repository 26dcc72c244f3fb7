"""The rounds of strategies that fit one conversation to its context's marks, least destructive
first, and the two passes after them: the drop decided before any truncation, and first copies of
deduplicated results sent again."""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from guard.core import jsontext
from guard.core.content import content_texts, map_texts
from guard.core.policy import Policy
from guard.core.report import Skipped
from guard.core.steps import CLAMP, MARKS_COPIES, SHRINKING, STEPS, SUMMARIZE, WHOLE_TURNS, of_kind
from guard.fit.conversation import Context, Conversation
from guard.fit.ledger import Ledger
from guard.fit.spans import apply_largest, candidates, reuse, summarize
from guard.fit.strategies import STRATEGIES
from guard.fit.strategies.dedupe import DUPLICATE_MARK
from guard.fit.strategies.drop import droppable_groups
from guard.fit.strategies.truncate import falls_short

_NEWEST = of_kind("newest")

_T = TypeVar("_T")


def fit(
    conv: Conversation, ctx: Context, policy: Policy, can_summarize: bool
) -> Generator[Any, Any, tuple[Conversation, Context]]:
    """Run the strategies on a conversation over its room (the context holds its marks)."""
    start, history = conv, ctx.history
    if history.dropped is not None and history.slid[0] and not can_summarize:
        # a carried cut made again in a history the client slid: its drop first, as it was made
        early: tuple[Conversation, Context] | None = _drop_first(
            start, ctx, policy, ctx.skipped, dropped=history.dropped
        )
    else:
        early = None if can_summarize else _dropped_first(start, ctx, policy)
    if early is not None:
        cut, ctx = early
    else:
        spans = candidates(conv, ctx) if can_summarize else []
        cut = yield from rounds(conv, ctx, policy, can_summarize, spans)
        kinds = {a.kind for a in ctx.actions}
        if WHOLE_TURNS in kinds and SUMMARIZE not in kinds:
            cut, ctx = _without_wasted_cuts(start, cut, ctx, policy)
    ctx.history = history  # (for what reads the fit after it)
    return _orphans_restored(cut, ctx, history.messages), ctx


def rounds(
    conv: Conversation,
    ctx: Context,
    policy: Policy,
    can_summarize: bool,
    spans: list[list[int]] | None = None,
    proceed: Callable[[Conversation, int], bool] | None = None,
) -> Generator[Any, Any, Conversation]:
    """Run the strategies in order until the stop mark. Round 1 counts lossless rewrites by estimate;
    settling makes every count exact, and if the estimates were optimistic, round 2 carries on from
    there with exact counts only. `proceed` is asked before each lossy step, given the conversation
    and its stop mark: False ends the round there."""
    base = ctx  # with summaries: the context at the checkpoint, the steps after it tried on `ctx`
    for estimate in (True, False):
        ctx.estimate = estimate
        checkpoint: Conversation | None = None
        i = 0
        while i < len(STEPS):
            step = STEPS[i]
            name, kind = step.name, step.kind
            i += 1
            if ctx.done(conv) and not (estimate and step.every_overflow and ctx.every_overflow):
                break
            if spans and estimate and checkpoint is None:
                conv = yield from reuse(conv, ctx, spans)  # a conversation once compacted stays so
                if ctx.done(conv):
                    break
                checkpoint, ctx = conv, base.trial(summaries=True)
            if kind == "budget" or not policy.allows(name) or name in ctx.exhausted:
                continue
            if kind == "summary":
                if can_summarize and estimate:
                    known = len(ctx.summarized.known)
                    conv = yield from summarize(conv, ctx, spans or [])
                    if len(ctx.summarized.known) > known and checkpoint is not None:
                        # a new summary: redo every step with the largest known summary in place first,
                        # as the next fit of this request (which finds it cached) will; spans only grow
                        ctx = _from_checkpoint(base, ctx)
                        conv, i = apply_largest(checkpoint, ctx, spans or []), 0
                elif estimate:
                    ctx.skipped.append(Skipped(name, "no_summarizer"))
                continue
            if kind == "newest":
                conv = conv if estimate else _to_room(name, conv, ctx)
                continue
            if kind == "lossy" and estimate:
                # lossy cuts on exact counts: estimates decide nothing that stays (the same cut in either round)
                conv = conv.settled(ctx)
                if ctx.done(conv):
                    break
            ctx.requantize(conv)
            if kind == "lossy" and proceed is not None and not proceed(conv, ctx.stop_at):
                break
            conv = ctx.take(STRATEGIES[name](conv, ctx))
        conv = conv.settled(ctx)
        if ctx.done(conv):
            break
    if ctx is not base:
        base.commit(ctx)
    return conv


def _from_checkpoint(base: Context, tried: Context) -> Context:
    """A new trial of the context at the checkpoint (`base`, untouched since), knowing the
    summaries `tried` got and the calls it made (what a fit learns of its summaries only grows)."""
    fresh = base.trial(summaries=True)
    fresh.summarized.known, fresh.summarized.calls = dict(tried.summarized.known), tried.summarized.calls
    return fresh


def _to_room(name: str, conv: Conversation, ctx: Context) -> Conversation:
    """A step inside the newest turns, run only as far as the room, and only if the request is over
    it: the low-water mark is a target for older history only, and the newest turns are cut just
    enough to fit, only if nothing else could (judged on exact counts, not round 1's estimates)."""
    if conv.total <= ctx.room:
        return conv
    stop_at = ctx.stop_at
    out = STRATEGIES[name](conv, replace(ctx, marks=ctx.marks.stopping_at(max(stop_at, ctx.room))))
    conv = ctx.take(out)
    ctx.marks = ctx.marks.stopping_at(stop_at)
    return conv


def _without_wasted_cuts(
    start: Conversation, fitted: Conversation, ctx: Context, policy: Policy
) -> tuple[Conversation, Context]:
    """Once turns had to be dropped, cut again from the start with the drop decided before any
    truncation: which turns go then depends only on the history's lossless state (so a growing
    conversation keeps the same cut), and the results that stay are truncated only if the drop
    still leaves the request over its mark (less lost, more of the room used)."""
    conv, again = _drop_first(start, ctx, policy, ctx.skipped)
    if _stands(conv, again, ctx, fitted):
        return conv, again
    # the first pass stands: made again with its own drop decided first, so a result it truncated
    # and then dropped does not have the ones that stay truncated further, and the cut is the one a
    # history the client slides since makes again (`History.forced`: the same messages go first).
    # Where the results that stay cannot be truncated to the mark (truncation steps coarsely), with
    # the next oldest turn dropped too, up to `_MORE_GROUPS` of them
    dropped = frozenset(o for o in start.origin if o >= 0) - frozenset(fitted.origin)
    more = [g for g in droppable_groups(start) if not dropped.intersection(start.origin[i] for i in g)]
    for extra in range(_MORE_GROUPS + 1):
        went = dropped.union(start.origin[i] for g in more[:extra] for i in g)
        conv, again = _drop_first(start, ctx, policy, ctx.skipped, dropped=went)
        if _stands(conv, again, ctx, fitted):
            return conv, again
        if again.done(conv) or extra == len(more):
            break
    return fitted, ctx


# the oldest turns a first pass's cut made again with its drop first may drop beyond its own
# (bench.sweep --client sliding:20 at 30/50/70%, session 72: needless breaks 57 / 45 / 16 with none,
# 53 / 38 / 15 with two)
_MORE_GROUPS = 2


def _stands(conv: Conversation, again: Context, ctx: Context, fitted: Conversation | None) -> bool:
    """Whether the drop-first cut `conv` (made with `again`) is sent rather than the first pass's
    `fitted` (made with `ctx`; None: not made, and whatever it might have been counts against the
    cut). It must fit, and never at the newest turns' cost (no cut inside them the first pass did
    not make). A carried cut's prefix is decided once per band (drop-first exists to keep a cut
    from moving with the history, which cannot happen there): where dropping first would leave
    less than the room bar and the first pass more, the first pass stands."""
    newest_cut = {a.kind for a in again.actions} & _NEWEST - {a.kind for a in ctx.actions}
    fuller = (
        ctx.ceiling is not None
        and conv.total < ctx.least
        and (fitted is None or (ctx.done(fitted) and fitted.total > conv.total))
    )
    return again.done(conv) and conv.total <= ctx.room and not newest_cut and not fuller


def _dropped_first(start: Conversation, ctx: Context, policy: Policy) -> tuple[Conversation, Context] | None:
    """The drop-first cut (see `_without_wasted_cuts`) without the first pass, where that pass
    would only have been undone: truncating every older tool result falls short of the mark (so
    the first pass drops turns), and the drop-first cut stands whatever the first pass made of the
    request (`_stands` without it). None where the first pass must run. Most of a large
    overflow's fit is that truncation, done to be thrown away. The first pass would have skipped
    the summarizer on its way to the drop: so does this cut's report."""
    if not policy.allows(WHOLE_TURNS):
        return None  # (no drop: the cut below would stand only where turns were dropped)
    if ctx.ceiling is not None and not falls_short(start, ctx.ceiling, policy, ctx.counter.factor):
        # a carried cut's prefix stops at its fixed mark, and the rewrites before the first lossy
        # step only lower counts: where truncation reaches the mark from the history as it came,
        # it reaches it after them too, and this cut would be thrown away (no need to make it)
        return None
    skipped = list(ctx.skipped)
    if policy.allows(SUMMARIZE) and SUMMARIZE not in ctx.exhausted:
        skipped.append(Skipped(SUMMARIZE, "no_summarizer"))
    decided: list[bool] = []  # whether truncation falls short, judged before the first lossy step

    def proceed(conv: Conversation, stop_at: int) -> bool:
        if not decided:
            decided.append(falls_short(conv, stop_at, policy, ctx.counter.factor))
        return decided[0]

    conv, again = _drop_first(start, ctx, policy, skipped, proceed)
    dropped = WHOLE_TURNS in {a.kind for a in again.actions}
    return (conv, again) if decided == [True] and dropped and _stands(conv, again, ctx, None) else None


def _drop_first(
    start: Conversation,
    ctx: Context,
    policy: Policy,
    skipped: list[Skipped],
    proceed: Callable[[Conversation, int], bool] | None = None,
    dropped: frozenset[int] | None = None,
) -> tuple[Conversation, Context]:
    """`start` cut with the drop decided before any truncation, and the context that cut it (a
    new one: `ctx`'s marks, its output clamp and relevance verdicts, the steps it `skipped`); with
    `dropped`, those messages are the drop (`History.dropped`), and truncation goes on from there."""
    again = Context(
        counter=ctx.counter,
        policy=policy,
        marks=ctx.marks,
        ledger=Ledger(skipped=list(skipped)),
        # the drop-first pass sees no counts as sent: every older slot counts as settled (no step
        # waits for a band), and relevance keeps its verdicts (one per fit, see History.relevant)
        history=replace(ctx.history, all_settled=True) if dropped is None else ctx.history.kept_first(dropped),
    )
    for action in ctx.actions:
        if action.kind == CLAMP:
            again.record(action.kind, action.tokens_saved, action.items)
    again.exhausted.update({*SHRINKING, SUMMARIZE})  # the summarizer had its turn in the first pass
    conv = drained(rounds(start, again, policy, can_summarize=False, proceed=proceed))  # never yields: no summaries
    if not again.done(conv) and (WHOLE_TURNS in {a.kind for a in again.actions} or dropped is not None):
        again.exhausted.difference_update(SHRINKING)
        again.exhausted.add(WHOLE_TURNS)
        if not again.history.forced:  # what stays is read as a cut made again on it reads it
            went = frozenset(o for o in start.origin if o >= 0) - frozenset(conv.origin)
            again.history = again.history.kept_first(went)
        conv = drained(rounds(conv, again, policy, can_summarize=False))
    return conv, again


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
            if kept is not None and content_texts(kept) in (
                content_texts(source),
                [jsontext.compact(t) for t in content_texts(source)],
            ):
                continue  # the first copy is there, whole
        restored = conv.dialect.with_tool_result(conv.messages[j], slot, map_texts(original, jsontext.compact))
        count = ctx.counter.message(conv.dialect, restored)
        if conv.total - conv.counts[j] + count > ctx.room:
            ctx.skipped.append(Skipped(MARKS_COPIES, "first_copy_cut_no_room_to_restore"))
            continue
        old = conv.counts[j]
        conv = replace(
            conv,
            messages=(*conv.messages[:j], restored, *conv.messages[j + 1 :]),
            counts=(*conv.counts[:j], count, *conv.counts[j + 1 :]),
        )
        ctx.adjust(MARKS_COPIES, old - count, -1)  # that duplicate is sent after all
    return conv


def drained(gen: Generator[Any, Any, _T]) -> _T:
    """The value of a plan that never yields (no summarizer)."""
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
