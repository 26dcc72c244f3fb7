"""A real Debian `redis-server` on a free loopback port, for the e2e tests and bench/load.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import free_port, start_proxy, stop_proxy
from tests.e2e.upstream import Upstream, serve


def require_redis_server() -> None:
    """Skip the calling test module where Debian's redis-server is missing; with
    GUARD_REQUIRE_REDIS=1 (CI) fail instead."""
    if shutil.which("redis-server") is None:
        if os.environ.get("GUARD_REQUIRE_REDIS") == "1":
            raise RuntimeError("GUARD_REQUIRE_REDIS=1 but redis-server is not installed")
        pytest.skip("needs Debian's redis-server", allow_module_level=True)


class Redis:
    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 10
        while time.time() < deadline:
            if (
                subprocess.run(
                    ["redis-cli", "-p", str(self.port), "ping"], capture_output=True, text=True
                ).stdout.strip()
                == "PONG"
            ):
                return
            time.sleep(0.1)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        """Kill it (SIGKILL: a crash, not a clean shutdown)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def keys(self) -> list[str]:
        out = subprocess.run(
            ["redis-cli", "-p", str(self.port), "--scan", "--pattern", "context-guard:*"],
            capture_output=True,
            text=True,
        )
        return out.stdout.split()


@contextmanager
def proxy_with_redis(
    workdir: Path,
    config: Callable[[int, int], str],
    windows: dict[str, int],
    scales: dict[str, float] | None = None,
) -> Iterator[tuple[str, Upstream, Redis]]:
    """A strict upstream, a real redis-server and a two-worker proxy whose config is
    `config(upstream_port, redis_port)`: (proxy URL, upstream, redis), all stopped afterwards."""
    server, upstream = serve(free_port(), windows, scales=scales)
    redis = Redis(workdir)
    redis.start()
    proc: Any = None
    try:
        proc, url, _ = start_proxy(config(server.server_address[1], redis.port), workdir, args=["--num_workers", "2"])
        yield url, upstream, redis
    finally:
        if proc is not None:
            stop_proxy(proc)
        redis.stop()
        server.shutdown()
