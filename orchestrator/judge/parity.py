"""Parity: did the engine do exactly the work of its spec, and the same work as the other engines?"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench_engine.contract import EngineResult, Parity, ResultMeasurements, RunSpec
from bench_engine.harness import timing_blocks
from bench_engine.precision import PRECISIONS
from orchestrator.judge.record import Mismatch


def canonical_dtype(name: str) -> str:
    """'torch.bfloat16', 'bf16', 'mixed_bfloat16' -> 'bfloat16'; likewise float16 and float32."""
    text = str(name).lower()
    if "bfloat16" in text or "bf16" in text:
        return "bfloat16"
    if "float16" in text or "half" in text or "fp16" in text:
        return "float16"
    if "float32" in text or "fp32" in text or text == "float":
        return "float32"
    return text


def expected_samples(spec: RunSpec) -> int:
    """Samples the spec asks for, counting a kept partial batch with its real size (bench_engine.schedule)."""
    return spec.parity.expected_samples()


_mismatch = Mismatch


def check_against_spec(spec: RunSpec, result: EngineResult) -> list[Mismatch]:
    """Every field of the result's work (and precision, optimizer, loss, block losses) that differs from what ``spec`` asked."""
    work = result.work
    if not work:
        return [_mismatch("work", "present", None)]
    parity = spec.parity
    mismatches = [_mismatch(f, e, a) for f, e, a in _work_pairs(spec, work) if e != a]
    mismatches += _precision_policy(parity.precision, work["precision"], result.environment.get("device_kind"), parity.mode)
    mismatches += _observed(parity, work.get("observed"))
    if parity.mode == "train":
        mismatches += check_optimizer(parity.optimizer, work.get("optimizer"))
        mismatches += check_loss(parity.loss, work.get("loss"))
        mismatches += check_block_losses(spec, result.measurements)
    return mismatches


def _work_pairs(spec: RunSpec, work: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(field, asked, counted) of every work figure the spec fixes."""
    parity = spec.parity
    pairs = [
        ("mode", parity.mode, work["mode"]),
        ("model.arch", parity.arch, work["arch"]),
        ("model.num_classes", parity.num_classes, work["num_classes"]),
        ("dataset.sha256", parity.dataset.sha256, work["dataset_sha256"]),
        ("dataset.samples", parity.dataset.samples, work["dataset_samples"]),
        ("batch.per_device", parity.batch.per_device, work["batch_per_device"]),
        ("batch.global", parity.batch.global_, work["batch_global"]),
        ("devices", parity.devices, work["world_size"]),
        ("epochs", parity.epochs, work["epochs"]),
        ("steps", parity.total_steps, work["steps"]),
        ("samples", parity.expected_samples(), work["samples"]),
        ("precision", parity.precision, work["precision"]["name"]),
        ("input", list(parity.input.hwc), work.get("input_shape")),
        ("data_placement", parity.data_placement, work.get("data_placement")),
        ("param_dtypes", [PRECISIONS[parity.precision].param_dtype], [canonical_dtype(d) for d in work.get("param_dtypes") or []] or None),
    ]
    init = parity.init or {"mode": "framework"}
    got_init = work.get("init") or {}
    pairs.append(("init.mode", init["mode"], got_init.get("mode")))
    if init["mode"] == "shared":
        pairs.append(("init.sha256", init["sha256"], got_init.get("sha256")))
    if spec.expected_parameters is not None:
        pairs.append(("trainable_parameters", spec.expected_parameters, work["trainable_parameters"]))
    return pairs


def expected_blocks(spec: RunSpec) -> int:
    """Blocks the harness runs for ``spec`` (bench_engine.harness.timing_blocks: warmup, then every window)."""
    return sum(1 for _ in timing_blocks(spec.schedule, spec.parity.dataset.samples, spec.parity.devices))


def check_block_losses(spec: RunSpec, measurements: ResultMeasurements | None) -> list[Mismatch]:
    """A training run reports one finite mean loss per block the harness ran (the block-mean trajectory verdict)."""
    expected = expected_blocks(spec)
    got = measurements.block_losses if measurements is not None else None
    field = "measurements.block_losses"
    if not got or len(got) != expected:
        return [_mismatch(field, f"{expected} block means", "missing" if not got else f"{len(got)} values")]
    bad = [index for index, value in enumerate(got) if not isinstance(value, int | float) or not math.isfinite(value)]
    if bad:
        return [_mismatch(field, "finite block means", f"non-finite at block {bad[0]} ({len(bad)} of {expected})")]
    return []


def _observed(parity: Parity, observed: Mapping[str, Any] | None) -> list[Mismatch]:
    """The dtypes of a traced step: the convolution computes in the precision's dtype, gradients are fp32."""
    compute = PRECISIONS[parity.precision].compute_dtype
    if not observed:
        return [_mismatch("observed", {"compute_dtype": compute}, observed)]
    out = []
    if canonical_dtype(observed.get("compute_dtype")) != compute:
        out.append(_mismatch("observed.compute_dtype", compute, observed.get("compute_dtype")))
    if parity.mode == "train" and canonical_dtype(observed.get("grad_dtype")) != "float32":
        out.append(_mismatch("observed.grad_dtype", "float32", observed.get("grad_dtype")))
    return out


# spec field -> result field of the optimizer, per optimizer name (docs/engine-contract.md)
OPTIMIZER_FIELDS = {"sgd": ("lr", "weight_decay", "momentum", "nesterov"), "adam": ("lr", "weight_decay", "betas", "eps")}
FLOAT_RTOL = 1e-6  # hyper-parameters read back from float32 framework variables


def _same(expected: Any, actual: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool) or expected is None or actual is None:
        return expected == actual
    if isinstance(expected, list | tuple):
        return isinstance(actual, list | tuple) and len(expected) == len(actual) and all(map(_same, expected, actual))
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return math.isclose(float(expected), float(actual), rel_tol=FLOAT_RTOL, abs_tol=1e-12)
    return expected == actual


def check_optimizer(expected: Mapping[str, Any], actual: Mapping[str, Any] | None) -> list[Mismatch]:
    """The optimizer read back from the engine's live object against the spec's."""
    if not actual:
        return [_mismatch("optimizer", expected, actual)]
    if actual.get("name") != expected["name"]:
        return [_mismatch("optimizer.name", expected["name"], actual.get("name"))]
    return [_mismatch(f"optimizer.{key}", expected[key], actual.get(key))
            for key in OPTIMIZER_FIELDS[expected["name"]] if not _same(expected[key], actual.get(key))]


def check_loss(expected: str, actual: Mapping[str, Any] | None) -> list[Mismatch]:
    """The loss the step used: the spec's, mean-reduced, no label smoothing."""
    if not actual:
        return [_mismatch("loss", expected, actual)]
    want = {"name": expected, "reduction": "mean", "label_smoothing": 0.0}
    return [_mismatch(f"loss.{key}", value, actual.get(key)) for key, value in want.items() if not _same(value, actual.get(key))]


def _precision_policy(name: str, policy: Mapping[str, Any], device_kind: str | None, mode: str = "train") -> list[Mismatch]:
    """The precision really in effect must be the one the name means (bench_engine.precision)."""
    info = PRECISIONS[name]
    out = []
    if canonical_dtype(policy["compute_dtype"]) != info.compute_dtype:
        out.append(_mismatch("precision.compute_dtype", info.compute_dtype, policy["compute_dtype"]))
    if canonical_dtype(policy["param_dtype"]) != info.param_dtype:
        out.append(_mismatch("precision.param_dtype", info.param_dtype, policy["param_dtype"]))
    # TF32 only exists on CUDA; on CPU the flags are reported but have no effect.
    if info.tf32 is not None and device_kind == "cuda":
        for key in ("tf32_matmul", "tf32_conv"):
            if bool(policy[key]) != info.tf32:
                out.append(_mismatch(f"precision.{key}", info.tf32, policy[key]))
    if info.loss_scaling and mode == "train" and device_kind == "cuda" and not policy.get("loss_scaling"):
        out.append(_mismatch("precision.loss_scaling", True, policy.get("loss_scaling")))
    return out


CROSS_FIELDS = {
    "trainable_parameters": lambda w: w["trainable_parameters"],
    "dataset.sha256": lambda w: w["dataset_sha256"],
    "samples": lambda w: w["samples"],
    "steps": lambda w: w["steps"],
    "epochs": lambda w: w["epochs"],
    "batch.global": lambda w: w["batch_global"],
    "precision": lambda w: w["precision"]["name"],
    "init.sha256": lambda w: (w.get("init") or {}).get("sha256"),
}


@dataclass(frozen=True)
class CrossRun:
    """What the cross-engine check reads of one valid run: its comparison cell and the work it counted."""

    run_id: str
    engine: str
    key: tuple[Any, ...]  # the comparison cell (precision, path, per-device batch, devices)
    work: Mapping[str, Any]


def cross_engine(runs: Sequence[CrossRun]) -> dict[str, list[Mismatch]]:
    """Compare the valid runs of different engines that share precision, batch and devices.

    Returns run_id -> mismatches for runs that disagree with the majority value of a field
    (with no majority, every disagreeing run is marked).
    """
    cells: dict[Any, list[CrossRun]] = defaultdict(list)
    for run in runs:
        cells[run.key].append(run)
    flagged: dict[str, list[Mismatch]] = defaultdict(list)
    for members in cells.values():
        if len({m.engine for m in members}) < 2:
            continue
        for field, read in CROSS_FIELDS.items():
            for run_id, mismatch in _disagreements(members, field, read):
                flagged[run_id].append(mismatch)
    return dict(flagged)


def _disagreements(members: list[CrossRun], field: str, read: Callable[[Mapping[str, Any]], Any]) -> list[tuple[str, Mismatch]]:
    """(run id, mismatch) of every member off the majority value of ``field`` (every disagreeing one without a majority)."""
    values = {m.run_id: read(m.work) for m in members}
    counts = Counter(map(repr, values.values()))
    if len(counts) == 1:
        return []
    top = counts.most_common()
    majority = top[0][0] if top[0][1] > top[1][1] else None
    out = []
    for member in members:
        value = values[member.run_id]
        if majority is not None and repr(value) == majority:
            continue
        others = [m for m in members if m.engine != member.engine and repr(values[m.run_id]) != repr(value)]
        if others:
            other = others[0]
            out.append((member.run_id, _mismatch(field, values[other.run_id], value, against=f"{other.engine} ({other.run_id})")))
    return out
