"""JSON-aware rewriting of tool-result text: compaction, metadata removal, structure-aware shrinking.

Every function takes text and returns text; text that is not a JSON object or array comes back as
the same object, so callers can tell "not applicable" from "rewritten" by identity.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from typing import Any, cast

from guard.core.content import compact_json
from guard.core.memo import current

TRIM_MARK = "[context-guard: {n} {what} trimmed]"


MEMO_MAX_CHARS = 1 << 18


def parse(text: str) -> Any:
    """The JSON object or array in text, or None (scalars are left alone).

    Strategies parse the same tool result several times in one fit, so results are memoised;
    callers must treat the returned value as read-only."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return None
    if len(text) > MEMO_MAX_CHARS:
        return _parse(text)
    hit = current().json_parses.get(text, _MISSING)
    if hit is _MISSING:
        hit = _parse(text)
        _remember(text, hit)
    return hit


def _not_json(literal: str) -> Any:
    raise ValueError(f"{literal} is not JSON")


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError("a number out of range")
    return value


MAX_DEPTH = 200  # deeper JSON is treated as text: every structural step here recurses


def _parse(text: str) -> Any:
    # strict JSON: NaN, Infinity and numbers out of a float's range are not JSON (and `dump`
    # writes with orjson, which would make them null)
    try:
        value = json.loads(text, parse_constant=_not_json, parse_float=_finite)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, (dict, list)):
        return None
    # each level of nesting opens a bracket: text with few of them needs no walk
    if text.count("[") + text.count("{") > MAX_DEPTH and not _shallow(value, MAX_DEPTH):
        return None
    return value


def _shallow(value: Any, limit: int) -> bool:
    """Whether value nests at most `limit` containers deep (checked without recursion)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values() if isinstance(x, (dict, list)))
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v if isinstance(x, (dict, list)))
    return True


_MISSING = object()


def _remember(text: str, value: Any) -> None:
    """Memoise text -> parsed value (also for text this module serialised itself)."""
    if len(text) <= MEMO_MAX_CHARS:
        current().json_parses.put(text, value)


def dump(value: Any) -> str:
    """Compact JSON of a parsed value, remembered so the next parse of it is free."""
    out = compact_json(value)
    _remember(out, value)
    return out


def _rewrite_memo(key: tuple[Any, ...], text: str, fn: Any) -> str:
    """Agent loops resend the same tool results every turn: remember each rewrite's output."""
    if len(text) > MEMO_MAX_CHARS:
        return cast("str", fn())
    rewrites = current().json_rewrites
    hit = rewrites.get(key)
    if hit is None:
        hit = rewrites.put(key, fn())
    # callers test `result is text` for "unchanged": never hand back an equal copy from the memo
    return text if hit == text else hit


def compact(text: str) -> str:
    """Re-serialize JSON without indentation or spaces; other text unchanged."""
    return _rewrite_memo(("compact", text), text, lambda: _compact(text))


def _compact(text: str) -> str:
    value = parse(text)
    if value is None:
        return text
    out = dump(value)
    return out if len(out) < len(text) else text


def drop_keys(text: str, bulky: Iterable[str], citation: Iterable[str]) -> str:
    """Remove bulky keys at any depth; a bulky dict keeps only its citation keys (id, title, url...)."""
    bulky_set, citation_set = frozenset(bulky), tuple(citation)
    return _rewrite_memo(
        ("drop", text, bulky_set, citation_set), text, lambda: _drop_keys(text, bulky_set, citation_set)
    )


def _drop_keys(text: str, bulky_set: frozenset[str], citation_set: tuple[str, ...]) -> str:
    value = parse(text)
    if value is None:
        return text
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
    return dump(result) if changed else text


def array_items(value: Any) -> list[Any]:
    """The object/array items of a top-level array, or of arrays under top-level keys."""
    if isinstance(value, list):
        return [x for x in value if isinstance(x, (dict, list))]
    out: list[Any] = []
    if isinstance(value, dict):
        for arr in value.values():
            if isinstance(arr, list):
                out += [x for x in arr if isinstance(x, (dict, list))]
    return out


def _shrunk(value: Any, scale: float, min_chars: int) -> Any:
    """`value` with its lists, objects and strings cut to `scale` of their size."""
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
    return _rewrite_memo(
        ("shrink", text, max_tokens, tokens, count), text, lambda: _shrink(text, max_tokens, count, tokens)
    )


def _shrink(text: str, max_tokens: int, count: Callable[[str], int], tokens: int | None) -> str:
    value = parse(text)
    if value is None:
        return head_tail(text, max_tokens, count, tokens)
    n = tokens if tokens is not None else count(compact_json(value))
    if n <= max_tokens:
        full = compact_json(value)
        exact = count(full)
        return full if exact <= max_tokens else head_tail(full, max_tokens, count, exact)
    # proportional guesses, each corrected by the count of the last one: a cut that does not
    # fit is scaled down, one that fits far below its budget (structure shrinks in steps: whole
    # items, whole strings) is scaled up; the largest that fits is kept (2 renders usually). A
    # cut whose size in characters, at the text's tokens per character, is over the budget by
    # more than _SURE is taken as over without encoding it; every cut kept is counted exactly.
    # Once a scale that fits and one that does not are known, a guess that would leave the gap
    # between them halves it, once: a step of the structure (one more whole item) can lie
    # there, and guesses would swing across it until the last try
    per_char = n / max(1, len(text))
    scale, best, best_tokens, last = _AIM * max_tokens / n, None, 0, None
    fits, over, halved = 0.0, math.inf, False  # the largest scale known to fit, the smallest known not to
    for _ in range(6):
        candidate = compact_json(_shrunk(value, min(1.0, scale), 24))
        guessed = len(candidate) * per_char
        tokens_now = math.ceil(guessed) if guessed > _SURE * max_tokens else count(candidate)
        if tokens_now <= max_tokens:
            if tokens_now > best_tokens:
                best, best_tokens = candidate, tokens_now
            if tokens_now >= CLOSE * max_tokens or scale >= 1.0:
                break
            fits = max(fits, scale)
        else:
            if last is not None and tokens_now >= last and best is None:
                break  # at the floor of the structure (one item per list, short strings): cut text
            over = min(over, scale)
        last = tokens_now
        guess = scale * _AIM * max_tokens / max(1, tokens_now)
        if fits and over < math.inf and not fits < guess < over:
            if halved or over <= fits * _NARROW:
                break  # a step of the structure lies between them: keep the cut that fits
            guess, halved = (fits + over) / 2, True
        scale = guess
    if best is None:
        return head_tail(compact_json(value), max_tokens, count)
    return best


_AIM = 0.95  # each guess aims this far under the budget (cuts do not scale exactly)
CLOSE = 0.85  # a cut that fits is kept once it uses this much of its budget (most land above)
_NARROW = 1.02  # scales closer than this render the same cut
_SURE = 1.2  # a cut estimated this far over its budget is over (estimates err by a few percent)


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
