"""The protocol every wire format implements for the core, and content helpers shared by all.

A dialect knows where a body keeps its turns, pinned prompt, tools, tool calls and tool results,
how they pair, how a turn is counted, and how to rebuild a turn with one tool result replaced. It
never mutates its input: every edit returns new (shallow-copied) objects.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence

import orjson

from guard.errors import BadRequest

if TYPE_CHECKING:
    from guard.tokens import TokenCounter

Message = Mapping[str, Any]
Content = Any  # str | list of parts | None

MARKER_PREFIX = "[context-guard:"
TOOL_SCHEMA_FRAMING = 8  # per tool schema, beside its compact JSON


def _blocks(msg: Message) -> list[Any]:
    content = msg.get("content")
    return content if isinstance(content, list) else []


TEXT_PARTS = frozenset({"text", "input_text", "output_text"})  # chat and Anthropic; Responses in and out


class Dialect:
    """What one wire format's body is made of, for the core: its list of turns (messages or
    items), the parts pinned outside that list, the tool calls and results inside it and how they
    pair, the key of its output limit, and how each turn is counted and rendered as a transcript
    line. One instance per format (`guard.dialects.OPENAI`, `ANTHROPIC`, `RESPONSES`); the core
    never asks which one it holds."""

    name: ClassVar[str]
    messages_key: ClassVar[str] = "messages"
    # top-level keys counted once per body (tool schemas, formats, pinned prompts): the key of the
    # count memo, and where `count_fixed` looks
    fixed_keys: ClassVar[tuple[str, ...]] = ("tools", "functions", "response_format", "tool_choice")
    # top-level keys that hold a pinned system prompt (reported as "system" in the breakdown)
    system_keys: ClassVar[tuple[str, ...]] = ()

    def __repr__(self) -> str:
        return f"<dialect {self.name}>"

    # -- body level -------------------------------------------------------------------------
    def messages(self, body: Mapping[str, Any]) -> list[Message]:
        msgs = body.get(self.messages_key)
        if not isinstance(msgs, list):
            raise BadRequest(f"{self.messages_key!r} must be a list")
        for i, m in enumerate(msgs):
            if type(m) is not dict and not isinstance(m, Mapping):
                raise BadRequest(f"messages[{i}] must be an object")
            if not isinstance(m.get("role"), str):
                raise BadRequest(f"messages[{i}].role must be a string")
            content = m.get("content")
            if content is not None and type(content) is not str and type(content) is not list:
                raise BadRequest(f"messages[{i}].content must be a string, a list of parts or null")
        return msgs

    def with_messages(self, body: Mapping[str, Any], messages: Sequence[Message]) -> dict[str, Any]:
        """A copy of body carrying `messages` as its list of turns."""
        out = dict(body)
        out[self.messages_key] = list(messages)
        return out

    def output_key(self, body: Mapping[str, Any], model: str) -> str:
        """The key that carries the output limit: the one the client used, else the native one."""
        raise NotImplementedError

    def unseen_state(self, body: Mapping[str, Any]) -> list[str]:
        """Names of the body's fields that make the provider add input the body does not carry."""
        return []

    # -- message level ----------------------------------------------------------------------
    def is_system(self, msg: Message) -> bool:
        return msg.get("role") in ("system", "developer")

    def is_user_turn(self, msg: Message) -> bool:
        """A message a person wrote (the first and last are pinned)."""
        raise NotImplementedError

    def has_user_text(self, msg: Message) -> bool:
        """Whether a tool-result message also carries words of the user's (Anthropic clients put
        them next to the results). Such a message, when it ends the request, is never dropped:
        its results may only be cut, as the newest turns' are."""
        return False

    def tool_call_ids(self, msg: Message) -> list[str]:
        raise NotImplementedError

    def tool_result_ids(self, msg: Message) -> list[str]:
        raise NotImplementedError

    def tool_results(self, msg: Message) -> list[tuple[int | None, Content]]:
        """(slot, content) of every tool result in the message; slot is a block index or None."""
        raise NotImplementedError

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

    def groups(self, messages: Sequence[Message]) -> list[int]:
        """Group id per message: a tool call and its results share one group; others stand alone.
        A group is cut whole or not at all, so no call loses its result and no result its call."""
        groups: list[int] = []
        gid = -1
        open_calls: set[str] = set()
        for m in messages:
            results = self.tool_result_ids(m)
            if results and open_calls and set(results) & open_calls:
                groups.append(gid)
                continue
            gid += 1
            groups.append(gid)
            open_calls = set(self.tool_call_ids(m))
        return groups

    # -- counting and rendering ---------------------------------------------------------------
    def count(self, counter: "TokenCounter", msg: Message) -> tuple[int, int]:
        """(text tokens, image tokens) of one message as the provider renders it."""
        raise NotImplementedError

    def count_fixed(self, counter: "TokenCounter", body: Mapping[str, Any]) -> tuple[int, int]:
        """(text tokens, image tokens) of what the body sends outside its list of turns."""
        text = 0
        tools = body.get("tools")
        if isinstance(tools, list):
            for tool in tools:
                text += TOOL_SCHEMA_FRAMING + counter.raw(compact_json(tool))
        for key in self.fixed_keys:
            if key == "tools" or key in self.system_keys:  # a pinned prompt is counted by its dialect
                continue
            value = body.get(key)
            if isinstance(value, (list, Mapping)):
                text += counter.raw(compact_json(value))
        return text, 0

    def line(self, msg: Message) -> str:
        """The message as one transcript line for a summarizer: "[role] text", tool calls and
        results named, images as placeholders."""
        raise NotImplementedError


def compact_json(value: Any) -> str:
    """JSON without spaces, non-ASCII kept as is. orjson writes it ~10x faster than `json`; what it
    cannot write (integers past 64 bits, lone surrogates, non-string keys) goes to `json`. Floats
    that are not finite come out as null (`json` writes NaN, which is not JSON): values parsed by
    `jsontext` never hold them."""
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def text_of(content: Content) -> str:
    """A content value as plain text, non-text parts as placeholders."""
    if content is None:
        return ""
    texts = content_texts(content)
    if isinstance(content, list):
        others = sum(1 for p in content if not (isinstance(p, Mapping) and p.get("type") in TEXT_PARTS))
        texts += ["[image]"] * others
    return "\n".join(texts)


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


# -- content helpers shared by strategies ----------------------------------------------------


def content_texts(content: Content) -> list[str]:
    """The text pieces of a content value (a string, or the text of its text parts)."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            p["text"]
            for p in content
            if (type(p) is dict or isinstance(p, Mapping)) and p.get("type") in TEXT_PARTS and isinstance(p.get("text"), str)
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
        if (type(p) is dict or isinstance(p, Mapping)) and p.get("type") in TEXT_PARTS and isinstance(p.get("text"), str):
            new_text = fn(p["text"])
            if new_text != p["text"]:
                p = {**p, "text": new_text}
                changed = True
        out.append(p)
    return out if changed else content


def replace_text(content: Content, text: str) -> Content:
    """Content holding only text (non-text parts dropped): same shape as the original, and the
    same kind of text part (`text`, or the Responses API's `input_text`)."""
    if isinstance(content, list):
        kind = next((p.get("type") for p in content if isinstance(p, Mapping) and p.get("type") in TEXT_PARTS), "text")
        return [{"type": kind, "text": text}]
    return text
