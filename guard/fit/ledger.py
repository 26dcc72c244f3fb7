"""What the steps of one fit did, written as they do it: one entry per step's pass (tokens saved,
items touched; a correction is an entry of its own, never an edit), and the steps skipped with
why. The report's actions are its sums per step, in step order."""

from __future__ import annotations

from dataclasses import dataclass, field

from guard.core.report import Action, Skipped
from guard.core.steps import ORDER


@dataclass
class Ledger:
    entries: list[tuple[str, int, int]] = field(default_factory=list)  # (step, tokens saved, items)
    skipped: list[Skipped] = field(default_factory=list)

    def record(self, kind: str, saved: int, items: int) -> None:
        """A step's pass that touched `items` items (none: nothing to write)."""
        if items:
            self.entries.append((kind, saved, items))

    def adjust(self, kind: str, saved: int, items: int) -> None:
        """A correction of a step's sums (negative items: an earlier edit undone)."""
        self.entries.append((kind, saved, items))

    def copy(self) -> Ledger:
        return Ledger(list(self.entries), list(self.skipped))

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
