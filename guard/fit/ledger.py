"""What the steps of one fit did, written as they do it: one entry per step's pass (tokens saved,
items touched; a correction is an entry of its own, never an edit), the steps skipped with why,
the steps that saw every candidate, and the results dedupe replaced. The report's actions are its
sums per step, in step order. Append-only: a step tried tentatively writes to a ledger of its own,
appended here (`extend`) only if its result stands."""

from __future__ import annotations

from dataclasses import dataclass, field

from guard.core.report import Action, Skipped
from guard.core.steps import ORDER


@dataclass
class Ledger:
    entries: list[tuple[str, int, int]] = field(default_factory=list)  # (step, tokens saved, items)
    skipped: list[Skipped] = field(default_factory=list)
    exhausted: set[str] = field(default_factory=set)  # steps another round would find nothing new for
    # dedupe: (origin, slot) of a later copy replaced by a marker -> (origin, slot) of the first copy
    duplicate_of: dict[tuple[int, int | None], tuple[int, int | None]] = field(default_factory=dict)

    def record(self, kind: str, saved: int, items: int) -> None:
        """A step's pass that touched `items` items (none: nothing to write)."""
        if items:
            self.entries.append((kind, saved, items))

    def adjust(self, kind: str, saved: int, items: int) -> None:
        """A correction of a step's sums (negative items: an earlier edit undone)."""
        self.entries.append((kind, saved, items))

    def extend(self, other: Ledger) -> None:
        """Append what `other` (a tentative step's ledger) recorded."""
        self.entries += other.entries
        self.skipped += other.skipped
        self.exhausted |= other.exhausted
        self.duplicate_of.update(other.duplicate_of)

    def copy(self) -> Ledger:
        return Ledger(list(self.entries), list(self.skipped), set(self.exhausted), dict(self.duplicate_of))

    @property
    def actions(self) -> list[Action]:
        """What each step did, in step order (least destructive first)."""
        totals: dict[str, list[int]] = {}
        for kind, saved, items in self.entries:
            total = totals.setdefault(kind, [0, 0])
            total[0] += saved
            total[1] += items
        done = [Action(kind, saved, items) for kind, (saved, items) in totals.items() if items > 0]
        return sorted(done, key=lambda a: ORDER.get(a.kind, len(ORDER)))
