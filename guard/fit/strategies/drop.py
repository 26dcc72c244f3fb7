"""Dropping the oldest whole turn groups: a tool call always leaves with all of its results."""

from __future__ import annotations

import bisect
from dataclasses import replace

from guard.core.tokens import TokenCounter
from guard.dialects import MARKER_PREFIX, Message, cache_breakpoint, last_breakpoints
from guard.fit.conversation import Context, Conversation, Outcome

OMITTED_MARK = MARKER_PREFIX + " {m} earlier messages omitted to fit the context window]"


def droppable_groups(conv: Conversation) -> list[list[int]]:
    """Message indices per group, oldest first, for groups with no pinned or recent message."""
    by_group: dict[int, list[int]] = {}
    blocked: set[int] = set()
    for i, g in enumerate(conv.groups):
        by_group.setdefault(g, []).append(i)
        if conv.pinned[i] or conv.recent[i]:
            blocked.add(g)
    return [idx for g, idx in by_group.items() if g not in blocked]


def drop_oldest_turns(conv: Conversation, ctx: Context) -> Outcome:
    """Drop the oldest droppable groups (those the last user message is about last) until at the
    stop mark, passing over a group that would
    cut far below it when later ones can do; each run of dropped messages is replaced by one
    marker message that says how many messages and tokens went."""
    ctx = ctx.own()
    if ctx.done(conv):
        return ctx.outcome(conv)
    breakpoints = last_breakpoints(conv.messages)  # (once: each candidate below reads them)
    again = _again(conv, ctx, breakpoints)
    if again is not None:
        chosen, result = again
        if chosen:
            ctx.record("drop_oldest_turns", conv.total - result.total, len(chosen))
    else:
        groups = ctx.relevant_last(droppable_groups(conv), lambda g: (conv.origin[i] for i in g))
        chosen = _oldest_first(conv, ctx, groups, breakpoints, skip_overshoot=True)
        if _Runs(conv, ctx, chosen, breakpoints).total > ctx.stop_at:
            chosen = _oldest_first(conv, ctx, groups, breakpoints, skip_overshoot=False)
        chosen = _restore(conv, ctx, groups, chosen, breakpoints)
        result = drop_messages(conv, ctx, chosen, breakpoints)
    dropped = ctx.history.dropped
    if dropped and result is not conv and dropped <= {conv.origin[i] for i in chosen}:
        result = replace(result, fixed=result.fixed - ctx.history.dropped_ghost)  # (it goes with them)
    # turns given back may end between the stop mark and the low-water mark: that is still below
    # the target, so nothing after this step (the last-resort truncation) should cut further
    below = ctx.target if ctx.ceiling is None else ctx.ceiling
    ctx.marks = ctx.marks.stopping_at(max(ctx.stop_at, min(result.total, below)))
    return ctx.outcome(result)


def _again(conv: Conversation, ctx: Context, breakpoints: list[int]) -> tuple[set[int], Conversation] | None:
    """The messages a carried cut dropped when it was made (`History.dropped`, for a history the
    client edited since), where they are whole droppable groups here and dropping them again reaches
    the stop mark: the same oldest turns go, so the kept ones are sent as they were, whatever the
    client did to those that went (stubbed them: smaller groups another choice would give back, or
    other words for relevance: the tokens it took out of them stand in the conversation's fixed
    tokens until they go), and the conversation without them. None: the drop chooses."""
    dropped = ctx.history.dropped
    if dropped is None or not (dropped or ctx.history.forced):
        return None
    chosen = {i for i, o in enumerate(conv.origin) if o in dropped}
    if not chosen and ctx.history.forced:  # (dropped first, a round before: truncation goes on)
        return chosen, conv
    whole = [g for g in droppable_groups(conv) if chosen.intersection(g)]
    if len(chosen) != len(dropped) or sum(len(g) for g in whole) != len(chosen):
        return None
    result = _without(conv, ctx, chosen, breakpoints)
    if result.total >= conv.total:  # (their markers would cost more than they do now)
        return None
    if ctx.history.forced:  # the drop decided first (`guard.fit.rounds._drop_first`): truncation goes on
        return chosen, result
    return (chosen, result) if ctx.done(replace(result, fixed=result.fixed - ctx.history.dropped_ghost)) else None


def _restore(
    conv: Conversation, ctx: Context, groups: list[list[int]], chosen: set[int], breakpoints: list[int]
) -> set[int]:
    """Give back dropped groups, newest first, that fit below the low-water mark (a big old turn
    may have had to go, while smaller ones dropped before it need not have)."""
    if not chosen:
        return chosen
    limit = ctx.stop_at
    runs = _Runs(conv, ctx, chosen, breakpoints)
    for group in reversed(groups):
        if not chosen.issuperset(group):
            continue
        size = sum(conv.counts[i] for i in group)
        if size > limit - runs.total:
            continue
        total = runs.total_without(group)
        if total is None:  # a group that is not one contiguous block: build the candidate
            trial = chosen - set(group)
            if _without(conv, ctx, trial, breakpoints).total <= limit:
                chosen = trial
                runs = _Runs(conv, ctx, chosen, breakpoints)
        elif total <= limit:
            chosen = chosen - set(group)
            runs.give_back(group, total)
    return chosen


class _Runs:
    """The runs of dropped messages (each becomes one marker) and the total they leave, updated
    as groups are given back: the total `_without(conv, ctx, chosen, breakpoints)` would have, without
    rebuilding the conversation for every candidate (10,000-message requests stay linear)."""

    def __init__(self, conv: Conversation, ctx: Context, chosen: set[int], breakpoints: list[int]) -> None:
        self.conv, self.ctx = conv, ctx
        self.breakpoints = breakpoints
        self.prefix = [0]
        for n in conv.counts:
            self.prefix.append(self.prefix[-1] + n)
        self.starts: list[int] = []
        self.ends: list[int] = []
        for i in sorted(chosen):
            if self.ends and self.ends[-1] == i - 1:
                self.ends[-1] = i
            else:
                self.starts.append(i)
                self.ends.append(i)
        self.total = conv.total - sum(self._tokens(a, b) - self._marker(a, b) for a, b in zip(self.starts, self.ends))

    def _tokens(self, a: int, b: int) -> int:
        return self.prefix[b + 1] - self.prefix[a]

    def _marker(self, a: int, b: int) -> int:
        if a > b:
            return 0
        msg = _marker(self.conv, a, b, self.breakpoints)
        return self.ctx.counter.message(self.conv.dialect, msg)

    def total_without(self, group: list[int]) -> int | None:
        """The total once `group` (dropped now) is given back; None if it is not contiguous."""
        lo, hi = group[0], group[-1]
        if group != list(range(lo, hi + 1)):
            return None
        k = bisect.bisect_right(self.starts, lo) - 1
        a, b = self.starts[k], self.ends[k]
        return (
            self.total + self._tokens(lo, hi) - self._marker(a, b) + self._marker(a, lo - 1) + self._marker(hi + 1, b)
        )

    def give_back(self, group: list[int], total: int) -> None:
        lo, hi = group[0], group[-1]
        k = bisect.bisect_right(self.starts, lo) - 1
        a, b = self.starts[k], self.ends[k]
        parts = [(x, y) for x, y in ((a, lo - 1), (hi + 1, b)) if x <= y]
        self.starts[k : k + 1] = [x for x, _ in parts]
        self.ends[k : k + 1] = [y for _, y in parts]
        self.total = total


def _oldest_first(
    conv: Conversation, ctx: Context, groups: list[list[int]], breakpoints: list[int], *, skip_overshoot: bool
) -> set[int]:
    """Groups to drop, oldest first, until at the stop mark. With `skip_overshoot`, a group whose
    removal would fall below the band floor is passed over for later, smaller ones, so that one
    big old turn does not take half the window with it."""
    total = conv.total
    chosen: set[int] = set()
    for group in groups:
        size = sum(conv.counts[i] for i in group)
        if skip_overshoot and total - size < ctx.floor:
            continue
        chosen.update(group)
        total -= size
        # markers cost a few dozen tokens: only count them once the candidate can be enough
        if total <= ctx.stop_at and _Runs(conv, ctx, chosen, breakpoints).total <= ctx.stop_at:
            break
    return chosen


def drop_messages(conv: Conversation, ctx: Context, chosen: set[int], breakpoints: list[int]) -> Conversation:
    """Drop the messages at `chosen` (whole groups), each run replaced by one marker
    (`breakpoints`: `last_breakpoints` of its messages)."""
    if not chosen:
        return conv
    before = conv.total
    result = _without(conv, ctx, chosen, breakpoints)
    if result.total >= before:
        return conv
    ctx.record("drop_oldest_turns", before - result.total, len(chosen))
    return result


def _marker(conv: Conversation, a: int, b: int, breakpoints: list[int], slid: int = 0) -> Message:
    """The marker standing for messages a..b and `slid` more the client took out before them: how
    many, not their tokens (a client that edits messages the guard already dropped, stubbing old
    results or sliding a window of its newest messages past them, leaves the marker and the cached
    prefix after it as they were: `guard.fit.edited`). A prompt-cache breakpoint among them moves
    onto it (Anthropic `cache_control`): the cache still ends where the client wanted, and the
    number of breakpoints never grows (one or more dropped, at most one added)."""
    last = breakpoints[b]
    cache_control = cache_breakpoint(conv.messages[last]) if last >= a else None
    return conv.dialect.marker(OMITTED_MARK.format(m=b - a + 1 + slid), cache_control)


def standing_marker(conv: Conversation, counter: TokenCounter, at: int, slid: int) -> Conversation:
    """`conv` with the marker of `slid` messages before the message of the history's place `at`:
    a carried cut's first run of dropped messages that the client has since taken out whole (a
    window of its newest messages slid past it) keeps its marker where it was, pinned."""
    place = next((i for i, o in enumerate(conv.origin) if o >= at), None)
    if place is None:
        return conv
    msg = conv.dialect.marker(OMITTED_MARK.format(m=slid), None)
    return conv.replacing(set(), {place: (msg, counter.message(conv.dialect, msg))})


def _without(conv: Conversation, ctx: Context, chosen: set[int], breakpoints: list[int]) -> Conversation:
    markers = {}
    run: list[int] = []
    slid, at = ctx.history.slid  # (the messages the client took out where the first run starts)
    for i in range(len(conv.messages) + 1):
        if i < len(conv.messages) and i in chosen:
            run.append(i)
            continue
        if run:
            msg = _marker(conv, run[0], run[-1], breakpoints, slid if conv.origin[run[0]] == at else 0)
            markers[run[0]] = (msg, ctx.counter.message(conv.dialect, msg))
            run = []
    return conv.replacing(chosen, markers)
