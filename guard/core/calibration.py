"""Counts that learn from the provider: the factor an estimated count is multiplied by, per deployment.

For a model without an exact local tokenizer the guard counts with a stand-in encoding and
multiplies by a factor (`models.py`: 1.25 for Claude, 1.15 for Gemini, 1.2 for other open models).
Every answer reports what the provider really counted (`usage.prompt_tokens`, cached input
included), so the guard can measure each deployment's *ratio*: provider tokens / the guard's raw
(unscaled) count of the body it forwarded. With `calibration_mode: auto` the factor in use becomes
a high quantile of the recent ratios (`calibration_quantile`, 0.99) once
`calibration_min_observations` exist; until then the static factor holds. A few hundred answers
estimate a 99th percentile, they do not bound it, so the learned factor adds headroom in two parts:
- `calibration_tail` (0.5) times the gap between that quantile and the 90th percentile: traffic
  whose ratios spread widely (code, JSON and prose through another vocabulary) gets more room
  above its quantile than traffic whose ratios are all alike;
- `calibration_headroom` (3%) on top, for what the window has not seen yet.
Both are order statistics well inside the window, so one odd answer moves neither.

- A counting miss (the provider refused as too long a request the guard counted as fitting) raises
  a floor under the factor at once, in static mode too: `calibration_miss_step` times the factor
  that missed. It never lowers anything.
- Bounds: every observed ratio is clamped to [`calibration_floor`, `calibration_cap`] before it is
  kept (one odd answer, or one tenant's unusual traffic, moves a quantile by one sample at most and
  never past the bounds), and so is the factor.
- A family pinned in `calibration` (the admin's factor) starts there, and the pin is a floor: usage
  may raise it (in auto mode), a counting miss raises it (in any mode), nothing lowers it.

Pure functions over a list of ratios: the shell keeps the ratios (in process and in the proxy's
Redis) and feeds them here. Only provider-reported usage is ever recorded, never client input.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Source = Literal["static", "learned", "pinned", "miss"]
GRANULARITY = 0.01  # learned factors move in steps of 1%: counters (and their memos) are per factor
TAIL_FROM = 0.9  # the lower end of the tail whose spread sets a learned factor's headroom


@dataclass(frozen=True)
class Settings:
    """The calibration part of a policy."""

    mode: Literal["static", "auto"] = "static"
    floor: float = 0.5
    cap: float = 4.0
    quantile: float = 0.99
    min_observations: int = 20
    window: int = 200  # recent ratios kept per deployment
    miss_step: float = 1.1
    tail: float = 0.5  # plus this times the gap between the quantile and the 90th percentile
    headroom: float = 0.03  # all times (1 + headroom)


@dataclass(frozen=True)
class Factor:
    """The factor a request is counted with, and where it came from."""

    value: float
    source: Source
    observations: int = 0


def key(model: str, api_base: str = "") -> str:
    """Which deployment a factor is learned for: the model as served and where it is served."""
    return f"{model}|{api_base}"


def bounded(ratio: float, settings: Settings) -> float | None:
    """An observed ratio as it is kept: clamped to the bounds; None if it is not a ratio at all."""
    if not isinstance(ratio, (int, float)) or not math.isfinite(ratio) or ratio <= 0:
        return None
    return min(settings.cap, max(settings.floor, float(ratio)))


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile of `values` (nearest rank, rounded up: never below the share asked for)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def factor(
    static: float,
    ratios: Sequence[float],
    settings: Settings,
    *,
    pin: float | None = None,
    missed: float | None = None,
) -> Factor:
    """The factor in use for one deployment. It starts from the admin's pin for the family, else the
    family's static factor; in auto mode, with enough observations, the learned factor replaces
    it (a pin stays its floor: usage may raise a pinned factor, never lower it); after a counting
    miss (`missed`: the highest factor that missed), in either mode and whatever the pin, it is at
    least `miss_step` times that. Bounded by the cap, except that a pin above it holds."""
    value, source = (pin, "pinned") if pin is not None else (static, "static")
    kept = [r for r in (bounded(x, settings) for x in ratios[-settings.window :]) if r is not None]
    if settings.mode == "auto" and len(kept) >= settings.min_observations:
        taught = learned(kept, settings)
        if pin is None or taught > pin:
            value, source = taught, "learned"
    if missed is not None and missed * settings.miss_step > value:
        value, source = missed * settings.miss_step, "miss"
    if source in ("static", "pinned"):
        return Factor(value, source, len(kept))  # type: ignore[arg-type]
    value = min(settings.cap, max(settings.floor, value))
    if pin is not None:
        value = max(value, pin)
    return Factor(_step_up(value), source, len(kept))  # type: ignore[arg-type]


def learned(ratios: Sequence[float], settings: Settings) -> float:
    """The factor learned from these (bounded) ratios: the quantile, plus `tail` times its gap above
    the 90th percentile, times 1 + `headroom` (docs/benchmarks.md: on the texts it was tuned on, with
    200 answers the quantile alone under-counted more than 1% of texts on 2 of 80 train/test pairs,
    with both parts on none; on the committed snapshot the bench samples since, on 5, each by 3-4
    short texts of 200 and 1-8 tokens, which the safety margin covers)."""
    top = quantile(ratios, settings.quantile)
    gap = top - quantile(ratios, TAIL_FROM) if settings.quantile > TAIL_FROM else 0.0
    return (top + settings.tail * gap) * (1 + settings.headroom)


def after_miss(used: float, missed: float | None) -> float:
    """The record after a counting miss with factor `used`: the highest factor that missed (it
    only goes up)."""
    return max(used, missed or 0.0)


def _step_up(value: float) -> float:
    """Rounded up to the granularity: a factor never rounds toward under-counting."""
    return round(math.ceil(round(value / GRANULARITY, 6)) * GRANULARITY, 4)
