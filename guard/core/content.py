"""Content values of every wire format, as plain data: the text parts' types, compact JSON, text
extraction and rewriting, prompt-cache breakpoints. Shared by the counter, the dialects and the
strategies; imports nothing of the guard's."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

Message = Mapping[str, Any]
Content = Any  # str | list of parts | None

MARKER_PREFIX = "[context-guard:"
TEXT_PARTS = frozenset({"text", "input_text", "output_text"})  # chat and Anthropic; Responses in and out


def blocks(msg: Message) -> list[Any]:
    """The message's content when it is a list of parts or blocks, else an empty list."""
    content = msg.get("content")
    return content if isinstance(content, list) else []


def compact_json(value: Any, sort_keys: bool = False) -> str:
    """JSON without spaces, non-ASCII kept as is (with `sort_keys`, every object's keys in order).
    orjson writes it ~10x faster than `json`; what it cannot write (integers past 64 bits, lone
    surrogates, non-string keys) goes to `json`. Floats that are not finite come out as null
    (`json` writes NaN, which is not JSON): values parsed by `jsontext` never hold them."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_SORT_KEYS if sort_keys else None).decode()
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str, sort_keys=sort_keys)


def text_of(content: Content) -> str:
    """A content value as plain text, non-text parts as placeholders."""
    if content is None:
        return ""
    return "\n".join(content_texts(content) + ["[image]"] * len(other_parts(content)))


def other_parts(content: Content) -> list[Any]:
    """The parts of a content value that are no text part (images, documents, audio, ...)."""
    if not isinstance(content, list):
        return []
    return [p for p in content if not (isinstance(p, Mapping) and p.get("type") in TEXT_PARTS)]


def cache_breakpoint(msg: Message) -> Mapping[str, Any] | None:
    """The last prompt-cache breakpoint (`cache_control`) a message carries, on itself or a block."""
    found = msg.get("cache_control") if isinstance(msg.get("cache_control"), Mapping) else None
    for block in blocks(msg):
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
            if (type(p) is dict or isinstance(p, Mapping))
            and p.get("type") in TEXT_PARTS
            and isinstance(p.get("text"), str)
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
        if (
            (type(p) is dict or isinstance(p, Mapping))
            and p.get("type") in TEXT_PARTS
            and isinstance(p.get("text"), str)
        ):
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
        kind = next((p.get("type") for p in content if isinstance(p, Mapping) and p.get("type") in TEXT_PARTS), None)
        if kind is None:  # (no text part to copy: a Responses output of images or files takes `input_text`)
            responses = any(isinstance(p, Mapping) and p.get("type") in _RESPONSES_INPUTS for p in content)
            kind = "input_text" if responses else "text"
        return [{"type": kind, "text": text}]
    return text


_RESPONSES_INPUTS = frozenset({"input_image", "input_file"})  # part types only the Responses API has
