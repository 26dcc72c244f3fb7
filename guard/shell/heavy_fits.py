"""Heavy fits on a busy worker: long bodies are fitted in threads, off the event loop, at most
`HeavyFitSettings.concurrency` at once per event loop; a fit that waits longer than `wait_seconds`
for its turn goes the deterministic path at once (see `guard.core.config.HeavyFitSettings`).

Why a bound and not a thread per request: the fit's work is Python holding the interpreter's lock
but for tiktoken's encoding, so two fits at once take as long as two in a row, and every thread
working beside the event loop leaves it a smaller share of the lock: the requests that fit, and
LiteLLM's own work on each, wait for it (bench.heavy_fits measures it).
"""

from __future__ import annotations

import asyncio
import time
import weakref

from guard.core.config import HeavyFitSettings
from guard.state import telemetry


class HeavyFits:
    """The turns of one guard's heavy fits, per event loop (a proxy worker runs one; SDK code may
    run several, one after another)."""

    def __init__(self, settings: HeavyFitSettings | None = None) -> None:
        self.settings = settings or HeavyFitSettings()
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self.waiting = 0  # fits waiting for their turn now, on every loop

    def of(self, messages: object) -> HeavyFits | None:
        """These turns for a body whose message list makes its fit a heavy one, else None."""
        return self if isinstance(messages, list) and len(messages) >= self.settings.min_messages else None

    def _gate(self) -> asyncio.Semaphore | None:
        if self.settings.concurrency == 0:
            return None
        loop = asyncio.get_running_loop()
        gate = self._gates.get(loop)
        if gate is None:
            gate = self._gates[loop] = asyncio.Semaphore(self.settings.concurrency)
        return gate

    async def turn(self, deadline: float | None = None) -> bool:
        """Wait for a turn (until `deadline`, a `time.monotonic()`; None: for as long as it
        takes); False when the deadline passed first (no turn taken: nothing to `done`)."""
        gate = self._gate()
        if gate is None:
            return True
        if not gate.locked():
            await gate.acquire()  # (free: returns at once)
            return True
        self.waiting += 1
        try:
            if deadline is None:
                await gate.acquire()
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                telemetry.HURRIED.inc()
                return False
            try:
                await asyncio.wait_for(gate.acquire(), left)
            except asyncio.TimeoutError:
                telemetry.HURRIED.inc()
                return False
            return True
        finally:
            self.waiting -= 1

    def done(self) -> None:
        """The end of a turn `turn` gave."""
        gate = self._gate()
        if gate is not None:
            gate.release()
