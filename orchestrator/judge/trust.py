"""Trust warnings, after hyperfine's: the registry of warning kinds, and the checks that raise them.

Each kind (:class:`Kind`, in :data:`KINDS`, like pyperf's metadata registry) has an id, the scope it
is checked on (one run, or the repeats of a group), the condition in words and a message template;
its check reads typed facts (:class:`RunFacts`, :class:`GroupFacts`) and returns the template's
fields when it fires. The summary (orchestrator.judge.summary) lists a run's warnings on its row and, for a
group, its own warnings and those of its valid repeats; the terminal shows them in the groups table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any, Generic, Literal, Protocol, TypeVar

from bench_engine.contract import EngineResult
from orchestrator.judge.record import RunRecord
from orchestrator.judge.stats import relative_spread

OUTLIER_RATIO = 2.0  # a window whose step time is this many times the median's (or 1/this of it) is an outlier
MIN_OUTLIER_WINDOWS = 3  # fewer timing windows have no median to speak of
LOAD_PER_CPU = 1.0  # a 1-minute load average above this many runnable tasks per CPU: the CPUs were shared
MIN_TIMED_STEPS = 50  # a steady state of fewer timed steps...
MIN_STEADY_S = 1.0  # ...or shorter than this is dominated by launch, synchronisation and clock ramp-up
MIN_REPEATS = 3  # suggested by the single-repeat warning
HIGH_SPREAD = 0.05  # relative IQR (range, below 4 repeats) above which a group's throughput is spread out


@dataclass(frozen=True)
class RunFacts:
    """What the run checks read of one run: its timing windows, steady state and the host's load."""

    run_id: str
    repeat: int
    step_times: tuple[float, ...] = ()  # seconds per step of each timing window
    timed_steps: int | None = None
    steady_s: float | None = None
    load_start: float | None = None  # 1-minute load averages
    load_end: float | None = None
    cpus: int | None = None  # the host's CPUs, the load average's scale

    @classmethod
    def of(cls, record: RunRecord, result: EngineResult | None, host_cpus: int | None = None) -> RunFacts:
        """The facts of a run record and its engine result (``host_cpus``: the artifact host's, where the record has none)."""
        measurements = result.measurements if result is not None else None
        steady = measurements.steady if measurements is not None else {}
        host = record.host or {}
        windows = measurements.windows if measurements is not None else ()
        return cls(
            run_id=record.run_id, repeat=record.repeat,
            step_times=tuple(w.seconds / w.steps for w in windows if w.steps > 0),
            timed_steps=steady.get("steps"), steady_s=steady.get("time_s"),
            load_start=_first(host.get("load_avg")), load_end=_first(host.get("load_avg_end")),
            cpus=host.get("cpu_count") or host_cpus,
        )


@dataclass(frozen=True)
class GroupFacts:
    """What the group checks read: the valid repeats' throughputs, and the kinds of node they ran on (where the
    runtime knows it: a Slurm node's GRES, features and partitions)."""

    throughputs: tuple[float, ...]
    node_types: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrustWarning:
    """One warning that fired: the kind's id and its message."""

    id: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "message": self.message}


F = TypeVar("F", RunFacts, GroupFacts)
Fields = Mapping[str, object]


@dataclass(frozen=True)
class Kind(Generic[F]):
    """A kind of warning: id, scope, the condition in words, the message template and its check."""

    id: str
    scope: Literal["run", "group"]
    when: str
    message: str
    check: Callable[[F], Fields | None]

    def fire(self, facts: F) -> TrustWarning | None:
        fields = self.check(facts)
        return None if fields is None else TrustWarning(self.id, self.message.format(**fields))


def _first(values: Sequence[float] | None) -> float | None:
    return float(values[0]) if values else None


def _outliers(facts: RunFacts) -> Fields | None:
    times = facts.step_times
    if len(times) < MIN_OUTLIER_WINDOWS:
        return None
    mid = median(times)
    if mid <= 0:
        return None
    ratios = [t / mid for t in times]
    off = [r for r in ratios if r >= OUTLIER_RATIO or r <= 1 / OUTLIER_RATIO]
    if not off:
        return None
    slowest, fastest = max(ratios), min(ratios)
    worst, direction = (slowest, "slower") if slowest >= 1 / fastest else (1 / fastest, "faster")
    return {"count": len(off), "windows": len(times), "worst": worst, "direction": direction}


def _host_load(facts: RunFacts) -> Fields | None:
    if not facts.cpus:
        return None
    limit = facts.cpus * LOAD_PER_CPU
    busy = [(when, load) for when, load in (("start", facts.load_start), ("end", facts.load_end)) if load is not None and load > limit]
    if not busy:
        return None
    return {"load": max(load for _, load in busy), "when": " and ".join(when for when, _ in busy), "cpus": facts.cpus}


def _short_steady_state(facts: RunFacts) -> Fields | None:
    steps, seconds = facts.timed_steps, facts.steady_s
    if steps is None or seconds is None or (steps >= MIN_TIMED_STEPS and seconds >= MIN_STEADY_S):
        return None
    return {"steps": steps, "seconds": seconds}


def _single_repeat(facts: GroupFacts) -> Fields | None:
    return {} if len(facts.throughputs) == 1 else None


def _high_spread(facts: GroupFacts) -> Fields | None:
    spread = relative_spread(list(facts.throughputs))
    if spread is None or spread <= HIGH_SPREAD:
        return None
    return {"spread": spread, "n": len(facts.throughputs)}


def _mixed_nodes(facts: GroupFacts) -> Fields | None:
    kinds = sorted(set(facts.node_types))
    return {"kinds": " | ".join(kinds), "n": len(kinds)} if len(kinds) > 1 else None


RUN_KINDS: tuple[Kind[RunFacts], ...] = (
    Kind("outliers", "run",
         f"a timing window's time per step is {OUTLIER_RATIO:g}x the run's median or more (or 1/{OUTLIER_RATIO:g} of it or less); "
         f"{MIN_OUTLIER_WINDOWS}+ windows",
         f"step-time outliers: {{count}} of {{windows}} windows {OUTLIER_RATIO:g}x+ off the median (worst {{worst:.1f}}x {{direction}})",
         _outliers),
    Kind("host_load", "run",
         f"the 1-minute load average at the start or the end of the run is above {LOAD_PER_CPU:g} per CPU of the host",
         "host busy: load {load:.2f} on {cpus} CPUs at the {when}", _host_load),
    Kind("short_steady_state", "run",
         f"fewer than {MIN_TIMED_STEPS} timed steps, or a steady state shorter than {MIN_STEADY_S:g} s",
         f"short steady state: {{steps}} timed steps in {{seconds:.2f}} s (wants {MIN_TIMED_STEPS}+ and {MIN_STEADY_S:g}+ s)",
         _short_steady_state),
)
GROUP_KINDS: tuple[Kind[GroupFacts], ...] = (
    Kind("single_repeat", "group", "a group has a single valid repeat",
         f"1 repeat: no spread; use --repeats {MIN_REPEATS}+", _single_repeat),
    Kind("high_spread", "group",
         f"the valid repeats' throughput spreads over more than {HIGH_SPREAD:.0%} of the median (IQR with 4+ repeats, else the range)",
         "high spread: {spread:.1%} of the median across {n} repeats", _high_spread),
    Kind("mixed_nodes", "group",
         "the valid repeats ran on nodes of different kinds (a Slurm node's GRES, features or partitions differ)",
         "mixed node types: the repeats ran on {n} kinds of node ({kinds})", _mixed_nodes),
)
KINDS: dict[str, Kind[Any]] = {kind.id: kind for kind in (*RUN_KINDS, *GROUP_KINDS)}


def run_warnings(facts: RunFacts) -> list[TrustWarning]:
    """The run-scope warnings that fire for one run, in registry order."""
    return [w for w in (kind.fire(facts) for kind in RUN_KINDS) if w is not None]


def group_warnings(facts: GroupFacts, repeats: Sequence[tuple[int, Sequence[TrustWarning]]] = ()) -> list[TrustWarning]:
    """A group's warnings: its own, then each run kind that fired for some of its valid ``repeats``
    ((repeat number, that run's warnings)), with the figures of the first such repeat."""
    out = [w for w in (kind.fire(facts) for kind in GROUP_KINDS) if w is not None]
    for kind in RUN_KINDS:
        fired = [(repeat, w) for repeat, warnings in repeats for w in warnings if w.id == kind.id]
        if not fired:
            continue
        first = fired[0][1]
        if len(repeats) == 1:
            out.append(first)
        elif len(fired) == 1:
            out.append(TrustWarning(kind.id, f"{first.message} (repeat {fired[0][0]})"))
        else:
            which = ", ".join(str(repeat) for repeat, _ in fired)
            out.append(TrustWarning(kind.id, f"{first.message} (repeats {which}; figures of {fired[0][0]})"))
    return out


LISTED_GROUPS = 3  # a warning shared by more groups names how many instead


class Warned(Protocol):
    """A summary's group as warning_lines reads it."""

    @property
    def label(self) -> str: ...
    @property
    def warnings(self) -> Sequence[str]: ...


def warning_lines(groups: Sequence[Warned]) -> list[str]:
    """A summary's group warnings as terminal lines: one per distinct message, with the groups it concerns."""
    by_message: dict[str, list[str]] = {}
    for group in groups:
        for message in group.warnings:
            by_message.setdefault(message, []).append(group.label)
    return [f"{', '.join(labels) if len(labels) <= LISTED_GROUPS else f'{len(labels)} groups'}: {message}"
            for message, labels in by_message.items()]


def markdown_table() -> str:
    """The README's table of the warning kinds (``python3 -m orchestrator.judge.trust`` prints it)."""
    rows = ["| id | checked on | fires when | message |", "|---|---|---|---|"]
    for kind in KINDS.values():
        template = re.sub(r"\{(\w+)[^}]*\}", r"<\1>", kind.message)
        rows.append(f"| `{kind.id}` | {'each run' if kind.scope == 'run' else 'each group'} | {kind.when} | `{template}` |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
