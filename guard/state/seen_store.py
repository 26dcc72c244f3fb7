"""When conversations were last sent, shared: the engine's `SeenLog` mirrored in the proxy's
coordination Redis, so every worker and replica judges a conversation's cache temperature alike
(see guard.fit.temperature). Fingerprints, times and counts only, each key expiring after
`KEEP_SECONDS`. Before a fit the shell reads the conversation's record into the log (one bounded
round trip); after it, writes the log's record back. Redis configured but down, slow or behind
its open circuit breaker: `fresh` says so, and the request is fitted as if its cache were warm.
"""

from __future__ import annotations

from guard.fit.temperature import LONG_TTL_SECONDS, Seen, SeenLog
from guard.state.cache import _FAILED, SummaryCache

PREFIX = "context-guard:seen:"
KEEP_SECONDS = 2 * LONG_TTL_SECONDS  # past the longest provider TTL a conversation is cold anyway


class SeenStore:
    def __init__(self, cache: SummaryCache, log: SeenLog) -> None:
        self.cache = cache
        self.log = log

    async def fresh(self, key: str) -> bool:
        """Take the shared record of conversation `key` into the log. False when the shared store
        is configured but did not answer (the temperature is then unknown); True otherwise,
        also without a shared store (the log alone is the record)."""
        store = self.cache.shared()
        if store is None:
            return True
        if not self.cache.breaker.allow():
            return False
        answer = await self.cache._ask("seen", store.get(PREFIX + key))
        if answer is _FAILED:
            return False
        self.cache.breaker.success()
        seen = Seen.from_json(answer)
        if seen is not None:
            self.log.put(key, seen)
        return True

    async def record(self, key: str) -> None:
        """Write the log's record of conversation `key` to the shared store (best effort)."""
        seen = self.log.get(key)
        store = self.cache.shared()
        if seen is None or store is None or not self.cache.breaker.allow():
            return
        if await self.cache._ask("seen", store.set(PREFIX + key, seen.to_json(), ex=KEEP_SECONDS)) is not _FAILED:
            self.cache.breaker.success()
