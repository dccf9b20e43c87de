"""Where the runs of an artifact ran (runtime, image id, GPUs), and the warnings when that differs.

Runs measured on different runtimes (an engine in a container, another on the host) or, for one engine, from
different images are not measured alike; neither are two artifacts whose engines ran on different runtimes or
images. Runs of one artifact on different physical GPUs (a resume on another machine, say) are said too: the
same model is not the same device; runs on different GPU models are said apart, as not comparable at all (a resume
refuses another model: run/gpu_model.py; this catches artifacts made otherwise). Read from each started run's
``run.json`` (``runtime``, and the GPUs' UUIDs and NVML names of ``telemetry.gpu.devices``); the warnings are one
line each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.judge.artifact_progress import progress_warnings
from orchestrator.judge.record import RunRecord
from orchestrator.judge.record_file import read_record
from orchestrator.judge.summary_model import Summary


@dataclass(frozen=True)
class RuntimeUse:
    """One run's runtime: its name and, for a container, the image id (None on the host)."""

    run_id: str
    engine: str
    runtime: str
    image_id: str | None = None
    gpus: tuple[str, ...] = ()  # the UUIDs of the GPUs the run used (empty without NVML or a GPU)
    models: tuple[str, ...] = ()  # their models as NVML names them, sorted and distinct


def runtime_uses(root: Path, summary: Summary) -> list[RuntimeUse]:
    """The runtime of every run of the summary that started (skipped runs and runs without a record left out)."""
    uses = []
    for row in summary.runs:
        if row.status == "skipped":
            continue
        record = read_record(root, row.run_id)
        runtime = record.runtime if record is not None else {}
        if runtime.get("name") not in (None, "none") and record is not None:
            image = runtime.get("image_id")
            uses.append(RuntimeUse(row.run_id, row.engine, str(runtime["name"]), str(image) if image else None,
                                   gpu_field(record, "uuid"), tuple(sorted(set(gpu_field(record, "name"))))))
    return uses


def gpu_field(record: RunRecord, key: str) -> tuple[str, ...]:
    """One text field of every device of ``telemetry.gpu.devices`` in a run record, sorted; () where there are none."""
    telemetry = record.telemetry
    gpu = telemetry.get("gpu") if isinstance(telemetry, Mapping) else None
    devices = gpu.get("devices") if isinstance(gpu, dict) else None
    if not isinstance(devices, list):
        return ()
    return tuple(sorted(str(d[key]) for d in devices if isinstance(d, dict) and isinstance(d.get(key), str)))


def short_id(image_id: str) -> str:
    """'sha256:0123456789abcdef...' as 'sha256:0123456789ab'."""
    return image_id[:19]


def _engines(uses: Iterable[RuntimeUse]) -> str:
    """'jax x3, opennn x3': the engines of some runs with their number of runs."""
    counts: dict[str, int] = {}
    for use in uses:
        counts[use.engine] = counts.get(use.engine, 0) + 1
    return ", ".join(f"{engine} x{n}" for engine, n in sorted(counts.items()))


def mixed_warnings(uses: list[RuntimeUse], whose: str = "this artifact's") -> list[str]:
    """Within one artifact: runs on more than one runtime; one engine's runs from more than one image."""
    warnings = []
    runtimes = sorted({u.runtime for u in uses})
    if len(runtimes) > 1:
        parts = "; ".join(f"{name}: {_engines(u for u in uses if u.runtime == name)}" for name in runtimes)
        warnings.append(f"{whose} runs ran on different runtimes, not measured alike ({parts})")
    for engine in sorted({u.engine for u in uses}):
        images = sorted({u.image_id for u in uses if u.engine == engine and u.image_id})
        if len(images) > 1:
            counts = ", ".join(f"{short_id(i)} x{sum(1 for u in uses if u.engine == engine and u.image_id == i)}" for i in images)
            warnings.append(f"{whose} {engine} runs ran from different images, not measured alike ({counts})")
    models = sorted({u.models for u in uses if u.models})
    if len(models) > 1:
        parts = "; ".join(f"{'+'.join(m)}: {_engines(u for u in uses if u.models == m)}" for m in models)
        warnings.append(f"{whose} runs ran on different GPU models, not comparable ({parts})")
    devices = sorted({u.gpus for u in uses if u.gpus})
    if len(devices) > 1:
        parts = "; ".join(f"{'+'.join(g[:12] for g in gpus)}: {_engines(u for u in uses if u.gpus == gpus)}" for gpus in devices)
        warnings.append(f"{whose} runs ran on {len(devices)} different sets of physical GPUs ({parts})")
    return warnings


def _side(uses: list[RuntimeUse], engine: str) -> tuple[str, str]:
    """(runtimes, images) of one engine's runs, each as sorted text ('local', 'docker+local'; '-' without image)."""
    mine = [u for u in uses if u.engine == engine]
    return ("+".join(sorted({u.runtime for u in mine})),
            "+".join(sorted({short_id(u.image_id) for u in mine if u.image_id})) or "-")


def between_warnings(a: list[RuntimeUse], b: list[RuntimeUse]) -> list[str]:
    """Between two artifacts: each engine of both whose runtime or image differs from A to B."""
    runtimes, images = [], []
    for engine in sorted({u.engine for u in a} & {u.engine for u in b}):
        (runtime_a, image_a), (runtime_b, image_b) = _side(a, engine), _side(b, engine)
        if runtime_a != runtime_b:
            runtimes.append(f"{engine} {runtime_a} in A, {runtime_b} in B")
        elif image_a != image_b:
            images.append(f"{engine} {image_a} in A, {image_b} in B")
    warnings = [f"A and B ran on different runtimes: {'; '.join(runtimes)}"] if runtimes else []
    return warnings + ([f"A and B ran from different images: {'; '.join(images)}"] if images else [])


def artifact_warnings(root: Path, summary: Summary) -> list[str]:
    """The runtime and image warnings of one artifact folder (:func:`mixed_warnings`), then those of a summary that
    does not count every run the folder holds (:mod:`orchestrator.judge.artifact_progress`)."""
    return mixed_warnings(runtime_uses(root, summary)) + progress_warnings(root, summary)
