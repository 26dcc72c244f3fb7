"""The request's history as the client sent it, read-only and built once per fit: the messages,
their counts and cumulative counts, their transcript lines (rendered on first use), and what the
last question is about, judged per band of the history so a verdict once given never changes."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from guard.core.content import Content

T = TypeVar("T")
Slot = tuple[int, int | None, Content]
# origin indices of the messages the last user message is about, among those not summarized
# (called with the summarized span's indices and the last index of each whole band, see
# `History.band_edges`)
Relevance = Callable[[frozenset[int], tuple[int, ...]], frozenset[int]]


@dataclass(frozen=True)
class History:
    """The messages as sent and their counts; `transcript` renders their lines (memoised by the
    caller), `relevance` scores them (None: relevance is off)."""

    messages: tuple[Mapping[str, Any], ...] = ()
    counts: tuple[int, ...] = ()
    transcript: Callable[[], list[str]] | None = None
    relevance: Relevance | None = None
    # every older slot counts as settled (see `settled_slots`): the drop-first pass, which sees no
    # counts as sent, so no step waits for a band
    all_settled: bool = False
    # the messages (original indices) a carried cut left out when it was made, where the client has
    # edited the history since: the drop takes them again, whatever the client did to them or to
    # what relevance reads (`guard.fit.edited`); None: the drop chooses. `dropped_ghost`: the
    # tokens the client took out of them since, in the conversation's fixed tokens until they go;
    # `slid`: the messages it took out where their first run starts (a window of its newest
    # messages slid past them) and that place, which that run's marker still counts
    dropped: frozenset[int] | None = None
    dropped_ghost: int = 0
    slid: tuple[int, int] = (0, 0)
    # whether `dropped` is the drop, decided before any truncation (`guard.fit.rounds._drop_first`):
    # relevance then judges the messages it keeps alone, their counts as if it went first (`kept_first`)
    forced: bool = False
    _relevant: dict[frozenset[int], frozenset[int]] = field(default_factory=dict, compare=False, repr=False)
    _ends: list[int] = field(default_factory=list, compare=False, repr=False)

    def kept_first(self, dropped: frozenset[int]) -> History:
        """This history with `dropped` the drop, decided before any truncation (`forced`): what
        the steps after it read does not depend on the messages it takes (a cut made again after
        the client took some of them out reads what the cut read when it was made)."""
        counts = tuple(0 if i in dropped else n for i, n in enumerate(self.counts))
        return replace(self, all_settled=True, dropped=dropped, forced=True, counts=counts, _relevant={}, _ends=[])

    @property
    def ends(self) -> list[int]:
        """Cumulative tokens through each message (computed once)."""
        if len(self._ends) != len(self.counts):
            self._ends[:] = itertools.accumulate(self.counts)
        return self._ends

    def relevant(self, summarized: frozenset[int], target: int, band: int) -> frozenset[int]:
        """What the question is about among the messages not `summarized`: the same set whether the
        summary standing for older messages was just made or came from the cache."""
        if self.relevance is None:
            return frozenset()
        if self.forced and self.dropped:  # (the drop decided first: judged among the messages it keeps)
            summarized = summarized | self.dropped
        hit = self._relevant.get(summarized)
        if hit is None:
            hit = self._relevant[summarized] = self.relevance(summarized, self.band_edges(target, band))
        return hit

    def band_edges(self, target: int, band: int) -> tuple[int, ...]:
        """The last original index of each whole band of the history, oldest first: the messages
        at or below the low-water mark `target`, then each band above it, up to `settled_end`."""
        ends = self.ends
        last = self.settled_end(target, band)
        if not ends or ends[-1] <= target:
            return (last,)
        edges: list[int] = []
        mark = target
        while True:
            edge = min(last, bisect.bisect_right(ends, mark) - 1)
            if not edges or edge > edges[-1]:
                edges.append(edge)
            if edge >= last:
                return tuple(e for e in edges if e >= 0) or (last,)
            mark += max(1, band)

    def settled_end(self, target: int, band: int) -> int:
        """The last original index of the history in whole bands (cumulative original tokens at
        or below the total, rounded down to the low-water mark plus a whole number of bands):
        relevance is scored among those messages only, so its statistics, and the order it gives
        a cut, change once per band of growth, not with every new message."""
        ends = self.ends
        if not ends or ends[-1] <= target:  # (the pinned prompt and tools make the overflow)
            return len(ends) - 1
        return bisect.bisect_right(ends, ends[-1] - (ends[-1] - target) % max(1, band)) - 1

    def relevant_last(
        self,
        items: Iterable[T],
        origins: Callable[[T], Iterable[int]],
        summarized: frozenset[int],
        target: int,
        band: int,
    ) -> list[T]:
        """`items` (oldest first) with those the question is about moved to the back, each part
        still oldest first: what the question asks about is cut last."""
        items = list(items)
        if self.relevance is None:
            return items
        hot = self.relevant(summarized, target, band)
        if not hot:
            return items
        marked = [any(o in hot for o in origins(item)) for item in items]
        return [x for x, m in zip(items, marked) if not m] + [x for x, m in zip(items, marked) if m]

    def settled_slots(
        self, origin: Sequence[int], recent: Sequence[bool], slots: Iterable[Slot], band: int
    ) -> list[Slot]:
        """The slots of older messages (of a conversation whose messages come from `origin`, the
        newest turns marked `recent`) that lie in whole quanta of the history: a message that just
        left the newest turns waits until the older history has grown by a full band past the
        last quantum boundary, then all of them are taken at once. Steps that edit older messages
        then move their edge once per band, not once per turn (each move re-sends, uncached,
        everything after it)."""
        slots = list(slots)
        if not slots or not self.counts or self.all_settled:
            return slots
        ends = self.ends
        newest = max((o for o, r in zip(origin, recent) if o >= 0 and not r), default=-1)
        if newest < 0:
            return []
        limit = ends[newest] - ends[newest] % band
        return [s for s in slots if origin[s[0]] >= 0 and ends[origin[s[0]]] <= limit]
