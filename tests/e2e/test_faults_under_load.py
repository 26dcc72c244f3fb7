"""Faults under load, the CI share of `bench/load.py --faults`: a real proxy with the guard, the
strict upstream and a real redis-server; concurrent clients in every request class while Redis is
killed and restarted, the summarizer fails and then times out. Every request must be answered
with its class's intended status, nothing may reach the upstream over its window, and every
provider refusal of what the guard counted as fitting must be a counted counting miss."""

from __future__ import annotations

import asyncio
import os
import shutil

import pytest

from bench import load

if shutil.which("redis-server") is None and os.environ.get("GUARD_REQUIRE_REDIS") == "1":
    raise RuntimeError("GUARD_REQUIRE_REDIS=1 but redis-server is not installed")
pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs Debian's redis-server")

SECONDS = 16
CLIENTS = {"fitting": 6, "overflowing": 4, "compaction": 2, "hopeless": 2, "miscount": 2}


def test_every_request_is_answered_as_intended_while_parts_fail(tmp_path):
    cluster = load.Cluster(tmp_path)
    try:
        misses_before = cluster.metric("context_guard_counting_misses_total")
        events: list[str] = []
        timeline = load.faults(cluster, SECONDS, events)
        results = asyncio.run(load.drive(cluster.url, CLIENTS, SECONDS))
        timeline.join()
        assert len(events) == 5, events  # every fault was injected during the load
        for c in load.CLASSES:
            r = results[c.name]
            assert r["errors"] == 0, (c.name, r["errors"])  # every request answered
            assert sum(r["statuses"].values()) > 0, c.name
            assert set(r["statuses"]) == {c.intended}, (c.name, r["statuses"])
        stats = cluster.upstream_stats()
        over = {m: n for m, n in stats["refused_too_long"].items() if m != load.MISCOUNT_MODEL}
        assert over == {}, over  # nothing over its window reached the provider
        refused = stats["refused_too_long"].get(load.MISCOUNT_MODEL, 0)
        assert refused == sum(results["miscount"]["statuses"].values())
        misses = 0.0
        for _ in range(50):  # failure callbacks run after the response
            misses = cluster.metric("context_guard_counting_misses_total") - misses_before
            if misses >= refused:
                break
            asyncio.run(asyncio.sleep(0.2))
        assert misses == refused
        assert stats["summary_calls"] > 0
        assert cluster.proxy.poll() is None  # and the proxy is still serving
    finally:
        cluster.close()
