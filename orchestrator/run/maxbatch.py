"""Maximal batch search: the same procedure for every engine, each probe in a fresh process.

Grow the batch from ``start`` by doubling until a probe runs out of device memory (or the
``limit`` or the dataset size is reached), then bisect between the largest batch that fitted and
the smallest that did not, down to ``granularity``. A probe is a real run of the engine
entrypoint through the scenario's runtime, so a failed allocation can never poison the next
probe. A probe runs the scenario's own warmup steps, then ``probe_steps`` timed ones (over as many
epochs as the batch needs), so it reaches every allocation the runs reach before their first timed
step: a compile, an autotune or a CUDA graph captured after the engine's own warmup (PyTorch captures
its step after 3 side-stream steps; on the H200, session 11 of issue 26, a 1-step probe fitted at a
batch whose runs then failed in the capture). The runs then use ``fraction`` x the maximal batch
(the TResNet paper measures at 90% of it). Every probe's spec, result and log and the search record
(``maxbatch/<engine>-<precision>-<path>-d<devices>/search.json``) are kept in the artifact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

from bench_engine.contract import RunSpec
from orchestrator import signals
from orchestrator.artifacts import Artifact
from orchestrator.data import PreparedSplit
from orchestrator.engines.registry import get_engine
from orchestrator.jsonio import write_json
from orchestrator.run.attempt import run_attempt
from orchestrator.run.runtime_choice import ChosenRuntime
from orchestrator.scenario import RunPlan, Scenario
from orchestrator.scenario.matrix import build_spec
from orchestrator.scenario.workload import MaxSearch

SEARCH_FILE = "search.json"
MAXBATCH_DIR = "maxbatch"

# batch -> "fits" | "oom" | "error: ..."
Probe = Callable[[int], str]


class ProbeOutcome(NamedTuple):
    """One probe of the search: the batch tried and how it went ('fits', 'oom', 'error: ...')."""

    batch: int
    outcome: str

    def to_json(self) -> dict[str, int | str]:
        return {"batch": self.batch, "outcome": self.outcome}


def search(probe: Probe, start: int, limit: int, granularity: int) -> tuple[int, list[ProbeOutcome], str | None]:
    """(maximal batch that fits, probes made, error) — grow by doubling, then bisect."""
    probes: list[ProbeOutcome] = []

    def attempt(batch: int) -> str:
        outcome = probe(batch)
        probes.append(ProbeOutcome(batch, outcome))
        return outcome

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
        batch = min(batch * 2, limit)
    while fails - fits > granularity:
        middle = (fits + fails) // 2
        middle = max(fits + 1, middle - middle % granularity) if middle > granularity else middle
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
                      runtimes: dict[str, ChosenRuntime], device: str, reporter: Any) -> list[RunPlan]:
    """Replace each plan's batch by ``fraction`` x its engine/precision/path/devices maximal batch."""
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
            resolved[key] = _search_one(artifact, scenario, plan, split, runtimes, device, reporter, config)
        batch = resolved[key]
        if batch is None:
            out.append(dataclasses.replace(plan, skip_reason="maximal batch search failed (see maxbatch/)"))
        else:
            out.append(dataclasses.replace(plan, batch=batch))
    return out


def _search_one(artifact: Artifact, scenario: Scenario, plan: RunPlan, split: PreparedSplit,
                runtimes: dict[str, ChosenRuntime], device: str, reporter: Any, config: MaxSearch) -> int | None:
    start, limit, granularity, fraction = config.start, config.limit, config.granularity, config.fraction
    runtime, settings = runtimes[plan.engine].runtime, runtimes[plan.engine].settings
    engine = get_engine(plan.engine)
    folder = artifact.root / MAXBATCH_DIR / f"{plan.engine}-{plan.precision}-{plan.path}-d{plan.devices}"
    capacity = split.samples // plan.devices
    cap = min(limit, capacity)

    def probe(batch: int) -> str:
        if signals.received() is not None:  # interrupted during an earlier probe: no more probes
            raise KeyboardInterrupt
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
        if verdict.status == "ok":
            return "fits"
        if verdict.result is not None and (verdict.result.failure or {}).get("kind") == "oom":
            return "oom"
        return f"error: {verdict.status}: {verdict.reason}"

    max_batch, probes, error = search(probe, start, cap, granularity)
    batch = None if error else chosen_batch(max_batch, fraction, granularity)
    record = {
        "schema_version": 1, "engine": plan.engine, "precision": plan.precision, "path": plan.path, "devices": plan.devices,
        "start": start, "limit": limit, "granularity": granularity, "fraction": fraction,
        "capped_by": "dataset" if capacity < limit and max_batch == capacity else ("limit" if max_batch == limit else None),
        "probes": [p.to_json() for p in probes], "max_batch": max_batch if not error else None, "chosen_batch": batch, "error": error,
    }
    write_json(folder / SEARCH_FILE, record, "maxbatch")
    reporter.note(f"max batch {plan.engine} {plan.precision}: {max_batch if not error else error}; runs use {batch}")
    return batch
