"""The wire formats the guard understands, one module each behind one protocol (`Dialect`):

- `chat`: OpenAI chat completions (`messages`, `tool_calls`, `role: tool`);
- `messages`: Anthropic /v1/messages (`system`, `tool_use` / `tool_result` blocks);
- `responses`: the OpenAI Responses API (`input` items, `instructions`, `max_output_tokens`).

The core (counting, strategies, planner) works on any of them through the protocol alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from guard.core.content import (
    MARKER_PREFIX,
    TEXT_PARTS,
    Content,
    Message,
    cache_breakpoint,
    compact_json,
    content_texts,
    last_breakpoints,
    map_texts,
    replace_text,
    text_of,
)
from guard.core.errors import BadRequest
from guard.dialects.base import Dialect
from guard.dialects.chat import Chat
from guard.dialects.messages import Messages
from guard.dialects.responses import Responses

OPENAI: Dialect = Chat()
ANTHROPIC: Dialect = Messages()
RESPONSES: Dialect = Responses()
DIALECTS: dict[str, Dialect] = {d.name: d for d in (OPENAI, ANTHROPIC, RESPONSES)}
_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking", "document"}
_RESPONSES_ONLY = ("input", "instructions", "max_output_tokens", "previous_response_id", "conversation")


def detect(body: Mapping[str, Any]) -> Dialect:
    """Guess the dialect of a body: Responses if it has `input` (or another Responses-only field)
    and no `messages`; Anthropic if it has a top-level system or Anthropic blocks; else chat."""
    if not isinstance(body, Mapping):
        raise BadRequest("the request body must be a JSON object")
    if "messages" not in body and any(key in body for key in _RESPONSES_ONLY):
        return RESPONSES
    if "system" in body:
        return ANTHROPIC
    msgs = body.get("messages")
    if isinstance(msgs, list):
        for m in msgs:
            if not isinstance(m, Mapping):
                continue
            if m.get("role") in ("tool", "system", "developer", "function") or m.get("tool_calls"):
                return OPENAI
            content = m.get("content")
            for b in content if isinstance(content, list) else ():
                if isinstance(b, Mapping) and (
                    b.get("type") in _ANTHROPIC_BLOCKS
                    or (b.get("type") == "image" and isinstance(b.get("source"), Mapping))
                ):
                    return ANTHROPIC
    return OPENAI


def by_name(name: str) -> Dialect:
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"unknown dialect {name!r} (expected one of {', '.join(DIALECTS)})") from None


def group_messages(dialect: Dialect, messages: Sequence[Message]) -> list[int]:
    """Group id per message (see `Dialect.groups`)."""
    return dialect.groups(messages)


def turn_boundaries(dialect: Dialect, messages: Sequence[Message]) -> tuple[list[int], list[int]]:
    """Where each turn group after the first begins (a boundary never splits a call from its
    results), and of those, where a request of this history may have been sent: where the history
    does not end with a reply of the model's (`Dialect.is_reply`). A boundary between the model's
    answer and the client's next words ended no request: nothing was sent with that history (a
    client that adds its own messages without a reply between them, though, may have sent each).
    Nor did one between tool results and the client's own next message: results are sent for the
    model's next step, so had they gone alone its reply would stand between them (an agent that
    follows each batch of results with the state of its environment, as Roo Code does, sends both
    in one request). But a history that itself ends with a reply is sent that way: its client
    puts its own words in the model's role (CrewAI's ReAct loop appends each observation as an
    assistant message after the model's action and sends nothing else), so its past requests may
    have ended between two replies as well."""
    groups = dialect.groups(messages)
    starts = [j for j in range(1, len(groups)) if groups[j] != groups[j - 1]]
    replies_end = bool(messages) and dialect.is_reply(messages[-1])
    return starts, [b for b in starts if _may_have_ended(dialect, messages[b - 1], messages[b], replies_end)]


def _may_have_ended(dialect: Dialect, before: Message, after: Message, replies_end: bool = False) -> bool:
    """Whether a request may have ended with `before`, followed in the history by `after`
    (`replies_end`: the client's requests end with a reply)."""
    if dialect.is_reply(before):  # (the client's next words came first, unless in the model's role)
        return replies_end and dialect.is_reply(after)
    return dialect.is_reply(after) or not dialect.tool_result_ids(before)


__all__ = [
    "ANTHROPIC",
    "DIALECTS",
    "MARKER_PREFIX",
    "OPENAI",
    "RESPONSES",
    "TEXT_PARTS",
    "Content",
    "Dialect",
    "Message",
    "by_name",
    "cache_breakpoint",
    "compact_json",
    "content_texts",
    "detect",
    "group_messages",
    "last_breakpoints",
    "map_texts",
    "replace_text",
    "text_of",
    "turn_boundaries",
]
