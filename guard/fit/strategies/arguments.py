"""The last resort's second step: the arguments of answered tool calls inside the newest turns (a
file an agent wrote through a call, a page it posted), shortened as far as the request's mark,
as `truncate_recent_tool_results` shortens the newest turns' results."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from guard.core import jsontext
from guard.core.content import Message
from guard.dialects import Dialect
from guard.fit.conversation import Context, Conversation, Outcome

KIND = "truncate_recent_call_arguments"


def truncate_recent_call_arguments(conv: Conversation, ctx: Context) -> Outcome:
    """Last resort before rejecting, after the newest turns' tool results: shorten the arguments
    of the tool calls inside the newest turns whose results the request holds (the call has run:
    its arguments are history, like its result), oldest first, each to what the room still needs
    (at least the policy's `truncated_tool_result_tokens`). JSON arguments stay valid JSON (their
    long strings cut in the middle, `jsontext.shrink`), or the call is left whole; a call still
    waiting for its result, the system prompt and the user's messages are never touched."""
    ctx = ctx.own()
    dialect, counter = conv.dialect, ctx.counter
    answered = {i for m in conv.messages for i in dialect.tool_result_ids(m)}
    msgs, counts, pending = list(conv.messages), list(conv.counts), list(conv.pending)
    total, saved, items = conv.total, 0, 0
    floor = ctx.policy.truncated_tool_result_tokens
    for i, msg in enumerate(conv.messages):
        if not conv.recent[i]:
            continue
        for slot, call_id, text in dialect.call_arguments(msg):
            if total <= ctx.stop_at:
                break
            if call_id not in answered:
                continue
            upper = counter.raw(text)
            keep = upper - math.ceil((total - ctx.stop_at) / counter.factor)
            best: tuple[dict[str, Any], int] | None = None
            for _ in range(3):  # the message's scaled count can round past the text's: cut that much more
                keep = max(floor, keep)
                new = _shortened(dialect, counter.raw, msgs[i], (slot, text, upper), keep) if keep < upper else None
                if new is None or (count := counter.message(dialect, new)) >= counts[i]:
                    break
                best, over = (new, count), total - (counts[i] - count) - ctx.stop_at
                if over <= 0 or keep == floor:
                    break
                keep -= math.ceil(over / counter.factor)
            if best is not None:
                saved, items, total = saved + counts[i] - best[1], items + 1, total - (counts[i] - best[1])
                msgs[i], counts[i], pending[i] = best[0], best[1], None
    ctx.record(KIND, saved, items)
    if not items:
        return ctx.outcome(conv)
    return ctx.outcome(replace(conv, messages=tuple(msgs), counts=tuple(counts), pending=tuple(pending)))


def _shortened(
    dialect: Dialect, raw: Callable[[str], int], msg: Message, call: tuple[int | None, str, int], keep: int
) -> dict[str, Any] | None:
    """`msg` with the arguments of `call` (slot, text, its tokens) cut to `keep` tokens; None where
    arguments that were JSON would not stay JSON (a text too short for its structure is cut head
    and tail)."""
    slot, text, upper = call
    cut = jsontext.shrink(text, keep, raw, upper)
    if jsontext.parse(cut) is None and jsontext.parse(text) is not None:
        return None
    return dialect.with_call_arguments(msg, slot, cut)
