"""The summary cache's bound on a Redis call: a slow Redis is a miss, a busy event loop is not."""

from __future__ import annotations

import asyncio
import time

import pytest

from guard.core.config import CacheSettings
from guard.state.cache import SummaryCache, _within


def test_a_reply_that_arrived_while_the_loop_was_busy_is_not_a_timeout():
    async def scenario() -> str:
        loop = asyncio.get_running_loop()
        reply = loop.create_future()

        # a client library hands the reply through a few tasks (connection, parser, command)
        async def read() -> str:
            return await reply

        async def parse() -> str:
            return await asyncio.ensure_future(read())

        async def redis_get() -> str:
            return await asyncio.ensure_future(parse())

        call = asyncio.ensure_future(_within(redis_get(), 0.05))
        for _ in range(2):
            await asyncio.sleep(0)  # the call is waiting
        loop.call_soon(reply.set_result, "summary")  # Redis answers at once...
        time.sleep(0.1)  # ...while the proxy's loop is busy past the deadline
        return await call

    assert asyncio.run(scenario()) == "summary"  # asyncio.wait_for raises TimeoutError here


def test_a_redis_that_does_not_answer_is_a_bounded_miss():
    class Hung:
        async def get(self, key: str) -> None:
            await asyncio.sleep(3600)

        async def set(self, key: str, value: str, ex: int) -> None:
            await asyncio.sleep(3600)

    cache = SummaryCache(
        CacheSettings(memory_entries=0, redis_timeout_seconds=0.05, failure_threshold=2), shared=Hung()
    )
    start = time.monotonic()
    assert asyncio.run(cache.get("k")) is None
    assert asyncio.run(cache.get("k")) is None
    assert time.monotonic() - start < 1.0
    assert not cache.breaker.allow()  # two failures: Redis is skipped for the cooldown


@pytest.mark.parametrize("error", [ConnectionError("refused"), OSError("reset")])
def test_a_failing_redis_is_a_miss(error):
    class Down:
        async def get(self, key: str) -> None:
            raise error

    cache = SummaryCache(CacheSettings(memory_entries=0), shared=Down())
    assert asyncio.run(cache.get("k")) is None


def test_many_keys_take_one_round_trip_and_memory_answers_first():
    class Store:
        def __init__(self) -> None:
            self.data = {"b": b"from redis"}
            self.calls: list[tuple[str, ...]] = []

        async def get(self, key: str) -> None:
            raise AssertionError("get_many must not ask key by key")

        async def mget(self, keys: list[str]) -> list:
            self.calls.append(tuple(keys))
            return [self.data.get(k) for k in keys]

        async def set(self, key: str, value: str, ex: int) -> None:
            self.data[key] = value.encode()

    store = Store()
    cache = SummaryCache(CacheSettings(), shared=store)
    asyncio.run(cache.set("a", "in memory"))
    assert asyncio.run(cache.get_many(["a", "b", "c"])) == ["in memory", "from redis", None]
    assert store.calls == [("b", "c")]  # one round trip, only for what memory did not have
    assert asyncio.run(cache.get_many(["a", "b"])) == ["in memory", "from redis"]  # b is remembered
    assert store.calls == [("b", "c")]
