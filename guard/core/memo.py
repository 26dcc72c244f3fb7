"""One kind of memo for the whole guard: a bounded mapping that forgets its oldest entry first.

Agent loops resend the same messages, tool results and texts every turn, so counts, parses,
rewrites and term counts are memoised; each memo is bounded, and all of them evict the same way.
Safe to share across threads without a lock: a lost insert or eviction under a race only costs a
recomputation (the values are pure functions of their keys)."""

from __future__ import annotations

import contextlib
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Memo(Generic[K, V]):
    """At most `limit` entries; `put` past the limit first drops the oldest. `get` is the dict's
    own (bound once: memo hits run for every message of every request)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("a memo holds at least one entry")
        self.limit = limit
        self._data: dict[K, V] = {}
        self.get = self._data.get

    def put(self, key: K, value: V) -> V:
        bounded_put(self._data, key, value, self.limit)
        return value

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def clear(self) -> None:
        self._data.clear()


def bounded_put(store: dict[Any, Any], key: Any, value: Any, limit: int) -> None:
    """store[key] = value, first evicting the oldest entry when the store is full and the key is new:
    `Memo`'s eviction, and that of the plain dicts of request state the shell keeps (reports, counted
    call ids)."""
    if len(store) >= limit and key not in store:
        with contextlib.suppress(KeyError, StopIteration, RuntimeError):  # another thread got there first
            del store[next(iter(store))]
    store[key] = value
