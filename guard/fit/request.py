"""What travels through a fit as objects: what was resolved for a request before it is fitted
(`Resolved`: its dialect, limits, policy and counter) and what the fit reads of its body once
(`Counted`: its turns and their counts, the output asked for, the budget that makes)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guard.core.budget import Budget, make_budget, requested_output
from guard.core.limits import ModelLimits
from guard.core.policy import Policy
from guard.core.tokens import TokenCounter
from guard.dialects import Dialect
from guard.dialects.base import FILE_REFERENCE, refers_to_files


@dataclass(frozen=True)
class Resolved:
    """What the engine resolved for a request: its dialect, the model's limits, the policy, the
    token counter (and whether its counts are exact), the model family and whether LiteLLM maps
    reasoning effort to adaptive thinking for it, and the calibration (key, source) it used;
    `today_factor`: where `counter` counts with a factor a conversation's cut was recorded with, the
    one the deployment counts with now (`guard.fit.factor_change`; 0: the counter's own)."""

    dialect: Dialect
    limits: ModelLimits
    policy: Policy
    counter: TokenCounter
    exact: bool = False
    family: str = "other"
    adaptive_thinking: bool = False
    calibration: tuple[str, str] | None = None
    today_factor: float = 0.0

    def checked_room(self, room: int, messages: int) -> int:
        """The room a fit of `messages` messages is checked against: `room`; counted with a factor
        higher than today's, `room` scaled by the two factors, plus a token a count (each rounds up
        on its own; images are not scaled): what holds every fit that today's counts fit in `room`,
        which `guard.fit.factor_change` checks again with today's (counted with a lower factor,
        such a fit counts no more than today's: `room` holds it)."""
        if not self.today_factor or self.today_factor >= self.counter.factor:
            return room
        return math.floor(room * self.counter.factor / self.today_factor) + messages + 1


@dataclass(frozen=True)
class Counted:
    """What a fit reads of the request once: its turns and their counts, the output key and the
    output asked for, and the budget that makes (and where its output came from)."""

    body: Mapping[str, Any]
    dialect: Dialect
    messages: tuple[Mapping[str, Any], ...]
    counts: tuple[int, ...]
    fixed: int
    key: str
    requested: int | None
    budget: Budget
    source: str
    # the tokens of a pinned prompt outside the list of turns (Anthropic's `system`, the Responses
    # API's `instructions`), and the fields the count cannot see (see Dialect.unseen_state)
    system_fixed: int = 0
    unseen: tuple[str, ...] = ()
    # each message's `message_hash` (the counter's key of it), worked out with its count
    hashes: tuple[int, ...] = ()

    @classmethod
    def of(cls, body: Mapping[str, Any], resolved: Resolved) -> Counted:
        """The body's messages and fixed tokens counted, its output read and budgeted."""
        dialect, counter = resolved.dialect, resolved.counter
        # what the dialect reads of the body, all at once; then the budget, then the counts
        messages = dialect.messages(body)
        key = dialect.output_key(body, resolved.limits.model)
        unseen = tuple(dialect.unseen_state(body)) + ((FILE_REFERENCE,) if refers_to_files(messages) else ())
        pinned = [k for k in dialect.system_keys if k in body]  # a pinned prompt outside the turns
        requested = requested_output(body, key)
        budget, source = make_budget(resolved.limits, resolved.policy, requested)
        counts, hashes = counter.keyed(dialect, messages)
        fixed = counter.fixed(dialect, body)
        system = sum(counter.fixed(dialect, {k: body[k]}) for k in pinned) - len(pinned) * counter.fixed(dialect, {})
        return cls(
            body,
            dialect,
            tuple(messages),
            tuple(counts),
            fixed,
            key,
            requested,
            budget,
            source,
            system,
            unseen,
            tuple(hashes),
        )

    @property
    def before(self) -> int:
        """The request's input tokens as the client sent it."""
        return self.fixed + sum(self.counts)
