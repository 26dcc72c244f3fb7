"""Where learned calibration lives: an in-process copy in front of the proxy's coordination Redis.

Per deployment (`calibration.key`: model | api_base) the store keeps the recent ratios its provider
reported (provider input tokens / the guard's raw count of the body it forwarded) and the floor a
counting miss raised (the highest factor that missed; each policy applies its own step). Every
worker and replica pushes its observations to the same Redis list and reads the list back, so
they converge on one factor; the engine reads only the in-process copy, so a request never waits
on Redis. Redis down or slow: the last known copy (or the static factor) holds, the failure is
counted, and a circuit breaker stops asking for a while (the summary cache's settings:
`redis_timeout_seconds`, `failure_threshold`, `cooldown_seconds`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from guard.core import calibration
from guard.state import telemetry
from guard.state.cache import _FAILED, SummaryCache

PREFIX = "context-guard:calibration:"
KEPT = 500  # ratios kept per deployment (the policy's window reads the newest of them)
REFRESH_SECONDS = 2.0  # a worker re-reads a deployment's shared record at most this often before using it
TTL_SECONDS = 7 * 24 * 3600
WIDEST = calibration.Settings(floor=0.05, cap=20.0)  # what is stored; each policy bounds again when it reads
# raise a counting miss's floor atomically: never lowered by a concurrent, smaller miss
_RAISE = (
    "local v = redis.call('GET', KEYS[1]) "
    "if (not v) or tonumber(v) < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) end "
    "return redis.call('GET', KEYS[1])"
)


class CalibrationStore:
    """Recent ratios and miss floors per deployment, shared through the summary cache's Redis."""

    def __init__(self, cache: SummaryCache | None = None) -> None:
        self.cache = cache or SummaryCache()
        self._ratios: dict[str, deque[float]] = {}
        self._misses: dict[str, float] = {}
        self._read: dict[str, float] = {}  # when each deployment's shared record was last read
        self._lock = threading.Lock()

    # -- what the engine reads (never blocks) -------------------------------------------------
    def lookup(self, key: str) -> tuple[list[float], float | None]:
        with self._lock:
            return list(self._ratios.get(key, ())), self._misses.get(key)

    def keys(self) -> list[str]:
        with self._lock:
            return sorted(set(self._ratios) | set(self._misses))

    # -- what the callbacks write -------------------------------------------------------------
    async def observe(self, key: str, ratio: float) -> None:
        """One provider answer: keep its ratio here and in Redis, and take back what the other
        workers and replicas observed."""
        kept = calibration.bounded(ratio, WIDEST)
        if kept is None:
            return
        with self._lock:
            self._ratios.setdefault(key, deque(maxlen=KEPT)).append(kept)
        store = self._store()
        if store is None:
            return
        name = PREFIX + key
        pipe = store.pipeline(transaction=False)
        pipe.rpush(name + ":ratios", repr(kept))
        pipe.ltrim(name + ":ratios", -KEPT, -1)
        pipe.expire(name + ":ratios", TTL_SECONDS)
        pipe.lrange(name + ":ratios", 0, -1)
        pipe.get(name + ":miss")
        answer = await self.cache._ask("calibration", pipe.execute())
        if answer is _FAILED or not isinstance(answer, (list, tuple)) or len(answer) != 5:
            return
        self.cache.breaker.success()
        self._take(key, answer[3], answer[4])

    async def miss(self, key: str, used: float) -> float:
        """A counting miss with factor `used`: the record of the highest factor that missed goes
        up at once, here and for everyone sharing the Redis (the factor then stays at least
        `calibration_miss_step` times it). Returns the new record."""
        with self._lock:
            floor = calibration.after_miss(used, self._misses.get(key))
            self._misses[key] = floor
        store = self._store()
        if store is not None:
            answer = await self.cache._ask(
                "calibration", store.eval(_RAISE, 1, PREFIX + key + ":miss", repr(floor), TTL_SECONDS)
            )
            if answer is not _FAILED:
                self.cache.breaker.success()
                self._take(key, None, answer)
        return floor

    async def fresh(self, key: str) -> None:
        """Before a request counts with `key`'s factor: re-read the shared record if this worker
        has not for `REFRESH_SECONDS` (the other workers' and replicas' answers count too). One
        bounded round trip at most; Redis down or slow: the copy at hand is used."""
        now = time.monotonic()
        with self._lock:
            if now - self._read.get(key, float("-inf")) < REFRESH_SECONDS:
                return
            self._read[key] = now
        await self.refresh([key])

    async def refresh(self, keys: list[str]) -> None:
        """Read these deployments' shared records (the CLI; a worker that only serves)."""
        store = self._store()
        if store is None:
            return
        for key in keys:
            pipe = store.pipeline(transaction=False)
            pipe.lrange(PREFIX + key + ":ratios", 0, -1)
            pipe.get(PREFIX + key + ":miss")
            answer = await self.cache._ask("calibration", pipe.execute())
            if answer is _FAILED or not isinstance(answer, (list, tuple)) or len(answer) != 2:
                return
            self._take(key, answer[0], answer[1])

    async def shared_keys(self) -> list[str]:
        """The deployments with a shared record (the CLI)."""
        store = self._store()
        if store is None:
            return []
        found: set[str] = set()
        answer = await self.cache._ask("calibration", _scan(store, PREFIX + "*"))
        for name in answer if isinstance(answer, list) else []:
            text = name.decode() if isinstance(name, bytes) else str(name)
            found.add(text[len(PREFIX) :].rsplit(":", 1)[0])
        return sorted(found)

    # -- internals ----------------------------------------------------------------------------
    def _store(self) -> Any:
        store = self.cache.shared()
        if store is None or not self.cache.breaker.allow() or not hasattr(store, "pipeline"):
            return None
        return store

    def _take(self, key: str, ratios: Any, miss: Any) -> None:
        values = []
        for raw in ratios if isinstance(ratios, (list, tuple)) else []:
            try:
                value = calibration.bounded(float(raw.decode() if isinstance(raw, bytes) else raw), WIDEST)
            except (TypeError, ValueError):
                continue
            if value is not None:
                values.append(value)
        floor = None
        if miss is not None:
            try:
                floor = float(miss.decode() if isinstance(miss, bytes) else miss)
            except (TypeError, ValueError):
                floor = None
        with self._lock:
            self._read[key] = time.monotonic()
            if isinstance(ratios, (list, tuple)):
                self._ratios[key] = deque(values[-KEPT:], maxlen=KEPT)
            if floor is not None:
                self._misses[key] = max(floor, self._misses.get(key, 0.0))
        telemetry.log.debug("context-guard calibration %s: %d ratios", key, len(values))


async def _scan(store: Any, pattern: str) -> list[Any]:
    return [name async for name in store.scan_iter(match=pattern, count=500)]
