"""The summary cache: a bounded in-process LRU (with TTL) in front of a shared Redis.

- In the proxy the shared layer is LiteLLM's coordination Redis (`general_settings.
  coordination_redis`, a Redis `cache_params`, or `REDIS_HOST`/`REDIS_URL`), reached through the
  client LiteLLM already built for it, so every replica behind the same Redis shares summaries.
- In SDK mode it is `cache.redis_url`.
- With neither, the cache is per process.

Keys are built by `guard.fit.summary.span_key` (tenant + model + prompt version + span hash): a summary
is never served to another tenant. Values are the summary text only. A Redis that fails or is slow
(`redis_timeout_seconds`) counts as a miss, is reported in the metrics, and a circuit breaker stops
asking it for `cooldown_seconds` after `failure_threshold` errors in a row: the request goes on
without the cache, never waits on it.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any, Protocol, cast

from cachetools import TTLCache

from guard.core.breaker import CircuitBreaker
from guard.core.config import CacheSettings
from guard.state import telemetry


class SharedStore(Protocol):
    async def get(self, key: str) -> Any: ...

    async def mget(self, keys: list[str]) -> Any: ...

    async def set(self, key: str, value: str, ex: int) -> Any: ...


class SummaryCache:
    """Where compaction summaries are kept: a bounded in-process TTL LRU in front of a shared
    store (the proxy's coordination Redis, or `cache.redis_url` in SDK mode). A store failure is a
    bounded miss behind its own circuit breaker, never an error."""

    def __init__(self, settings: CacheSettings | None = None, shared: SharedStore | None = None) -> None:
        self.settings = settings or CacheSettings()
        self._memory: TTLCache[str, str] | None = (
            TTLCache(self.settings.memory_entries, self.settings.ttl_seconds) if self.settings.memory_entries else None
        )
        self._lock = threading.Lock()
        self._shared = shared
        self._shared_resolved = shared is not None
        self._url_client: tuple[Any, SharedStore] | None = None
        self.breaker = CircuitBreaker(self.settings.failure_threshold, self.settings.cooldown_seconds)

    # -- the shared layer ---------------------------------------------------------------------
    def shared(self) -> SharedStore | None:
        if self._shared_resolved:
            return self._shared
        proxy = _proxy_redis()
        if proxy is not None:
            return proxy  # LiteLLM keeps one client per event loop
        if self.settings.redis_url:
            loop = asyncio.get_running_loop()  # an asyncio client belongs to the loop that made it
            if self._url_client is None or self._url_client[0] is not loop:
                self._url_client = (loop, _url_redis(self.settings.redis_url, self.settings.redis_timeout_seconds))
            return self._url_client[1]
        return None

    async def _ask(self, op: str, coro: Any) -> Any:
        try:
            return await _within(coro, self.settings.redis_timeout_seconds)
        except Exception as e:  # down, slow, or refusing: a miss, never an error for the request
            self.breaker.failure()
            telemetry.CACHE.labels(op, "timeout" if isinstance(e, asyncio.TimeoutError) else "error").inc()
            telemetry.log.warning("context-guard summary cache: redis %s failed (%s)", op, type(e).__name__)
            return _FAILED

    # -- API ----------------------------------------------------------------------------------
    async def get(self, key: str) -> str | None:
        with self._lock:
            value = self._memory.get(key) if self._memory is not None else None
        if value is not None:
            telemetry.CACHE.labels("get", "memory_hit").inc()
            return value
        store = self.shared()
        if store is None or not self.breaker.allow():
            telemetry.CACHE.labels("get", "miss").inc()
            return None
        raw = await self._ask("get", store.get(key))
        if raw is _FAILED:
            return None
        self.breaker.success()
        if raw is None:
            telemetry.CACHE.labels("get", "miss").inc()
            return None
        value = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
        self._remember(key, value)
        telemetry.CACHE.labels("get", "redis_hit").inc()
        return value

    async def get_many(self, keys: list[str]) -> list[str | None]:
        """`get` of each key, with one Redis round trip (MGET) for those not in memory: a plan
        looks up all its candidate spans at once, and one connection per request (not one per
        span) keeps a busy proxy from exhausting the Redis connection pool."""
        out: list[str | None] = []
        with self._lock:
            for key in keys:
                out.append(self._memory.get(key) if self._memory is not None else None)
        for value in out:
            if value is not None:
                telemetry.CACHE.labels("get", "memory_hit").inc()
        missing = [i for i, v in enumerate(out) if v is None]
        if not missing:
            return out
        store = self.shared()
        if store is None or not self.breaker.allow():
            for _ in missing:
                telemetry.CACHE.labels("get", "miss").inc()
            return out
        names = [keys[i] for i in missing]
        # a Redis Cluster client cannot MGET keys of different slots in one command
        mget = getattr(store, "mget_nonatomic", None) or store.mget
        raws = await self._ask("get", mget(names))
        if raws is _FAILED or not isinstance(raws, (list, tuple)) or len(raws) != len(names):
            return out
        self.breaker.success()
        for i, key, raw in zip(missing, names, raws):
            if raw is None:
                telemetry.CACHE.labels("get", "miss").inc()
                continue
            value = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
            self._remember(key, value)
            telemetry.CACHE.labels("get", "redis_hit").inc()
            out[i] = value
        return out

    async def set(self, key: str, value: str) -> None:
        self._remember(key, value)
        store = self.shared()
        if store is None or not self.breaker.allow():
            return
        if await self._ask("set", store.set(key, value, ex=self.settings.ttl_seconds)) is not _FAILED:
            self.breaker.success()

    def _remember(self, key: str, value: str) -> None:
        if self._memory is not None:
            with self._lock:
                self._memory[key] = value

    def clear_memory(self) -> None:
        if self._memory is not None:
            with self._lock:
                self._memory.clear()


_FAILED = object()
_GRACE_STEPS = 5


async def _within(coro: Any, seconds: float) -> Any:
    """`coro`'s result, or TimeoutError after `seconds`, without blaming Redis for the event
    loop's lag: on a saturated proxy the reply and the timer are seen in the same loop iteration
    (and `wait_for` lets the timer win). On timeout the task gets a few more iterations to
    deliver a reply that has already arrived before it is cancelled."""
    task = asyncio.ensure_future(coro)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    for _ in range(_GRACE_STEPS):
        if done or task.done():
            return task.result()
        await asyncio.sleep(0)
    if task.done():
        return task.result()
    task.cancel()
    raise asyncio.TimeoutError


def _proxy_redis() -> SharedStore | None:
    """The async client of the proxy's coordination Redis, if the proxy has one."""
    module = sys.modules.get("litellm.proxy.proxy_server")
    cache = getattr(module, "redis_usage_cache", None) if module else None
    if cache is None:
        return None
    try:
        return cast("SharedStore | None", cache.init_async_client())
    except Exception:
        return None


def _url_redis(url: str, timeout: float) -> SharedStore:
    import redis.asyncio

    return cast("SharedStore", redis.asyncio.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout))
