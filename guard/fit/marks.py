"""The marks one fit cuts to, immutable: a new `Marks` replaces the old when a step moves them.
The words (stop mark, floor, band, room bar): docs/glossary.md."""

from __future__ import annotations

from dataclasses import dataclass, replace

from guard.core.budget import Budget, quantized_stop


@dataclass(frozen=True)
class Marks:
    stop_at: int  # a step stops once the input is at or below this
    floor: int = 0  # cutting below this wastes the window (see Budget.floor)
    room: int = 0  # the most input tokens the request may carry (see Budget.room)
    target: int = 0  # the low-water mark (see Budget.target)
    band: int = 1  # the quantum cuts move in (see Budget.band)
    ceiling: int | None = None  # a carried cut's mark: its prefix's stop mark (guard.fit.carried)
    least: int = 0  # a carried cut's bottom: a drop that would leave less is passed over when later turns can do
    # near-lossless rewrites run on every overflow, past the stop mark (one form per message, turn
    # after turn); a carried cut's prefix is fitted once per band and only as far as its mark
    every_overflow: bool = True

    @classmethod
    def of(cls, budget: Budget, total: int) -> Marks:
        """A request's marks: its budget's, the stop mark for `total` input tokens."""
        return cls(budget.stop_at(total), budget.floor, budget.room, budget.target, budget.band)

    def requantized(self, total: int) -> Marks:
        """The marks before a step: the stop mark is the conversation's total minus the overflow
        above the low-water mark rounded up to whole bands. The amount a step cuts then changes
        only when the total crosses a band, so a growing conversation keeps the same cut, turn
        after turn, whatever the steps before it saved on newer messages. A carried cut's prefix
        (`ceiling`) stops at its mark itself: it is cut once, to a mark the replay chose to leave
        the room bar (`guard.fit.replay.choose_mark`), and a band-quantized stop under that mark
        let whole turns step below the bar even where the mark was raised to the room (a held-out
        OpenHands loop: every mark up to the room cut to 0.597 of it, a whole-turn cut at 0.82
        there)."""
        stop = self.ceiling if self.ceiling is not None else quantized_stop(total, self.target, self.band)
        floor = stop - self.band
        if self.least < stop:
            floor = max(floor, self.least)
        return replace(self, stop_at=stop, floor=floor)

    def stopping_at(self, stop_at: int) -> Marks:
        return replace(self, stop_at=stop_at)
