"""A circuit breaker: after `threshold` failures in a row, skip the dependency for `cooldown`
seconds, then let one trial call through (half-open); a success closes the circuit again.

Used for the summarizer (a failing model is not hammered on every request) and for the shared
cache (a dead Redis costs one timeout per cooldown, not one per request)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Literal

State = Literal["closed", "open", "half_open"]


class CircuitBreaker:
    def __init__(self, threshold: int, cooldown: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._trial = False
        self._lock = threading.Lock()

    @property
    def state(self) -> State:
        if self._opened_at is None:
            return "closed"
        return "half_open" if self._clock() - self._opened_at >= self.cooldown else "open"

    def allow(self) -> bool:
        """Whether a call may go out now (in half-open state, only one at a time)."""
        with self._lock:
            state = self.state
            if state == "closed":
                return True
            if state == "open" or self._trial:
                return False
            self._trial = True
            return True

    def success(self) -> None:
        with self._lock:
            self._failures, self._opened_at, self._trial = 0, None, False

    def failure(self) -> None:
        with self._lock:
            self._failures += 1
            self._trial = False
            if self._opened_at is not None or self._failures >= self.threshold:
                self._opened_at = self._clock()
