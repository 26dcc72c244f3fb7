"""A real Debian `redis-server` on a free loopback port, for the e2e tests and bench/load.py."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.e2e.conftest import free_port


class Redis:
    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 10
        while time.time() < deadline:
            if subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True, text=True).stdout.strip() == "PONG":
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
        out = subprocess.run(["redis-cli", "-p", str(self.port), "--scan", "--pattern", "context-guard:*"], capture_output=True, text=True)
        return out.stdout.split()
