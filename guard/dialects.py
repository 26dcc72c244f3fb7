"""The two request shapes the guard understands: OpenAI chat bodies and Anthropic /v1/messages bodies.

A dialect knows where a body keeps its messages, system prompt, tools, tool calls and tool
results, and how to rebuild a message with one tool result replaced. It never mutates its input:
every edit returns new (shallow-copied) objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Callable, Sequence

from guard.errors import BadRequest

Message = Mapping[str, Any]
Content = Any  # str | list of parts | None

MARKER_PREFIX = "[context-guard:"


def _blocks(msg: Message) -> list[Any]:
    content = msg.get("content")
    return content if isinstance(content, list) else []


@dataclass(frozen=True)
class Dialect:
    """Accessors for one body shape."""

    name: str

    # -- body level -------------------------------------------------------------------------
    def messages(self, body: Mapping[str, Any]) -> list[Message]:
        msgs = body.get("messages")
        if not isinstance(msgs, list):
            raise BadRequest("'messages' must be a list")
        for i, m in enumerate(msgs):
            if type(m) is not dict and not isinstance(m, Mapping):
                raise BadRequest(f"messages[{i}] must be an object")
            if not isinstance(m.get("role"), str):
                raise BadRequest(f"messages[{i}].role must be a string")
            content = m.get("content")
            if content is not None and type(content) is not str and type(content) is not list:
                raise BadRequest(f"messages[{i}].content must be a string, a list of parts or null")
        return msgs

    def output_key(self, body: Mapping[str, Any], model: str) -> str:
        """The key that carries the output limit: the one the client used, else the native one."""
        if self.name == "anthropic":
            return "max_tokens"
        for key in ("max_completion_tokens", "max_tokens"):
            if body.get(key) is not None:
                return key
        bare = model.rsplit("/", 1)[-1]
        if bare.startswith(("o1", "o3", "o4", "gpt-5")):
            return "max_completion_tokens"  # these OpenAI models refuse max_tokens
        return "max_tokens"

    # -- message level ----------------------------------------------------------------------
    def is_system(self, msg: Message) -> bool:
        return msg.get("role") in ("system", "developer")

    def is_user_turn(self, msg: Message) -> bool:
        """A message a person wrote: role user and no tool results.

        Anthropic clients put text next to the tool results it follows in one user message
        (Claude Code appends a system reminder to every tool-result message; a user who interrupts
        adds their words there). Such a message is a tool-result message: its results are cut like
        any other, and its text blocks are never edited (strategies only rewrite tool results), so
        the turn the user really typed stays the pinned "last user turn"."""
        if msg.get("role") != "user":
            return False
        if self.name == "openai":
            return True
        content = msg.get("content")
        if not isinstance(content, list):
            return True
        return not any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content)

    def tool_call_ids(self, msg: Message) -> list[str]:
        if msg.get("role") != "assistant":
            return []
        if self.name == "openai":
            calls = msg.get("tool_calls")
            if not isinstance(calls, list):
                return []
            return [str(c.get("id")) for c in calls if isinstance(c, Mapping)]
        return [str(b.get("id")) for b in _blocks(msg) if isinstance(b, Mapping) and b.get("type") == "tool_use"]

    def tool_result_ids(self, msg: Message) -> list[str]:
        if self.name == "openai":
            if msg.get("role") in ("tool", "function"):
                return [str(msg.get("tool_call_id") or msg.get("name"))]
            return []
        if msg.get("role") != "user":
            return []
        return [
            str(b.get("tool_use_id"))
            for b in _blocks(msg)
            if isinstance(b, Mapping) and b.get("type") == "tool_result"
        ]

    def tool_results(self, msg: Message) -> list[tuple[int | None, Content]]:
        """(slot, content) of every tool result in the message; slot is a block index or None."""
        if self.name == "openai":
            if msg.get("role") in ("tool", "function"):
                return [(None, msg.get("content"))]
            return []
        if msg.get("role") != "user":
            return []
        return [
            (i, b.get("content"))
            for i, b in enumerate(_blocks(msg))
            if (type(b) is dict or isinstance(b, Mapping)) and b.get("type") == "tool_result"
        ]

    def with_tool_result(self, msg: Message, slot: int | None, content: Content) -> dict[str, Any]:
        """A copy of msg whose tool result at slot holds content."""
        new = dict(msg)
        if slot is None:
            new["content"] = content
            return new
        blocks = list(_blocks(msg))
        block = dict(blocks[slot])
        block["content"] = content
        blocks[slot] = block
        new["content"] = blocks
        return new

    def marker(self, text: str, cache_control: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A message the guard inserts; its text always starts with MARKER_PREFIX. With
        `cache_control`, it carries the prompt-cache breakpoint of the messages it stands for."""
        if cache_control is not None:
            return {"role": "user", "content": [{"type": "text", "text": text, "cache_control": dict(cache_control)}]}
        return {"role": "user", "content": text}


OPENAI = Dialect("openai")
ANTHROPIC = Dialect("anthropic")
_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking", "document"}


def cache_breakpoint(msg: Message) -> Mapping[str, Any] | None:
    """The last prompt-cache breakpoint (`cache_control`) a message carries, on itself or a block."""
    found = msg.get("cache_control") if isinstance(msg.get("cache_control"), Mapping) else None
    for block in _blocks(msg):
        if isinstance(block, Mapping) and isinstance(block.get("cache_control"), Mapping):
            found = block["cache_control"]
    return found


def last_breakpoints(messages: Sequence[Message]) -> list[int]:
    """Per index i, the index of the last message at or before i with a breakpoint (-1: none):
    whether a run a..b of messages holds one is `last[b] >= a`, in constant time."""
    out, last = [], -1
    for i, m in enumerate(messages):
        if cache_breakpoint(m) is not None:
            last = i
        out.append(last)
    return out


def detect(body: Mapping[str, Any]) -> Dialect:
    """Guess the dialect of a body: Anthropic if it has top-level system or Anthropic blocks."""
    if not isinstance(body, Mapping):
        raise BadRequest("the request body must be a JSON object")
    if "system" in body:
        return ANTHROPIC
    msgs = body.get("messages")
    if isinstance(msgs, list):
        for m in msgs:
            if not isinstance(m, Mapping):
                continue
            if m.get("role") in ("tool", "system", "developer", "function") or m.get("tool_calls"):
                return OPENAI
            for b in _blocks(m):
                if isinstance(b, Mapping) and (
                    b.get("type") in _ANTHROPIC_BLOCKS
                    or (b.get("type") == "image" and isinstance(b.get("source"), Mapping))
                ):
                    return ANTHROPIC
    return OPENAI


def by_name(name: str) -> Dialect:
    if name == "openai":
        return OPENAI
    if name == "anthropic":
        return ANTHROPIC
    raise ValueError(f"unknown dialect {name!r} (expected 'openai' or 'anthropic')")


# -- content helpers shared by strategies ----------------------------------------------------


def content_texts(content: Content) -> list[str]:
    """The text pieces of a content value (a string, or the text of its text parts)."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            p["text"]
            for p in content
            if (type(p) is dict or isinstance(p, Mapping)) and p.get("type") == "text" and isinstance(p.get("text"), str)
        ]
    return []


def map_texts(content: Content, fn: Callable[[str], str]) -> Content:
    """Apply fn to each text piece; returns the same object when nothing changed."""
    if isinstance(content, str):
        return fn(content)
    if not isinstance(content, list):
        return content
    changed = False
    out: list[Any] = []
    for p in content:
        if (type(p) is dict or isinstance(p, Mapping)) and p.get("type") == "text" and isinstance(p.get("text"), str):
            new_text = fn(p["text"])
            if new_text != p["text"]:
                p = {**p, "text": new_text}
                changed = True
        out.append(p)
    return out if changed else content


def replace_text(content: Content, text: str) -> Content:
    """Content holding only text (non-text parts dropped): same shape as the original."""
    if isinstance(content, list):
        return [{"type": "text", "text": text}]
    return text


def group_messages(dialect: Dialect, messages: Sequence[Message]) -> list[int]:
    """Group id per message: a tool call and its results share one group; others stand alone."""
    groups: list[int] = []
    gid = -1
    open_calls: set[str] = set()
    for m in messages:
        results = dialect.tool_result_ids(m)
        if results and open_calls and (set(results) & open_calls or dialect.name == "anthropic"):
            groups.append(gid)
            if dialect.name == "anthropic":
                open_calls = set()
            continue
        gid += 1
        groups.append(gid)
        open_calls = set(dialect.tool_call_ids(m))
    return groups
