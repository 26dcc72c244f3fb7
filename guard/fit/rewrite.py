"""Rewriting tool results in place, one slot at a time, until a conversation reaches its stop mark:
the loop every rewriting strategy (compact, metadata, dedupe, truncation) shares, with the
estimated counts of lossless rewrites (see `Context.estimate`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from guard.core.content import Content, content_texts
from guard.dialects import Dialect
from guard.fit.conversation import Context, Conversation, Estimate

Message = Mapping[str, Any]


@dataclass(frozen=True)
class ToolResult:
    """One tool result as a strategy sees it."""

    index: int  # message index
    slot: int | None  # block index (Anthropic) or None (OpenAI tool message)
    content: Content
    message_tokens: int  # the whole message's count: an upper bound of the content's tokens
    over: int  # tokens still to save to reach the stop mark


@dataclass(frozen=True)
class Rewrite:
    """A step's rewrite of tool results: its name (`kind`, the action it records), the new content
    of one result (`transform`; the same object to leave it alone), whether it is `lossless` and
    whether it is `exhaustive` (see `rewrite_tool_results`)."""

    kind: str
    transform: Callable[[ToolResult], Content]
    lossless: bool = False
    exhaustive: bool = False


def rewrite_tool_results(
    conv: Conversation, ctx: Context, rewrite: Rewrite, slots: Iterable[tuple[int, int | None, Content]]
) -> Conversation:
    """Apply `rewrite.transform` to tool results in order until the conversation is at the stop mark.

    A rewrite is kept only if it lowers the message's count, so input tokens never grow.
    `transform` returns the same content object to leave a result alone. `lossless` rewrites
    are counted by estimate when the context allows (see Context). `exhaustive` rewrites every
    slot, past the stop mark (for a pure per-message rewrite: each message then has one form for
    as long as the conversation is over its room, turn after turn).
    """
    kind, transform, lossless, exhaustive = rewrite.kind, rewrite.transform, rewrite.lossless, rewrite.exhaustive
    dialect = conv.dialect
    msgs, counts, pending = list(conv.messages), list(conv.counts), list(conv.pending)
    chars: dict[int, int] = {}  # tool-result characters of messages rewritten so far (see _estimated)
    total = conv.total
    saved = items = 0
    stopped = False
    # edits go to local lists (one new Conversation at the end); an edit replaces only its own slot,
    # so the content listed for every other slot stays current
    for i, slot, content in list(slots):
        if total <= ctx.stop_at and not exhaustive:
            stopped = True
            break
        current = msgs[i]
        new_content = transform(ToolResult(i, slot, content, counts[i], total - ctx.stop_at))
        if new_content is content:
            continue
        new_msg = dialect.with_tool_result(current, slot, new_content)
        estimate = None
        if lossless and ctx.estimate:
            old_chars = chars[i] if i in chars else tool_chars(dialect, current)
            new_chars = old_chars - _texts_chars(content) + _texts_chars(new_content)
            count = _estimated(counts[i], old_chars, new_chars)
            prior = pending[i] or Estimate(current, counts[i], ())
            estimate = Estimate(prior.base, prior.base_count, (*prior.savings, (kind, counts[i] - count)))
        else:
            count = ctx.counter.message(dialect, new_msg)
        if count >= counts[i]:
            continue
        if lossless and ctx.estimate:
            chars[i] = new_chars
        saved += counts[i] - count
        items += 1
        total -= counts[i] - count
        msgs[i], counts[i], pending[i] = new_msg, count, estimate
    if not stopped:
        ctx.exhausted.add(kind)  # every candidate was seen: another round would find nothing new
    ctx.record(kind, saved, items)
    if not items:
        return conv
    return replace(conv, messages=tuple(msgs), counts=tuple(counts), pending=tuple(pending))


def tool_chars(dialect: Dialect, msg: Message) -> int:
    """The characters of a message's tool results (plus a constant for the rest): what scales an
    estimated count when a rewrite changes only those."""
    return sum(_texts_chars(content) for _, content in dialect.tool_results(msg)) + 16


def _texts_chars(content: Content) -> int:
    return sum(len(t) for t in content_texts(content))


# Scaling a count by the text length left over-states a compacted JSON result by 2-3% on average
# (up to 9%: whitespace and metadata keys cost more tokens per character than the text that stays),
# and over-stated counts make a round cut more than it needs. 0.95 makes the estimate optimistic on
# average: the settled round then usually falls a little short, and the exact round 2 finishes.
_ESTIMATE_SCALE = 0.95


def _estimated(count: int, old_chars: int, new_chars: int) -> int:
    """The new message's count, scaled by its tool-result text length (`_chars`; an estimate)."""
    return max(1, math.floor(_ESTIMATE_SCALE * count * new_chars / old_chars))
