"""The host state a run starts in, read the way pyperf's ``_collect_metadata`` does: CPU model, the CPU
features that decide its speed (orchestrator.host.cpuflags), scaling governors and driver, boost/turbo, load
average and the CPU affinity of bench (which its engines inherit); the load average again when it ends.

Every fact is ``None`` where it cannot be read (a container without /sys, a non-Linux host); nothing
here raises. ``root`` is the folder /proc and /sys are read under (tests point it at a fake tree).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from bench_engine.hardware import cpu_model_of
from orchestrator.host.cpuflags import speed_flags

CPU_SYS = "sys/devices/system/cpu"


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except (OSError, ValueError):
        return None


def cpu_list(cpus: Iterable[int]) -> str:
    """Linux cpulist notation: {0, 1, 2, 5} -> '0-2,5'."""
    ranges: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges)


def cpu_model(root: Path) -> str | None:
    """The first model line of /proc/cpuinfo (whitespace collapsed)."""
    text = _read(root / "proc/cpuinfo")
    if not text:
        return None
    return cpu_model_of(text)


def cpu_flags(root: Path) -> list[str] | None:
    """The speed-deciding CPU features /proc/cpuinfo lists (orchestrator.host.cpuflags; None without a flags line)."""
    text = _read(root / "proc/cpuinfo")
    return speed_flags(text) if text else None


def cpu_count(root: Path) -> int | None:
    """The CPUs of the host (the load average's scale): the processors /proc/cpuinfo lists (os.cpu_count for the real root)."""
    text = _read(root / "proc/cpuinfo") or ""
    listed = sum(1 for line in text.splitlines() if line.partition(":")[0].strip() == "processor")
    if listed:
        return listed
    return os.cpu_count() if root == Path("/") else None


def _own_affinity() -> set[int] | None:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _present_cpus(root: Path) -> list[int]:
    try:
        names = [p.name for p in (root / CPU_SYS).iterdir()]
    except OSError:
        return []
    return sorted(int(n[3:]) for n in names if re.fullmatch(r"cpu\d+", n))


def governors(root: Path, cpus: Iterable[int]) -> dict[str, str] | None:
    """Scaling governor -> the cpulist using it, over ``cpus`` (None when no cpufreq is readable)."""
    by_name: dict[str, list[int]] = {}
    for cpu in cpus:
        name = _read(root / CPU_SYS / f"cpu{cpu}/cpufreq/scaling_governor")
        if name:
            by_name.setdefault(name, []).append(cpu)
    return {name: cpu_list(members) for name, members in sorted(by_name.items())} or None


def boost(root: Path) -> tuple[bool | None, str | None]:
    """(turbo/boost enabled, where it was read): intel_pstate's no_turbo, else cpufreq's boost switch."""
    no_turbo = _read(root / CPU_SYS / "intel_pstate/no_turbo")
    if no_turbo in ("0", "1"):
        return no_turbo == "0", "intel_pstate/no_turbo"
    switch = _read(root / CPU_SYS / "cpufreq/boost")
    if switch in ("0", "1"):
        return switch == "1", "cpufreq/boost"
    return None, None


def load_average(root: Path) -> list[float] | None:
    """1, 5 and 15 minute load averages from /proc/loadavg (os.getloadavg for the real root)."""
    text = _read(root / "proc/loadavg")
    try:
        if text:
            return [float(v) for v in text.split()[:3]]
        if root == Path("/"):
            return [round(v, 2) for v in os.getloadavg()]
    except (ValueError, OSError):
        pass
    return None


@dataclass(frozen=True)
class HostState:
    """The run record's ``host`` block: the CPU facts and state around one run (None: not readable here)."""

    cpu_model: str | None = None
    cpu_flags: tuple[str, ...] | None = None  # the speed-deciding features (orchestrator.host.cpuflags)
    cpu_count: int | None = None
    cpu_affinity: str | None = None  # cpulist notation: 0-2,5
    cpu_affinity_count: int | None = None
    governors: tuple[tuple[str, str], ...] | None = None  # (scaling governor, the cpulist using it)
    scaling_driver: str | None = None
    boost: bool | None = None
    boost_source: str | None = None
    load_avg: tuple[float, ...] | None = None  # 1, 5 and 15 minutes, as the run started
    load_avg_end: tuple[float, ...] | None = None  # as it ended (None: not ended yet)

    def __post_init__(self) -> None:
        if (self.cpu_affinity is None) != (self.cpu_affinity_count is None):
            raise ValueError("a CPU affinity comes with its CPU count")

    def to_json(self) -> dict[str, Any]:
        """The block as run.json has it (lists for tuples; ``load_avg_end`` only once the run has ended)."""
        doc = {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}
        doc["governors"] = dict(self.governors) if self.governors is not None else None
        if self.load_avg_end is None:
            del doc["load_avg_end"]
        return doc


def _tuple(values: list[float] | list[str] | None) -> tuple[Any, ...] | None:
    return tuple(values) if values is not None else None


def run_host(root: Path = Path("/"), affinity: Callable[[], set[int] | None] = _own_affinity) -> HostState:
    """The run record's ``host`` block, taken just before a run starts."""
    try:
        allowed = affinity()
    except Exception:  # a fake or a platform quirk: the fact is unknown, the run goes on
        allowed = None
    cpus = sorted(allowed) if allowed else _present_cpus(root)
    first = cpus[0] if cpus else 0
    enabled, source = boost(root)
    used = governors(root, cpus)
    return HostState(
        cpu_model=cpu_model(root), cpu_flags=_tuple(cpu_flags(root)), cpu_count=cpu_count(root),
        cpu_affinity=cpu_list(allowed) if allowed else None, cpu_affinity_count=len(allowed) if allowed else None,
        governors=tuple(used.items()) if used is not None else None,
        scaling_driver=_read(root / CPU_SYS / f"cpu{first}/cpufreq/scaling_driver") or None,
        boost=enabled, boost_source=source, load_avg=_tuple(load_average(root)),
    )


def finish_host(host: HostState, root: Path = Path("/")) -> HostState:
    """The run's ``host`` block with the load average as the run ended (``load_avg_end``)."""
    return replace(host, load_avg_end=_tuple(load_average(root)))


def describe_host(host: HostState) -> str:
    """One line: model, speed flags, affinity, governors, boost and load average ('?' where unknown)."""
    governor = ", ".join(f"{name} ({cpus})" for name, cpus in host.governors) if host.governors else "?"
    turbo = "?" if host.boost is None else "on" if host.boost else "off"
    load = host.load_avg
    affinity = f"{host.cpu_affinity} ({host.cpu_affinity_count} CPUs)" if host.cpu_affinity else "?"
    flags = host.cpu_flags
    features = "?" if flags is None else " ".join(flags) or "none"
    return (f"{host.cpu_model or '?'}; flags {features}; affinity {affinity}; governor {governor}; boost {turbo}; "
            f"load {'/'.join(f'{v:.2f}' for v in load) if load else '?'}")
