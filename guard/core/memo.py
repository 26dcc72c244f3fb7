"""One kind of memo for the whole guard: a bounded mapping that forgets its oldest entry first;
and `Memos`, the set of them an `Engine` owns.

Agent loops resend the same messages, tool results and texts every turn, so counts, parses,
rewrites and term counts are memoised; each memo is bounded, and all of them evict the same way.
Safe to share across threads without a lock: a lost insert or eviction under a race only costs a
recomputation (the values are pure functions of their keys).

The counts live in each engine's `TokenCounter`; the memos of the pure helpers (JSON parses and
rewrites, relevance terms, dedupe keys, transcript lines and digests) live in a `Memos` that the
engine owns and makes current while it plans or counts (`using`). Outside any engine (a helper
called directly) they fall back to one process-wide `Memos`. Since every value is a pure function
of its key, which memo answers never changes a result: only what is kept, for how long, and what
an engine's `memos.clear()` forgets."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Hashable, Iterator
from contextvars import ContextVar
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


class SizedMemo:
    """A memo bounded by the characters it keeps alive, not by its number of entries (the texts of
    agent loops range from a word to 100 kB); oldest first out, like `Memo`."""

    def __init__(self, budget: int) -> None:
        self.budget, self.size = budget, 0
        self.store: dict[Any, Any] = {}
        self.sizes: dict[Any, int] = {}
        self.lock = threading.Lock()

    def get(self, key: Any) -> Any:
        return self.store.get(key)

    def put(self, key: Any, value: Any, size: int) -> None:
        if size > self.budget // 64:
            return  # a huge text: not worth pinning in memory
        with self.lock:
            while self.store and self.size + size > self.budget:
                old = next(iter(self.store))
                del self.store[old]
                self.size -= self.sizes.pop(old)
            if key not in self.store:
                self.store[key], self.sizes[key] = value, size
                self.size += size

    def __len__(self) -> int:
        return len(self.store)

    def clear(self) -> None:
        with self.lock:
            self.store.clear()
            self.sizes.clear()
            self.size = 0


class Memos:
    """The memos of the pure helpers, one set per owner (an `Engine`), each bounded."""

    def __init__(self) -> None:
        self.json_parses: Memo[str, Any] = Memo(512)  # JSON text -> parsed value (guard.core.jsontext)
        self.json_rewrites: Memo[tuple[Any, ...], str] = Memo(4096)  # (rewrite, text, ...) -> text
        self.lowered: Memo[str, str] = Memo(4096)  # text -> clipped lower case (guard.core.relevance)
        self.term_counts: Memo[str, tuple[int, dict[str, int]]] = Memo(20_000)  # text -> BM25 terms
        self.dedupe_items: Memo[str, tuple[Any, ...]] = Memo(4096)  # text -> its array items' keys
        self.transcript_lines = SizedMemo(16_000_000)  # message content -> transcript line (characters)
        self.line_digests = SizedMemo(16_000_000)  # transcript line -> sha256 (characters)

    def clear(self) -> None:
        for memo in vars(self).values():
            memo.clear()


_PROCESS = Memos()  # outside any engine (a helper called directly)
_CURRENT: ContextVar[Memos | None] = ContextVar("guard_memos", default=None)


def current() -> Memos:
    """The memos of the engine planning or counting now (the process-wide set outside any)."""
    return _CURRENT.get() or _PROCESS


@contextlib.contextmanager
def using(memos: Memos) -> Iterator[Memos]:
    """Make `memos` current for the block (and put back what was current after it)."""
    token = _CURRENT.set(memos)
    try:
        yield memos
    finally:
        _CURRENT.reset(token)
