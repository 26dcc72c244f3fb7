"""Repeated tool results and repeated items: keep the newest copy, mark the older ones."""

from __future__ import annotations

import hashlib

from guard import jsontext
from guard.conversation import Context, Conversation, rewrite_tool_results
from guard.dialects import Content, content_texts, map_texts, replace_text
from guard.tokens import compact_json

DUPLICATE_MARK = "[context-guard: duplicate of a later tool result; {n} tokens removed]"


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _normal(content: Content) -> bytes | None:
    joined = "\n".join(jsontext.compact(t) for t in content_texts(content)).strip()
    return _digest(joined) if joined else None


def _items(content: Content) -> set[bytes]:
    out: set[bytes] = set()
    for text in content_texts(content):
        value = jsontext.parse(text)
        if value is not None:
            out.update(_digest(item) for _, _, item in jsontext.item_hashes(value))
    return out


def dedupe(conv: Conversation, ctx: Context) -> Conversation:
    """Older tool results equal (after JSON compaction) to a later one become a short marker; array
    items (retrieved documents) repeated in a later result are removed from the older one."""
    later_results: set[bytes] = set()
    later_items: set[bytes] = set()
    plan: dict[tuple[int, int | None], tuple[bool, frozenset[bytes]]] = {}
    slots = []
    for i in range(len(conv.messages) - 1, -1, -1):  # newest first, to know what comes later
        for slot, content in reversed(conv.dialect.tool_results(conv.messages[i])):
            key = _normal(content)
            if not conv.pinned[i] and not conv.recent[i]:
                plan[(i, slot)] = (key is not None and key in later_results, frozenset(later_items))
                slots.append((i, slot, content))
            if key is not None:
                later_results.add(key)
            later_items |= _items(content)
    slots.reverse()  # oldest first

    def transform(i: int, slot: int | None, content: Content, _: int) -> Content:
        duplicate, seen = plan[(i, slot)]
        if duplicate:
            tokens = sum(ctx.counter.raw(t) for t in content_texts(content))
            return replace_text(content, DUPLICATE_MARK.format(n=tokens))
        if not seen:
            return content
        return map_texts(content, lambda text: _drop_seen_items(text, seen))

    return rewrite_tool_results(conv, ctx, "dedupe", slots, transform)


def _drop_seen_items(text: str, seen: frozenset[bytes]) -> str:
    value = jsontext.parse(text)
    if value is None:
        return text
    removed = 0

    def keep(arr: list) -> list:
        nonlocal removed
        before = removed
        out = []
        for x in arr:
            if isinstance(x, (dict, list)) and _digest(compact_json(x)) in seen:
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
    return compact_json(value) if removed else text
