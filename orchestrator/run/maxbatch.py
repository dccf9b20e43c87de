"""Maximal batch search: the same procedure for every engine, each probe in a fresh process.

Grow the batch from ``start`` by doubling until a probe runs out of device memory (or the
``limit`` or the dataset size is reached), then bisect between the largest batch that fitted and
the smallest that did not, down to ``granularity``. Where the probes report their peak memory and
their allocator's limit, a growth step goes only to just above the batch their peaks predict the
limit is reached at (``orchestrator.run.memory_model``), when that is below the doubled batch, and the
bisection's first probe is that prediction rounded down, when it lies inside the bracket. A probe is a real run of the engine
entrypoint through the scenario's runtime, so a failed allocation can never poison the next
probe. A probe runs the scenario's own warmup steps, then ``probe_steps`` timed ones (over as many
epochs as the batch needs), so it reaches every allocation the runs reach before their first timed
step: a compile, an autotune or a CUDA graph captured after the engine's own warmup (PyTorch captures
its step after 3 side-stream steps; on the H200, session 11 of issue 26, a 1-step probe fitted at a
batch whose runs then failed in the capture). The runs then use ``fraction`` x the maximal batch
(the TResNet paper measures at 90% of it). Every probe's spec, result and log and the search record
(``maxbatch/<engine>-<precision>-<path>-d<devices>/search.json``) are kept in the artifact.

A search survives being cut: after every probe the probes so far are written to ``probes.json`` beside
them. ``bench scenario resume`` moves an unfinished search's folder aside (``attempts/maxbatch-<key>/<N>/``)
and, where the manifest sealed its ``probes.json``, hands the probes that fitted or ran out of memory to
the new search, which takes their outcomes instead of probing those batches again (a probe that failed
otherwise, stalled or was cut is probed again). A reused probe says where its evidence lives (``from``).
A JAX probe of TResNet-M training compiles for minutes at a large batch (205 s at 2,048 on an H200), so a
search can outlast one sitting.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from bench_engine.contract import RunSpec
from orchestrator import signals
from orchestrator.artifacts import Artifact
from orchestrator.data import PreparedSplit
from orchestrator.engines.registry import get_engine
from orchestrator.jsonio import read_json, write_json
from orchestrator.run.attempt import run_attempt
from orchestrator.run.memory_model import MemoryPoint, bisection_guess, next_growth, predicted_max
from orchestrator.run.runtime_choice import ChosenRuntime
from orchestrator.scenario import RunPlan, Scenario
from orchestrator.scenario.matrix import build_spec
from orchestrator.scenario.workload import MaxSearch
from orchestrator.schemas import SchemaError

SEARCH_FILE = "search.json"
PROBES_FILE = "probes.json"  # the probes made so far, rewritten after each: what a resumed search reuses
MAXBATCH_DIR = "maxbatch"
REUSABLE = ("fits", "oom")  # outcomes a resumed search takes over; an error is probed again



class ProbeOutcome(NamedTuple):
    """One probe of the search: the batch tried, how it went ('fits', 'oom', 'error: ...'), for a probe made in
    an earlier sitting of the search the artifact folder that holds its evidence, and the device memory the probe's
    result reports (its peak, and its allocator's limit: what the outcome is relative to)."""

    batch: int
    outcome: str
    source: str | None = None
    peak_memory_bytes: int | None = None
    memory_limit_bytes: int | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], source: str | None = None) -> ProbeOutcome:
        return cls(doc["batch"], doc["outcome"], doc.get("from") or source, doc.get("peak_memory_bytes"), doc.get("memory_limit_bytes"))

    def to_json(self) -> dict[str, int | str]:
        doc: dict[str, int | str] = {"batch": self.batch, "outcome": self.outcome}
        if self.source is not None:
            doc["from"] = self.source
        for key in ("peak_memory_bytes", "memory_limit_bytes"):
            if getattr(self, key) is not None:
                doc[key] = getattr(self, key)
        return doc


def memory_limit(probes: Sequence[ProbeOutcome]) -> int | None:
    """The allocator limit a search's probes ran under (the smallest any reported; None where none did)."""
    limits = [p.memory_limit_bytes for p in probes if p.memory_limit_bytes is not None]
    return min(limits) if limits else None


# batch -> its probe ("fits" | "oom" | "error: ...", and the memory it reported)
Probe = Callable[[int], ProbeOutcome]

# search folder name (maxbatch/<name>) -> batch -> the probe an earlier sitting made
RecordedProbes = Mapping[str, Mapping[int, ProbeOutcome]]


def search_folder_name(engine: str, precision: str, path: str, devices: int) -> str:
    """The folder of one search under ``maxbatch/``."""
    return f"{engine}-{precision}-{path}-d{devices}"


def read_recorded_probes(name: str, folder: Path, moved_to: str, config: MaxSearch) -> dict[int, ProbeOutcome]:
    """The reusable probes of the unfinished search ``maxbatch/<name>``'s ``probes.json`` (its folder moved to
    ``folder``, ``moved_to`` relative to the artifact): batch -> outcome, each pointing at its evidence. None from a
    file that is unreadable, does not match its schema, or belongs to another search (name, start, limit or
    granularity differ)."""
    try:
        doc = read_json(folder / PROBES_FILE, "maxbatch-probes")
    except (OSError, ValueError, SchemaError):
        return {}
    same = (search_folder_name(doc["engine"], doc["precision"], doc["path"], doc["devices"]) == name
            and (doc["start"], doc["limit"], doc["granularity"]) == (config.start, config.limit, config.granularity))
    if not same:
        return {}
    return {p["batch"]: ProbeOutcome.from_json(p, f"{moved_to}/b{p['batch']}") for p in doc["probes"] if p["outcome"] in REUSABLE}


def search(probe: Probe, start: int, limit: int, granularity: int,
           note: Callable[[str], None] | None = None) -> tuple[int, list[ProbeOutcome], str | None]:
    """(maximal batch that fits, probes made, error) — grow by doubling (or, where the fitting probes' peak memory
    predicts the maximum below the doubled batch, to just above it: orchestrator.run.memory_model), then bisect
    (first at the predicted maximum where it lies inside the bracket); ``note`` hears why a guided step was taken."""
    probes: list[ProbeOutcome] = []

    def attempt(batch: int) -> str:
        made = probe(batch)
        probes.append(made)
        return made.outcome

    fits, fails = 0, None
    batch = max(1, min(start, limit))
    while True:
        outcome = attempt(batch)
        if outcome.startswith("error"):
            return fits, probes, outcome
        if outcome == "oom":
            fails = batch
            break
        fits = batch
        if batch >= limit:
            return fits, probes, None
        batch = _grow(probes, batch, limit, granularity, note)
    guided = True  # the first bisection probe may be the predicted maximum; after it, midpoints only
    while fails - fits > granularity:
        middle = _guided_middle(probes, fits, fails, granularity, note) if guided else None
        guided = False
        if middle is None:
            middle = _midpoint(fits, fails, granularity)
        if middle in (fits, fails):
            break
        outcome = attempt(middle)
        if outcome.startswith("error"):
            return fits, probes, outcome
        if outcome == "oom":
            fails = middle
        else:
            fits = middle
    if fits == 0:
        return 0, probes, f"error: even batch {probes[-1].batch} does not fit"
    return fits, probes, None


def _midpoint(fits: int, fails: int, granularity: int) -> int:
    """The bisection's plain probe: the bracket's middle, rounded down to ``granularity`` (above ``fits``)."""
    middle = (fits + fails) // 2
    return max(fits + 1, middle - middle % granularity) if middle > granularity else middle


class _Prediction(NamedTuple):
    """Where the fitting probes' peaks reach their allocator's limit (orchestrator.run.memory_model.predicted_max)."""

    points: list[MemoryPoint]
    allowed: int | None
    batch: float | None

    @classmethod
    def of(cls, probes: Sequence[ProbeOutcome]) -> _Prediction:
        points = [MemoryPoint(p.batch, p.peak_memory_bytes) for p in probes if p.outcome == "fits" and p.peak_memory_bytes is not None]
        allowed = memory_limit(probes)
        return cls(points, allowed, predicted_max(points, allowed))

    def reason(self) -> str:
        """Why a guided probe was chosen, for the run's notes (only where ``batch`` and ``allowed`` are known)."""
        return (f"the peaks of the batches that fitted ({', '.join(str(p.batch) for p in self.points)}) reach the "
                f"{(self.allowed or 0) / 2**30:.1f} GiB limit near {self.batch or 0:,.0f}")


def _grow(probes: Sequence[ProbeOutcome], batch: int, limit: int, granularity: int, note: Callable[[str], None] | None) -> int:
    """The next batch of the growth phase after ``batch`` fitted (orchestrator.run.memory_model.next_growth)."""
    prediction = _Prediction.of(probes)
    grown = next_growth(batch, limit, granularity, prediction.batch)
    if note is not None and prediction.batch is not None and prediction.allowed is not None and grown < min(batch * 2, limit):
        note(f"probing {grown}, not {min(batch * 2, limit)}: {prediction.reason()}")
    return grown


def _guided_middle(probes: Sequence[ProbeOutcome], fits: int, fails: int, granularity: int,
                   note: Callable[[str], None] | None) -> int | None:
    """The bracket's first probe where the fitting probes' peaks predict the maximum inside it: the predicted
    maximum rounded down to ``granularity`` (orchestrator.run.memory_model.bisection_guess); None for a midpoint."""
    prediction = _Prediction.of(probes)
    guess = bisection_guess(fits, fails, granularity, prediction.batch)
    if guess is not None and note is not None and prediction.allowed is not None:
        note(f"probing {guess}, not the midpoint {_midpoint(fits, fails, granularity)}: {prediction.reason()}")
    return guess


def chosen_batch(max_batch: int, fraction: float, granularity: int) -> int:
    """``fraction`` of the maximal batch, rounded down to ``granularity`` (at least 1)."""
    batch = int(max_batch * fraction)
    if batch >= granularity:
        batch -= batch % granularity
    return max(1, batch)


def probe_length(warmup_steps: int, probe_steps: int, steps_per_epoch: int) -> tuple[int | None, int | None]:
    """(epochs, steps) of a probe: at least ``warmup_steps + probe_steps`` steps, as one epoch of that
    many steps when one epoch holds them, otherwise as whole epochs (``steps_per_epoch`` >= 1)."""
    wanted = warmup_steps + probe_steps
    if wanted <= steps_per_epoch:
        return None, wanted
    return -(-wanted // steps_per_epoch), None


def probe_scenario(scenario: Scenario, probe_steps: int, full_batches: int) -> Scenario:
    """The scenario of a probe: the scenario's warmup steps, then ``probe_steps`` steps timed one by one."""
    epochs, steps = probe_length(scenario.workload.warmup_steps, probe_steps, full_batches)
    workload = dataclasses.replace(scenario.workload, epochs=epochs, steps=steps)
    return dataclasses.replace(scenario, workload=workload, measurement=dataclasses.replace(scenario.measurement, window_steps=1))


def resolve_max_batch(artifact: Artifact, scenario: Scenario, plans: list[RunPlan], split: PreparedSplit,
                      runtimes: dict[str, ChosenRuntime], device: str, reporter: Any,
                      recorded: RecordedProbes | None = None) -> list[RunPlan]:
    """Replace each plan's batch by ``fraction`` x its engine/precision/path/devices maximal batch; ``recorded``:
    the probes earlier sittings of unfinished searches made (resume), taken over instead of probed again."""
    config = scenario.workload.batch.max_search
    if config is None:
        return plans
    resolved: dict[tuple, int | None] = {}
    out = []
    for plan in plans:
        key = (plan.engine, plan.precision, plan.path, plan.devices)
        if plan.skip_reason:
            out.append(plan)
            continue
        if key not in resolved:
            name = search_folder_name(*key)
            resolved[key] = _search_one(artifact, scenario, plan, split, runtimes, device, reporter, config,
                                        (recorded or {}).get(name, {}))
        batch = resolved[key]
        if batch is None:
            out.append(dataclasses.replace(plan, skip_reason="maximal batch search failed (see maxbatch/)"))
        else:
            out.append(dataclasses.replace(plan, batch=batch))
    return out


def _search_one(artifact: Artifact, scenario: Scenario, plan: RunPlan, split: PreparedSplit,
                runtimes: dict[str, ChosenRuntime], device: str, reporter: Any, config: MaxSearch,
                earlier: Mapping[int, ProbeOutcome]) -> int | None:
    start, limit, granularity, fraction = config.start, config.limit, config.granularity, config.fraction
    runtime, settings = runtimes[plan.engine].runtime, runtimes[plan.engine].settings
    engine = get_engine(plan.engine)
    folder = artifact.root / MAXBATCH_DIR / search_folder_name(plan.engine, plan.precision, plan.path, plan.devices)
    folder.mkdir(parents=True, exist_ok=True)
    capacity = split.samples // plan.devices
    cap = min(limit, capacity)
    header = {"schema_version": 1, "engine": plan.engine, "precision": plan.precision, "path": plan.path, "devices": plan.devices,
              "start": start, "limit": limit, "granularity": granularity}
    made: list[ProbeOutcome] = []

    def remember(outcome: ProbeOutcome) -> ProbeOutcome:
        made.append(outcome)
        write_json(folder / PROBES_FILE, {**header, "probes": [p.to_json() for p in made]}, "maxbatch-probes")
        return outcome

    def probe(batch: int) -> ProbeOutcome:
        if signals.received() is not None:  # interrupted during an earlier probe: no more probes
            raise KeyboardInterrupt
        if batch in earlier:
            reporter.note(f"max batch {plan.engine} {plan.precision}: batch {batch} {earlier[batch].outcome} "
                          f"(probed in an earlier sitting: {earlier[batch].source})")
            return remember(earlier[batch])
        # whole batches of an epoch (a kept partial batch runs another, uncaptured step); batch <= capacity: one at least
        full_batches = max(1, split.samples // (batch * plan.devices))
        probe_plan = dataclasses.replace(plan, batch=batch, repeat=1)
        run_dir = folder / f"b{batch}"
        run_dir.mkdir(parents=True, exist_ok=True)
        reporter.note(f"max batch {plan.engine} {plan.precision}: probing batch {batch}")

        def probe_spec(dataset_path: str) -> RunSpec:
            spec = build_spec(probe_scenario(scenario, config.probe_steps, full_batches), probe_plan, split, dataset_path, device)
            return dataclasses.replace(spec, run_id=f"probe-{plan.engine}-{plan.precision}-b{batch}")

        verdict = run_attempt(run_dir, split, runtime, engine, settings, probe_spec, reporter.engine_line).judgement
        if verdict.status == "interrupted" or signals.received() is not None:
            raise KeyboardInterrupt  # no search.json: resume searches again instead of taking the cut for a failure
        measured = verdict.result.measurements if verdict.result is not None else None
        memory = (measured.peak_memory_bytes, measured.memory_limit_bytes) if measured is not None else (None, None)
        if verdict.status == "ok":
            return remember(ProbeOutcome(batch, "fits", None, *memory))
        if verdict.result is not None and (verdict.result.failure or {}).get("kind") == "oom":
            return remember(ProbeOutcome(batch, "oom", None, *memory))
        return remember(ProbeOutcome(batch, f"error: {verdict.status}: {verdict.reason}", None, *memory))

    def note(text: str) -> None:
        reporter.note(f"max batch {plan.engine} {plan.precision}: {text}")

    max_batch, _, error = search(probe, start, cap, granularity, note)  # its probes are ``made``, with their sources
    batch = None if error else chosen_batch(max_batch, fraction, granularity)
    record = {
        **header, "fraction": fraction,
        "capped_by": "dataset" if capacity < limit and max_batch == capacity else ("limit" if max_batch == limit else None),
        "probes": [p.to_json() for p in made], "max_batch": max_batch if not error else None, "chosen_batch": batch, "error": error,
        "memory_limit_bytes": memory_limit(made),
    }
    write_json(folder / SEARCH_FILE, record, "maxbatch")
    reporter.note(f"max batch {plan.engine} {plan.precision}: {max_batch if not error else error}; runs use {batch}")
    return batch
