"""Repeated tool results and repeated items: keep the first copy, mark the later ones.

Keeping the first copy leaves older messages as they were: a provider's prompt cache holds the
prefix up to the newest message, so an edit to an old message would cost the whole cache."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from guard.core import jsontext
from guard.core.content import other_parts
from guard.core.memo import current
from guard.core.tokens import freeze
from guard.dialects import Content, content_texts, map_texts, replace_text
from guard.fit.conversation import Context, Conversation, Outcome
from guard.fit.rewrite import Rewrite, ToolResult, rewrite_tool_results

DUPLICATE_MARK = "[context-guard: duplicate of an earlier tool result; ~{n} tokens removed]"


def _key(content: Content) -> Hashable | None:
    """A result's text (the dict key itself: exact, and hashed once), with its other parts where
    it has any: a computer-use agent's screenshots come back as the same short text beside a new
    image, and only the whole result makes a copy. compact_json runs first, so JSON whitespace
    rarely differs between copies."""
    joined = "\n".join(content_texts(content)).strip()
    if not joined:
        return None
    others = other_parts(content)
    return (joined, freeze(others)) if others else joined


class _Item:
    """An item's exact key (its frozen value) with the hash computed once: tuples do not cache
    their hash, and a key is looked up for every item of every result on every turn."""

    __slots__ = ("_hash", "value")

    def __init__(self, value: Any) -> None:
        self.value = freeze(value)
        self._hash = hash(self.value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Item) and self._hash == other._hash and self.value == other.value


def _text_items(text: str) -> tuple[_Item, ...]:
    """Exact keys of the items of one text's top-level arrays, in order. Agent loops resend the
    same results every turn: memoised by text, like the rewrites."""
    memo = current().dedupe_items
    hit = memo.get(text)
    if hit is None:
        value = jsontext.parse(text)
        hit = tuple(_Item(item) for item in jsontext.array_items(value)) if value is not None else ()
        if len(text) <= jsontext.MEMO_MAX_CHARS:
            memo.put(text, hit)
    return hit


def _items(content: Content) -> list[Any]:
    """Exact keys (frozen values) of the items of a result's top-level arrays."""
    out: list[Any] = []
    for text in content_texts(content):
        out += _text_items(text)
    return out


def dedupe(conv: Conversation, ctx: Context) -> Outcome:
    """Older tool results equal to an earlier one become a short marker; array items (retrieved
    documents) already seen in an earlier result are removed from the later one. The newest turns
    are never edited (a copy there stays, and the first copy with it)."""
    ctx = ctx.own()
    order = 0
    first_result: dict[Hashable, int] = {}  # text (and other parts) -> position of its first copy
    first_slot: dict[int, tuple[int, int | None]] = {}  # position -> (origin, slot)
    first_item: dict[Any, int] = {}
    positions: dict[tuple[int, int | None], int] = {}
    keys: dict[tuple[int, int | None], Hashable | None] = {}
    for i, msg in enumerate(conv.messages):
        for slot, content in conv.dialect.tool_results(msg):
            order += 1
            positions[(i, slot)] = order
            first_slot[order] = (conv.origin[i], slot)
            keys[(i, slot)] = key = _key(content)
            if key is not None:
                first_result.setdefault(key, order)
            for item in _items(content):
                first_item.setdefault(item, order)

    def transform(into: Context, result: ToolResult) -> Content:
        where = positions[(result.index, result.slot)]
        key = keys[(result.index, result.slot)]
        if key is not None and first_result[key] < where:
            into.duplicate_of[(conv.origin[result.index], result.slot)] = first_slot[first_result[key]]
            return replace_text(result.content, DUPLICATE_MARK.format(n=result.message_tokens))
        seen_before: Callable[[Any], bool] = lambda item: first_item.get(item, where) < where  # noqa: E731
        return map_texts(result.content, lambda text: _drop_seen_items(text, seen_before))

    return ctx.outcome(
        ctx.settled_first(
            conv,
            conv.tool_slots(recent=False),
            lambda c, slots: rewrite_tool_results(
                conv, c, Rewrite("dedupe", lambda result: transform(c, result), lossless=True), slots
            ),
        )
    )


def _drop_seen_items(text: str, seen_before: Callable[[Any], bool]) -> str:
    if not any(seen_before(item) for item in _text_items(text)):
        return text  # the common case, decided on the memoised keys without walking the JSON
    value = jsontext.parse(text)
    if value is None:
        return text
    removed = 0

    def keep(arr: list[Any]) -> list[Any]:
        nonlocal removed
        before = removed
        out = []
        for x in arr:
            if isinstance(x, (dict, list)) and seen_before(_Item(x)):
                removed += 1
            else:
                out.append(x)
        if removed > before:
            out.append(jsontext.TRIM_MARK.format(n=removed - before, what="items seen earlier"))
        return out

    if isinstance(value, list):
        value = keep(value)
    else:
        value = {k: keep(v) if isinstance(v, list) else v for k, v in value.items()}
    return jsontext.dump(value) if removed else text
