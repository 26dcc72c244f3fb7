"""Dropping the oldest whole turn groups: a tool call always leaves with all of its results."""

from __future__ import annotations

from guard.conversation import Context, Conversation
from guard.dialects import MARKER_PREFIX

OMITTED_MARK = MARKER_PREFIX + " {m} earlier messages ({n} tokens) omitted to fit the context window]"


def droppable_groups(conv: Conversation) -> list[list[int]]:
    """Message indices per group, oldest first, for groups with no pinned or recent message."""
    by_group: dict[int, list[int]] = {}
    blocked: set[int] = set()
    for i, g in enumerate(conv.groups):
        by_group.setdefault(g, []).append(i)
        if conv.pinned[i] or conv.recent[i]:
            blocked.add(g)
    return [idx for g, idx in by_group.items() if g not in blocked]


def drop_oldest_turns(conv: Conversation, ctx: Context) -> Conversation:
    """Drop the oldest droppable groups until at the stop mark; each run of dropped messages is
    replaced by one marker message that says how many messages and tokens went."""
    if ctx.done(conv):
        return conv
    before = conv.total
    over = before - ctx.stop_at
    chosen: set[int] = set()
    dropped = 0
    for group in droppable_groups(conv):
        chosen.update(group)
        dropped += sum(conv.counts[i] for i in group)
        # markers cost a few dozen tokens: only build the candidate once it can be enough
        if dropped >= over and ctx.done(_without(conv, ctx, chosen)):
            break
    if not chosen:
        return conv
    result = _without(conv, ctx, chosen)
    if result.total >= before:
        return conv
    ctx.record("drop_oldest_turns", before - result.total, len(chosen))
    return result


def _without(conv: Conversation, ctx: Context, chosen: set[int]) -> Conversation:
    markers = {}
    run: list[int] = []
    for i in range(len(conv.messages) + 1):
        if i < len(conv.messages) and i in chosen:
            run.append(i)
            continue
        if run:
            tokens = sum(conv.counts[j] for j in run)
            msg = conv.dialect.marker(OMITTED_MARK.format(m=len(run), n=tokens))
            markers[run[0]] = (msg, ctx.counter.message(conv.dialect, msg))
            run = []
    return conv.replacing(chosen, markers)
