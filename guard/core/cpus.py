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
    read: cgroup v2's `cpu.max` ("<quota> <period>", or "max <period>"), else v1's
    `cpu.cfs_quota_us` over `cpu.cfs_period_us` (-1: none). The process's own cgroup (from
    `/proc/self/cgroup`) is read first, then the mount's root: a container sees its own cgroup
    there. A quota set only on a parent cgroup is not looked for."""
    for quota_file, period_file in _candidates(CGROUP if root is None else root, OWN if own is None else own):
        try:
            if period_file is None:
                quota, period = quota_file.read_text().split()[:2]
            else:
                quota, period = quota_file.read_text().strip(), period_file.read_text().strip()
        except (OSError, ValueError):
            continue
        if quota in ("max", "-1"):
            return None
        try:
            q, p = int(quota), int(period)
        except ValueError:
            continue
        return q / p if q > 0 and p > 0 else None
    return None


def _candidates(root: Path, own: Path) -> list[tuple[Path, Path | None]]:
    """The files `cpu_quota` reads, in order: (quota file, period file; None where one file holds both)."""
    groups: dict[str, str] = {}
    try:
        for line in own.read_text().splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3:
                groups[parts[1]] = parts[2].strip().lstrip("/")
    except OSError:
        pass
    out: list[tuple[Path, Path | None]] = []
    if "" in groups:  # cgroup v2, the unified hierarchy
        out.append((root / groups[""] / "cpu.max", None))
    out.append((root / "cpu.max", None))
    v1 = next((path for names, path in groups.items() if "cpu" in names.split(",")), "")
    for mount in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        for where in (root / mount / v1, root / mount):
            out.append((where / "cpu.cfs_quota_us", where / "cpu.cfs_period_us"))
    return list(dict.fromkeys(out))  # (each file once: the own group may be the root)
