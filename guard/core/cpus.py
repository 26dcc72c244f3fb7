"""How many CPUs this process may use: its CPU set (`taskset`, a container's cpuset) and its
cgroup's CPU quota (a container's CPU limit: Kubernetes `limits.cpu`, `docker run --cpus`), which
the CPU set does not show. A worker limited to one CPU either way gains nothing from a second
counting thread (`guard.core.tokens.set_counting_threads`)."""

from __future__ import annotations

import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
OWN = Path("/proc/self/cgroup")


def usable(root: Path | None = None, own: Path | None = None) -> float:
    """The CPUs this process may use: its CPU set's size, at most its cgroup's CPU quota (read under
    `root`, by default `CGROUP`, for the cgroup `own` names, by default `OWN`)."""
    try:
        cpus = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # (no affinity on this platform)
        cpus = float(os.cpu_count() or 1)
    quota = cpu_quota(root, own)
    return cpus if quota is None else min(cpus, quota)


def cpu_quota(root: Path | None = None, own: Path | None = None) -> float | None:
    """The CPUs this process's cgroup may use by its CPU quota, None where none is set or none can be
    read: the smallest quota of the process's own cgroup (from `/proc/self/cgroup`) and of every
    cgroup above it up to the mount's root (a limit on a parent, a Kubernetes pod's, bounds every
    group under it; a container sees its own cgroup at the root). Each is cgroup v2's `cpu.max`
    ("<quota> <period>", or "max <period>": none), or v1's `cpu.cfs_quota_us` over
    `cpu.cfs_period_us` (-1: none)."""
    quotas = (_quota(files) for files in _candidates(CGROUP if root is None else root, OWN if own is None else own))
    return min((q for q in quotas if q is not None), default=None)


def _quota(files: tuple[Path, Path | None]) -> float | None:
    """One cgroup's quota in CPUs (`cpu_quota`), None where it sets none or its files cannot be read."""
    quota_file, period_file = files
    try:
        if period_file is None:
            quota, period = quota_file.read_text().split()[:2]
        else:
            quota, period = quota_file.read_text().strip(), period_file.read_text().strip()
        q, p = int(quota), int(period)
    except (OSError, ValueError):  # (unreadable, or "max": none)
        return None
    return q / p if q > 0 and p > 0 else None  # (v1's -1: none)


def _candidates(root: Path, own: Path) -> list[tuple[Path, Path | None]]:
    """The files `cpu_quota` reads: (quota file, period file; None where one file holds both) of the
    process's own cgroup and each one above it, v2 then v1."""
    groups: dict[str, str] = {}
    try:
        for line in own.read_text().splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3:
                groups[parts[1]] = parts[2].strip().strip("/")
    except OSError:
        pass
    out: list[tuple[Path, Path | None]] = []
    for where in _upwards(root, groups.get("", "")):  # cgroup v2, the unified hierarchy
        out.append((where / "cpu.max", None))
    v1 = next((path for names, path in groups.items() if "cpu" in names.split(",")), "")
    for mount in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        for where in _upwards(root / mount, v1):
            out.append((where / "cpu.cfs_quota_us", where / "cpu.cfs_period_us"))
    return list(dict.fromkeys(out))  # (each file once)


def _upwards(top: Path, path: str) -> list[Path]:
    """`top / path` and each folder above it up to `top`. A path that climbs out (`..`) is not
    followed: `top` alone."""
    parts = [part for part in path.split("/") if part]
    if ".." in parts:
        return [top]
    return [top.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]
