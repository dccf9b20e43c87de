"""How much work a run matrix is, and the warning before a full-size one runs on a CPU.

A scenario sized for a GPU (ResNet-50, 2 epochs of CIFAR-10: 780 steps of 128 images a run) takes
hours on a CPU. Before such a run starts, bench says how many steps it is and that ``--smoke``
checks the scenario in minutes; during it the progress line's ETA says how long.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.host.gpus import NvmlSnapshot
from orchestrator.scenario import RunPlan, Scenario


@dataclass(frozen=True)
class MatrixLength:
    """The runs of a matrix and their steps (warmup included) and samples, where the batch size is known."""

    runs: int
    steps: tuple[int, ...]  # one per run whose batch size is known (a batch.max_search batch is not, before the search)
    samples: int

    @property
    def total_steps(self) -> int:
        return sum(self.steps)


def plan_steps(scenario: Scenario, plan: RunPlan, dataset_samples: int) -> int | None:
    """The steps of one run, warmup included (as the run spec counts them); None while its batch size is unknown."""
    if scenario.workload.steps is not None:
        return scenario.workload.steps
    global_batch = plan.batch * plan.devices
    if global_batch < 1:
        return None
    epochs, per_epoch = scenario.workload.length(dataset_samples, global_batch)
    return epochs * per_epoch


def matrix_length(scenario: Scenario, plans: list[RunPlan], dataset_samples: int) -> MatrixLength:
    """The work of the runs of ``plans`` that are not skipped."""
    running = [plan for plan in plans if not plan.skip_reason]
    counted = [(plan, plan_steps(scenario, plan, dataset_samples)) for plan in running]
    known = [(plan, steps) for plan, steps in counted if steps is not None]
    return MatrixLength(len(running), tuple(steps for _, steps in known), sum(steps * plan.batch * plan.devices for plan, steps in known))


def runs_on_cpu(device: str, runtime: str, gpus: NvmlSnapshot) -> bool:
    """Whether the engines will run on a CPU: ``--device cpu``, or auto on a host NVML finds no GPU on
    (not for slurm, whose compute nodes this host cannot see)."""
    if device == "cpu":
        return True
    return device == "auto" and runtime != "slurm" and not gpus.gpus


def cpu_run_warning(scenario: Scenario, plans: list[RunPlan], dataset_samples: int, device: str, runtime: str,
                    gpus: NvmlSnapshot) -> str | None:
    """The warning before a full-size (not --smoke) scenario runs on a CPU; None otherwise."""
    if scenario.smoke or not runs_on_cpu(device, runtime, gpus):
        return None
    length = matrix_length(scenario, plans, dataset_samples)
    if not length.runs:
        return None
    what = f"{scenario.workload.model.arch} {'training' if scenario.workload.mode == 'train' else 'inference'}"
    if length.steps:
        each = f"{length.steps[0]:,} steps each" if len(set(length.steps)) == 1 else f"{min(length.steps):,}-{max(length.steps):,} steps each"
        work = f"{length.runs} run{'s' if length.runs > 1 else ''}, {each} ({length.total_steps:,} steps, {length.samples:,} samples)"
    else:
        work = f"{length.runs} run{'s' if length.runs > 1 else ''} (steps known after the batch size search)"
    return (f"full-size run on a CPU: {work} of {what}; this may take hours (the progress line shows the ETA once a run times "
            "its steps). --smoke checks the scenario in minutes; --device cuda runs it on a GPU.")
