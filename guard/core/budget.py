"""The budget of one request: how many input tokens fit once output and margin are reserved.

    shared rule:   room = window - reserved_output - margin
    separate rule: room = max_input_tokens - margin          (output is capped on its own)

Reserved output is the request's `max_tokens`/`max_completion_tokens`, else the policy default,
clamped to the model's output cap and the policy cap. The guard writes it back explicitly.

Cutting aims at or below a low-water mark (the room itself by default), and the amount cut is
rounded up to whole bands (`cut_quantum_ratio` of the room, 35% by default): a conversation that
grows by less than a band gets the *same* cut as the turn before, so what is sent keeps a
byte-identical prefix (provider prompt caches keep hitting), and a cut lands within one band
below the mark (the planner requantizes before each step: see `Context.requantize`).
The words (room, band, mark, floor, room bar, carried cut, ...): docs/glossary.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from guard.core.errors import BadRequest
from guard.core.limits import ModelLimits
from guard.core.policy import Policy


@dataclass(frozen=True)
class Budget:
    """A request's budget: the model's limits, the output it reserves and the safety margin, and
    what they make (worked out once): the `room` (most input tokens the request may carry), the
    `target` (the low-water mark cutting aims at), the `band` (the quantum cuts move in,
    `cut_quantum_ratio` of the room) and the `floor` (the bottom of the band below the target:
    where a band crossing is cut, deep enough to last a band of growth; a cold cache's cut goes a
    little below it, never under the room bar)."""

    limits: ModelLimits
    reserved_output: int
    margin: int
    low_water_ratio: float
    quantum_ratio: float = 0.35
    room: int = field(init=False, compare=False)
    target: int = field(init=False, compare=False)
    band: int = field(init=False, compare=False)
    floor: int = field(init=False, compare=False)

    def __post_init__(self) -> None:
        shared = self.limits.rule == "shared"
        room = self.limits.max_input_tokens - (self.reserved_output if shared else 0) - self.margin
        target = math.floor(room * self.low_water_ratio)
        band = band_of(room, self.quantum_ratio)
        for name, value in (("room", room), ("target", target), ("band", band), ("floor", target - band)):
            object.__setattr__(self, name, value)

    def fits(self, input_tokens: int) -> bool:
        return input_tokens <= self.room

    def stop_at(self, total: int) -> int:
        """Cut until input <= this: `total` minus the overflow rounded up to whole bands."""
        if total <= self.room:
            return total
        return quantized_stop(total, self.target, self.band)

    def with_output(self, reserved_output: int) -> Budget:
        return replace(self, reserved_output=reserved_output)

    def with_room(self, room: int) -> Budget:
        """This budget as it was for a request of this conversation whose room was `room` (its
        reserved output another: clients that set `max_tokens` turn by turn), to make a cut made
        for that request again as it was; itself where the room is the same or no reserved output
        leaves that room (a separate window's room does not depend on it)."""
        output = self.reserved_output + self.room - room
        if room == self.room or self.limits.rule != "shared" or output < 1:
            return self
        return replace(self, reserved_output=output)


def band_of(room: int, quantum_ratio: float) -> int:
    """The band cuts move in: `quantum_ratio` (`cut_quantum_ratio`) of the room, at least a token."""
    return max(1, math.floor(room * quantum_ratio))


def quantized_stop(total: int, target: int, band: int) -> int:
    """`total` minus its overflow above `target`, rounded up to whole bands (`total` if none)."""
    return total - math.ceil(max(0, total - target) / band) * band


OUTPUT_KEYS = ("max_tokens", "max_completion_tokens")  # OpenAI's two names for the output limit


def requested_output(body: Mapping[str, Any], key: str) -> int | None:
    """The output limit the client asked for, validated. With both OpenAI names present, the
    larger counts: a provider may honour either, so the budget must hold for both."""
    keys = OUTPUT_KEYS if key in OUTPUT_KEYS else (key,)
    values = []
    for name in keys:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BadRequest(f"{name} must be a positive integer")
        values.append(value)
    return max(values) if values else None


def make_budget(limits: ModelLimits, policy: Policy, requested: int | None) -> tuple[Budget, str]:
    """The budget and where its reserved output came from: request, default or clamped."""
    cap = limits.max_output_tokens
    if policy.max_output_tokens is not None:
        cap = min(cap, policy.max_output_tokens)
    wanted = requested if requested is not None else min(policy.default_max_tokens, cap)
    reserved = min(wanted, cap)
    source = "request" if requested is not None else "policy_default"
    if reserved < wanted:
        source = "clamped_to_cap"
    margin = max(policy.safety_margin_tokens, math.ceil(policy.safety_margin_ratio * limits.max_input_tokens))
    return Budget(limits, reserved, margin, policy.low_water_ratio, policy.cut_quantum_ratio), source
