"""Heavy fits on a busy worker: long bodies are fitted in threads, off the event loop, at most
`HeavyFitSettings.concurrency` at once per event loop; a fit that waits longer than `wait_seconds`
for its turn goes the deterministic path at once (see `guard.core.config.HeavyFitSettings`).

Why a bound and not a thread per request: the fit's work is Python holding the interpreter's lock
but for tiktoken's encoding, so two fits at once take as long as two in a row, and every thread
working beside the event loop leaves it a smaller share of the lock: the requests that fit, and
LiteLLM's own work on each, wait for it (bench.heavy_fits measures it).

Why a conversation's next turn stays on the loop (`warm`): a long body this worker fitted a turn or
two ago, whose new messages fit the room its last body left free, carries its cut: its fit costs
about those messages, a few milliseconds (18 ms at the median for a history of 1,600 messages). In
a thread the same fit cost more than that again: the hop, and the lock handed back and forth
between the thread and the event loop on two cores (bench.overhead, two workers on two cores, the
overflowing turns of four real agent loops: the guard's CPU per turn +9.7 ms with every long body
in a thread, +4.7 ms with none). A turn that makes a new cut goes to a thread as before: on that
1,600-message history such a fit took up to 460 ms, time the event loop would not serve anything.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Mapping
from typing import Any

from guard.core.config import HeavyFitSettings
from guard.core.memo import Memo
from guard.state import telemetry

WARM_ENTRIES = 10_000  # conversations `HeavyFits.warm` remembers per worker, the oldest forgotten first
# characters a token, at the fewest that still errs on the side of a thread for most text (English
# prose ~4, code ~3; JSON ~2.5 reads as more room needed than it takes: a few warm turns go to a thread)
CHARS_PER_TOKEN = 3


def text_chars(value: Any) -> int:
    """The characters of every string in a JSON-like value (a message: its text, tool calls and
    results)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        return sum(text_chars(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(text_chars(v) for v in value)
    return 0


class HeavyFits:
    """The turns of one guard's heavy fits, per event loop (a proxy worker runs one; SDK code may
    run several, one after another)."""

    def __init__(self, settings: HeavyFitSettings | None = None) -> None:
        self.settings = settings or HeavyFitSettings()
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self.waiting = 0  # fits waiting for their turn now, on every loop
        # conversation fingerprint -> its last body fitted here: messages, tokens of room left (`warm`)
        self._fitted: Memo[str, tuple[int, int]] = Memo(WARM_ENTRIES)

    def of(self, messages: object, conversation: str | None = None) -> HeavyFits | None:
        """These turns for a body whose message list makes its fit a heavy one, else None: a long
        list, but that of a conversation this worker fitted a little before (`warm`)."""
        if not isinstance(messages, list) or len(messages) < self.settings.min_messages:
            return None
        return None if conversation is not None and self.warm(conversation, messages) else self

    def warm(self, conversation: str, messages: list[Any]) -> bool:
        """Whether this worker fitted `conversation` before and the messages added since hold at
        most `warm_chars` characters of text, fewer tokens (at `CHARS_PER_TOKEN`) than its last
        body left free of its room: its cut is carried, a new one is not made (that can take a
        long history's fit hundreds of milliseconds, for a thread). A list shorter than then was
        edited: not warm."""
        limit = self.settings.warm_chars
        record = self._fitted.get(conversation)
        if record is None or limit == 0 or record[0] > len(messages):
            return False
        before, free = record
        limit = min(limit, free * CHARS_PER_TOKEN)
        total = 0
        for message in messages[before:]:
            total += text_chars(message)
            if total > limit:
                return False
        return True

    def fitted(self, conversation: str, messages: int, free: int) -> None:
        """Note that this worker fitted a body of `conversation` of this many messages, its fit
        leaving `free` tokens of its room."""
        self._fitted.put(conversation, (messages, free))

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
