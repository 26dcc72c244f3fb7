"""Repeated tool results and repeated items: keep the newest copy, mark the older ones."""

from __future__ import annotations

import hashlib
from typing import Callable

from guard import jsontext
from guard.conversation import Context, Conversation, ToolResult, rewrite_tool_results
from guard.dialects import Content, content_texts, map_texts, replace_text
from guard.tokens import compact_json

DUPLICATE_MARK = "[context-guard: duplicate of a later tool result; ~{n} tokens removed]"


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _key(content: Content) -> bytes | None:
    """Digest of a result's text. compact_json runs first, so JSON whitespace rarely differs."""
    joined = "\n".join(content_texts(content)).strip()
    return _digest(joined) if joined else None


def _item_digests(content: Content) -> list[bytes]:
    out: list[bytes] = []
    for text in content_texts(content):
        value = jsontext.parse(text)
        if value is not None:
            out += [_digest(item) for _, _, item in jsontext.item_hashes(value)]
    return out


def dedupe(conv: Conversation, ctx: Context) -> Conversation:
    """Older tool results equal to a later one become a short marker; array items (retrieved
    documents) repeated in a later result are removed from the older one."""
    order = 0
    last_result: dict[bytes, int] = {}  # digest -> position of its newest copy
    last_item: dict[bytes, int] = {}
    positions: dict[tuple[int, int | None], int] = {}
    keys: dict[tuple[int, int | None], bytes | None] = {}
    for i, msg in enumerate(conv.messages):
        for slot, content in conv.dialect.tool_results(msg):
            order += 1
            positions[(i, slot)] = order
            keys[(i, slot)] = key = _key(content)
            if key is not None:
                last_result[key] = order
            for d in _item_digests(content):
                last_item[d] = order

    def transform(result: ToolResult) -> Content:
        where = positions[(result.index, result.slot)]
        key = keys[(result.index, result.slot)]
        if key is not None and last_result[key] > where:
            return replace_text(result.content, DUPLICATE_MARK.format(n=result.message_tokens))
        seen_later: Callable[[bytes], bool] = lambda d: last_item.get(d, 0) > where  # noqa: E731
        return map_texts(result.content, lambda text: _drop_seen_items(text, seen_later))

    return rewrite_tool_results(conv, ctx, "dedupe", conv.tool_slots(recent=False), transform, lossless=True)


def _drop_seen_items(text: str, seen_later: Callable[[bytes], bool]) -> str:
    value = jsontext.parse(text)
    if value is None:
        return text
    removed = 0

    def keep(arr: list) -> list:
        nonlocal removed
        before = removed
        out = []
        for x in arr:
            if isinstance(x, (dict, list)) and seen_later(_digest(compact_json(x))):
                removed += 1
            else:
                out.append(x)
        if removed > before:
            out.append(jsontext.TRIM_MARK.format(n=removed - before, what="items repeated later"))
        return out

    if isinstance(value, list):
        value = keep(value)
    else:
        value = {k: keep(v) if isinstance(v, list) else v for k, v in value.items()}
    return jsontext._dumped(value) if removed else text
