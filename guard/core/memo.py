"""One kind of memo for the whole guard: a bounded mapping that forgets its oldest entry first;
and `Memos`, the set of them an `Engine` owns.

Agent loops resend the same messages, tool results and texts every turn, so counts, parses,
rewrites and term counts are memoised; each memo is bounded (by entries, or by the characters it
keeps alive), and all of them evict the same way. Safe to share across threads: a lost insert or
eviction under a race only costs a recomputation (the values are pure functions of their keys);
a sized memo takes a lock so its running size stays right.

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
    own (bound once: memo hits run for every message of every request).

    A `sized` memo bounds what it keeps alive instead (the texts of agent loops range from a word
    to 100 kB): `limit` is then a budget in the units of the `size` every `put` gives (characters),
    and an entry over `max_entry` (by default a 64th of it) is not kept at all (a huge text is not
    worth pinning)."""

    def __init__(self, limit: int, *, sized: bool = False, max_entry: int | None = None) -> None:
        if limit < 1:
            raise ValueError("a memo holds at least one entry")
        self.limit, self.sized, self.size = limit, sized, 0
        self.max_entry = limit // 64 if max_entry is None else max_entry
        self._data: dict[K, V] = {}
        self._sizes: dict[K, int] = {}
        self._lock = threading.Lock()
        self.get = self._data.get

    def put(self, key: K, value: V, size: int = 1) -> V:
        if not self.sized:
            bounded_put(self._data, key, value, self.limit)
            return value
        if size > self.max_entry:
            return value
        with self._lock:
            while self._data and self.size + size > self.limit:
                old = next(iter(self._data))
                del self._data[old]
                self.size -= self._sizes.pop(old)
            if key not in self._data:
                self._data[key], self._sizes[key] = value, size
                self.size += size
        return value

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._sizes.clear()
            self.size = 0


def bounded_put(store: dict[Any, Any], key: Any, value: Any, limit: int) -> None:
    """store[key] = value, first evicting the oldest entry when the store is full and the key is new:
    `Memo`'s eviction, and that of the plain dicts of request state the shell keeps (reports, counted
    call ids)."""
    if len(store) >= limit and key not in store:
        with contextlib.suppress(KeyError, StopIteration, RuntimeError):  # another thread got there first
            del store[next(iter(store))]
    store[key] = value


class Memos:
    """The memos of the pure helpers, one set per owner (an `Engine`), each bounded."""

    def __init__(self) -> None:
        self.json_parses: Memo[str, Any] = Memo(512)  # JSON text -> parsed value (guard.core.jsontext)
        self.json_rewrites: Memo[tuple[Any, ...], str] = Memo(4096)  # (rewrite, text, ...) -> text
        self.lowered: Memo[str, str] = Memo(4096)  # text -> clipped lower case (guard.core.relevance)
        self.term_counts: Memo[str, tuple[int, dict[str, int]]] = Memo(20_000)  # text -> BM25 terms
        # a history's texts -> the words they hold, in lower case (guard.core.relevance.lost_terms)
        self.vocabularies: Memo[tuple[str, ...], tuple[frozenset[str], str]] = Memo(8)
        # 64 texts of a history in a row (from its start) -> the words they hold; bounded by the
        # texts' characters (the keys keep them alive): ~1.6 MB of words a million characters of
        # real agent turns' transcript lines, so ~6 MB at most
        self.vocabulary_chunks: Memo[tuple[str, ...], frozenset[str]] = Memo(4_000_000, sized=True, max_entry=1_000_000)
        # a text -> its distinct words in lower case (guard.core.relevance.lost_terms); characters
        self.text_words: Memo[str, str] = Memo(16_000_000, sized=True)
        self.dedupe_items: Memo[str, tuple[Any, ...]] = Memo(4096)  # text -> its array items' keys
        # (dialect, role, name, call id, content) -> transcript line; transcript line -> its sha256
        self.transcript_lines: Memo[tuple[Any, ...], str] = Memo(16_000_000, sized=True)  # characters
        self.line_digests: Memo[str, bytes] = Memo(16_000_000, sized=True)  # characters
        # (history prefix, mark, budget, policy) -> tokens of that prefix's cut (guard.fit.carried)
        self.cut_sizes: Memo[tuple[Any, ...], int | None] = Memo(4096)
        # (a message's hash, counter) -> its tokens as it goes over the room, JSON compacted where
        # that is fewer; (history prefix, budget, policy, counter) -> the tokens no step but the
        # last resort cuts there (guard.fit.carried)
        self.compacted_counts: Memo[tuple[int, Any], int] = Memo(200_000)
        self.floors: Memo[tuple[Any, ...], int] = Memo(4096)
        # (history prefix, mark, budget, policy, question, counter) -> the prefix and its fit to the
        # mark, as a carried cut sends it on every turn it fits (guard.fit.carried; no summarizer).
        # Bounded by the prefixes' size (4 characters a token): 32M, a prefix of up to 8M (~2M
        # tokens: a long-context model's carried prefix is the one most worth keeping; at a 64th,
        # a prefix over ~125k tokens was fitted again on every turn that carried it)
        self.prefix_cuts: Memo[tuple[Any, ...], Any] = Memo(32_000_000, sized=True, max_entry=8_000_000)

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
