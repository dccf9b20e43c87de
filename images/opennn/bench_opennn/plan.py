"""The run spec, flattened for the C++ driver: ``key value`` lines plus the harness's blocks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_engine.contract import RunSpec
from bench_engine.harness import timing_blocks

# Adam's hyper-parameters when the spec leaves them out (torch.optim.Adam's defaults).
ADAM_DEFAULTS = {"betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0}


@dataclass
class Switches:
    """The engine's switches for one run: path + engine options + device."""

    cuda_graph: bool
    gpu_resident: bool
    opennn_cuda_warmup: bool = True
    reset_graphs_after_warmup: bool = True
    conv_autotune: str = "default"
    conv_workspace_cap: str = "default"
    workers: int = 0
    notes: dict[str, str] = field(default_factory=dict)


def _choice(options: Mapping[str, Any], key: str, auto: bool) -> tuple[bool, str]:
    value = options.get(key, "auto")
    if value in ("auto", None):
        return auto, "auto"
    return bool(value), "option"


def resolve_switches(spec: RunSpec, cuda: bool) -> Switches:
    """Baseline: OpenNN's defaults (no CUDA graph); optimized: OpenNN's CUDA graph on CUDA.

    Data placement is a parity field: the split is GPU-resident (StorageMode::GPUPersistantData)
    when the spec asks for ``device`` placement on CUDA, whatever the path."""
    options = spec.engine_options
    optimized = spec.path == "optimized"
    resident = cuda and spec.parity.data_placement == "device"
    graph, why = _choice(options, "cuda_graph", optimized and cuda)
    if graph and not cuda:
        graph, why = False, "no CUDA device"
    switches = Switches(cuda_graph=graph, gpu_resident=resident)
    switches.notes["cuda_graph"] = f"{why}: Optimizer::set_cuda_graph({str(graph).lower()})"
    switches.opennn_cuda_warmup = bool(options.get("opennn_cuda_warmup", True))
    switches.reset_graphs_after_warmup = bool(options.get("reset_graphs_after_warmup", True))
    autotune = options.get("conv_autotune", "default")
    switches.conv_autotune = {True: "on", False: "off"}.get(autotune, "default") if isinstance(autotune, bool) else "default"
    cap = options.get("conv_workspace_cap", "default")
    switches.conv_workspace_cap = "off" if cap == "uncapped" else str(cap)
    switches.workers = int(options.get("workers", 0))
    return switches


GRAPH_GROUP = 8  # Optimizer::graph_group_size: steps per captured graph on the device-resident path


class UnsupportedSchedule(ValueError):
    """A schedule OpenNN's CUDA-graph path cannot run faithfully."""


def check_schedule(spec: RunSpec, samples: int, switches: Switches) -> None:
    """With CUDA graphs, every block must have >= 8 steps: Optimizer::run_graph_epoch sends a
    shorter call down its per-iteration path, which replays the 8-step group graph for each step."""
    if not switches.cuda_graph:
        return
    short = [len(block.steps) for block in timing_blocks(spec.schedule, samples) if len(block.steps) < GRAPH_GROUP]
    if short:
        raise UnsupportedSchedule(f"OpenNN's CUDA-graph path needs timing blocks of at least {GRAPH_GROUP} steps; this schedule has "
                                  f"{len(short)} of {sorted(set(short))} steps: change measurement.window_steps/workload.warmup_steps "
                                  "or set engines.opennn.options.cuda_graph: false")


def plan_text(spec: RunSpec, dataset_dir: Path, samples: int, cuda: bool, switches: Switches, events: Path,
              extra: Mapping[str, Path] | None = None) -> str:
    """The plan file's text (format: images/opennn/driver/plan.h); ``extra``: more ``key path`` lines."""
    parity = spec.parity
    optimizer = {**(ADAM_DEFAULTS if parity.optimizer["name"] == "adam" else {}), **parity.optimizer}
    betas = optimizer.get("betas") or [0.9, 0.999]
    values: dict[str, str | int | Path] = {
        "events": events,
        "images": dataset_dir / "images.npy",
        "labels": dataset_dir / "labels.npy",
        "mode": parity.mode,
        "arch": parity.arch,
        "num_classes": parity.num_classes,
        "height": parity.input.height,
        "width": parity.input.width,
        "channels": parity.input.channels,
        "batch": parity.batch.per_device,
        "precision": parity.precision,
        "device": "cuda" if cuda else "cpu",
        "seed": parity.seed,
        "optimizer": optimizer["name"],
        "lr": repr(float(optimizer["lr"])),
        "beta1": repr(float(betas[0])),
        "beta2": repr(float(betas[1])),
        "eps": repr(float(optimizer.get("eps", 1e-8))),
        "weight_decay": repr(float(optimizer.get("weight_decay") or 0.0)),
        "momentum": repr(float(optimizer.get("momentum") or 0.0)),
        "nesterov": int(bool(optimizer.get("nesterov"))),
        "cuda_graph": int(switches.cuda_graph),
        "gpu_resident": int(switches.gpu_resident),
        "opennn_cuda_warmup": int(switches.opennn_cuda_warmup),
        "reset_graphs_after_warmup": int(switches.reset_graphs_after_warmup),
        "conv_autotune": switches.conv_autotune,
        "conv_workspace_cap": switches.conv_workspace_cap,
        "workers": switches.workers,
        **(extra or {}),
    }
    lines = ["bench-opennn-plan 1"] + [f"{key} {value}" for key, value in values.items()]
    # the blocks below are phase_steps' too: the adapter says the phases from the driver's events of these blocks
    for block in timing_blocks(spec.schedule, samples):
        steps = " ".join(f"{step.start}:{step.size}" for step in block.steps)
        lines.append(f"block {block.epoch} {int(block.warmup)} {int(block.last_of_epoch)} {steps}")
    return "\n".join(lines) + "\n"


def phase_steps(spec: RunSpec, samples: int) -> tuple[int, int]:
    """(warmup steps, timed steps) of the plan's blocks (plan_text writes them; bench_opennn.phases counts them)."""
    blocks = list(timing_blocks(spec.schedule, samples))
    return sum(len(b.steps) for b in blocks if b.warmup), sum(len(b.steps) for b in blocks if not b.warmup)
