"""Lossless and near-lossless JSON savings: compact serialization, then bulky metadata keys."""

from __future__ import annotations

from itertools import chain

from guard.core import jsontext
from guard.dialects import Content, Dialect, Message, map_texts
from guard.fit.conversation import Context, Conversation, Outcome
from guard.fit.rewrite import Rewrite, ToolResult, rewrite_tool_results


def compact_json(conv: Conversation, ctx: Context) -> Outcome:
    """Re-serialize every JSON tool result without whitespace (same data, fewer tokens; the only
    rewrite allowed inside the newest turns). All of them, not just enough: each result then has
    one form for as long as the conversation is over its room, so the prompt a provider cached on
    the previous turn is still a prefix of this one."""
    ctx = ctx.own()
    older = conv.tool_slots(recent=False)
    newest = [s for s in conv.tool_slots(recent=True) if conv.recent[s[0]]]

    def transform(result: ToolResult) -> Content:
        return map_texts(result.content, jsontext.compact)

    rewrite = Rewrite("compact_json", transform, lossless=True, exhaustive=True)
    return ctx.outcome(rewrite_tool_results(conv, ctx, rewrite, chain(older, newest)))


def compacted(dialect: Dialect, msg: Message) -> Message:
    """The message as `compact_json` leaves it (a pure function of the message)."""
    out: Message = msg
    for slot, content in dialect.tool_results(msg):
        new = map_texts(content, jsontext.compact)
        if new is not content:
            out = dialect.with_tool_result(out, slot, new)
    return out


def drop_metadata(conv: Conversation, ctx: Context) -> Outcome:
    """Remove the policy's bulky keys (embeddings, raw html, metadata dicts) from older JSON tool
    results, keeping citation keys (id, title, url, ...) of bulky dicts.

    Like compaction, a near-lossless rewrite of one message at a time: it runs on every
    conversation over its room (the planner does not stop before it) and takes every settled
    older result at once (`Context.settled_slots`), so the edge of what it rewrote moves once per
    band of growth, never on the oldest messages again. Only if that is not enough does it go on
    to the older results that just left the newest turns (see `Context.settled_first`)."""
    ctx = ctx.own()
    bulky, citation = ctx.policy.metadata_keys, ctx.policy.citation_keys

    def transform(result: ToolResult) -> Content:
        return map_texts(result.content, lambda text: jsontext.drop_keys(text, bulky, citation))

    older = list(conv.tool_slots(recent=False))
    settled = ctx.settled_slots(conv, older)
    conv = rewrite_tool_results(
        conv, ctx, Rewrite("drop_metadata", transform, lossless=True, exhaustive=ctx.every_overflow), settled
    )
    if not ctx.done(conv) and len(settled) < len(older):  # (a second pass over the same slots finds nothing)
        rewrite = Rewrite("drop_metadata", transform, lossless=True)
        conv = ctx.settled_first(
            conv, conv.tool_slots(recent=False), lambda c, slots: rewrite_tool_results(conv, c, rewrite, slots)
        )
    return ctx.outcome(conv)
