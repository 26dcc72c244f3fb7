"""JSON-aware rewriting of tool-result text: compaction, metadata removal, structure-aware shrinking.

Every function takes text and returns text; text that is not a JSON object or array comes back as
the same object, so callers can tell "not applicable" from "rewritten" by identity.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from typing import Any, Callable, Iterable

from guard.tokens import compact_json

TRIM_MARK = "[context-guard: {n} {what} trimmed]"


_MEMO_MAX_CHARS = 1 << 18


def parse(text: str) -> Any:
    """The JSON object or array in text, or None (scalars are left alone).

    Strategies parse the same tool result several times in one fit, so results are memoised;
    callers must treat the returned value as read-only."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return None
    if len(text) > _MEMO_MAX_CHARS:
        return _parse(text)
    return _parse_memo(text)


def _parse(text: str) -> Any:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, (dict, list)) else None


_parse_memo = lru_cache(maxsize=512)(_parse)


def compact(text: str) -> str:
    """Re-serialize JSON without indentation or spaces; other text unchanged."""
    value = parse(text)
    if value is None:
        return text
    out = compact_json(value)
    return out if len(out) < len(text) else text


def drop_keys(text: str, bulky: Iterable[str], citation: Iterable[str]) -> str:
    """Remove bulky keys at any depth; a bulky dict keeps only its citation keys (id, title, url...)."""
    value = parse(text)
    if value is None:
        return text
    bulky_set, citation_set = frozenset(bulky), tuple(citation)
    changed = False

    def walk(v: Any) -> Any:
        nonlocal changed
        if isinstance(v, list):
            return [walk(x) for x in v]
        if not isinstance(v, dict):
            return v
        out: dict[str, Any] = {}
        for k, x in v.items():
            if k in bulky_set:
                changed = True
                if isinstance(x, dict):
                    kept = {c: x[c] for c in citation_set if c in x}
                    if kept:
                        out[k] = kept
                continue
            out[k] = walk(x)
        return out

    result = walk(value)
    return compact_json(result) if changed else text


def item_hashes(value: Any) -> list[tuple[int, int | str | None, str]]:
    """(position, key, compact item) of the items of top-level arrays (or arrays under top-level keys)."""
    out: list[tuple[int, int | str | None, str]] = []
    if isinstance(value, list):
        out += [(j, None, compact_json(x)) for j, x in enumerate(value) if isinstance(x, (dict, list))]
    elif isinstance(value, dict):
        for key, arr in value.items():
            if isinstance(arr, list):
                out += [(j, key, compact_json(x)) for j, x in enumerate(arr) if isinstance(x, (dict, list))]
    return out


def _shrunk(value: Any, scale: float, min_chars: int) -> Any:
    if isinstance(value, str):
        keep = max(min_chars, math.ceil(len(value) * scale))
        if keep + 30 >= len(value):
            return value
        return value[:keep] + "…" + TRIM_MARK.format(n=len(value) - keep, what="chars")
    if isinstance(value, list):
        keep = max(1, math.ceil(len(value) * scale))
        items = [_shrunk(x, scale, min_chars) for x in value[:keep]]
        if keep < len(value):
            items.append(TRIM_MARK.format(n=len(value) - keep, what="items"))
        return items
    if isinstance(value, dict):
        keys = list(value)
        keep = max(8, math.ceil(len(keys) * scale))
        out = {k: _shrunk(value[k], scale, min_chars) for k in keys[:keep]}
        if keep < len(keys):
            out["context-guard"] = TRIM_MARK.format(n=len(keys) - keep, what="keys")
        return out
    return value


def shrink(text: str, max_tokens: int, count: Callable[[str], int], tokens: int | None = None) -> str:
    """Valid, compact JSON of at most max_tokens tokens (by `count`), cutting array tails and long
    strings evenly; plain text or JSON that cannot get small enough gets a head + tail cut.

    `tokens`, if given, is the caller's count of text (saves counting it again)."""
    value = parse(text)
    if value is None:
        return head_tail(text, max_tokens, count, tokens)
    full = compact_json(value)
    n = tokens if tokens is not None else count(full)
    if n <= max_tokens:
        return full if count(full) <= max_tokens else head_tail(full, max_tokens, count)
    per_char = n / max(1, len(text))
    guess = compact_json(_shrunk(value, 0.9 * max_tokens / n, 24))
    if len(guess) * per_char <= max_tokens and count(guess) <= max_tokens:
        return guess  # the proportional guess is usually right: one render, one count
    # binary search on the scale by estimated size; the answer lies near max_tokens / n
    lo, hi, best = 0.0, min(1.0, 2.5 * max_tokens / n), None
    for _ in range(7):
        mid = (lo + hi) / 2
        candidate = compact_json(_shrunk(value, mid, 24))
        if len(candidate) * per_char <= max_tokens:
            lo, best = mid, candidate
        else:
            hi = mid
    scale = lo
    for _ in range(8):  # verify with the real count
        if best is not None and count(best) <= max_tokens:
            return best
        scale *= 0.7
        best = compact_json(_shrunk(value, scale, 24))
    return head_tail(full, max_tokens, count)


def head_tail(text: str, max_tokens: int, count: Callable[[str], int], tokens: int | None = None) -> str:
    """The head and tail of text around a marker, within max_tokens tokens."""
    n = tokens if tokens is not None else count(text)
    if n <= max_tokens:
        return text
    per_token = len(text) / max(1, n)
    budget = max(1, max_tokens - 16)
    for _ in range(12):
        head = int(budget * 2 / 3 * per_token)
        tail = int(budget / 3 * per_token)
        mark = "\n" + TRIM_MARK.format(n=max(1, n - budget), what="tokens") + "\n"
        out = text[:head] + mark + (text[len(text) - tail :] if tail else "")
        if count(out) <= max_tokens:
            return out
        budget = int(budget * 0.8)
    return TRIM_MARK.format(n=n, what="tokens")
