"""Parity: did the engine do exactly the work of its spec, and the same work as the other engines?"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

from bench_engine import schedule
from bench_engine.contract import Parity
from bench_engine.harness import timing_blocks
from bench_engine.precision import PRECISIONS
from bench_engine.schedule import Schedule

Mismatch = dict[str, Any]


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


def expected_samples(spec: dict[str, Any]) -> int:
    """Samples the spec asks for, counting a kept partial batch with its real size (bench_engine.schedule)."""
    return schedule.expected_samples(spec["parity"])


def _mismatch(field: str, expected: Any, actual: Any, against: str = "spec") -> Mismatch:
    return {"field": field, "expected": expected, "actual": actual, "against": against}


def check_against_spec(spec: dict[str, Any], result: dict[str, Any], device_kind: str | None = None) -> list[Mismatch]:
    """Every field of ``result['work']`` that differs from what ``spec`` asked."""
    work = result.get("work")
    if not work:
        return [_mismatch("work", "present", None)]
    parity = Parity.from_json(spec["parity"])
    expected_parameters = spec["expected"].get("trainable_parameters")
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
    if expected_parameters is not None:
        pairs.append(("trainable_parameters", expected_parameters, work["trainable_parameters"]))
    mismatches = [_mismatch(f, e, a) for f, e, a in pairs if e != a]
    mismatches += _precision_policy(parity.precision, work["precision"], device_kind, parity.mode)
    mismatches += _observed(parity, work.get("observed"))
    if parity.mode == "train":
        mismatches += check_optimizer(dict(parity.optimizer), work.get("optimizer"))
        mismatches += check_loss(parity.loss, work.get("loss"))
        mismatches += check_block_losses(spec, result.get("measurements"))
    return mismatches


def expected_blocks(spec: dict[str, Any]) -> int:
    """Blocks the harness runs for ``spec`` (bench_engine.harness.timing_blocks: warmup, then every window)."""
    parity = spec["parity"]
    return sum(1 for _ in timing_blocks(Schedule.from_json(spec), parity["dataset"]["samples"], parity["devices"]))


def check_block_losses(spec: dict[str, Any], measurements: dict[str, Any] | None) -> list[Mismatch]:
    """A training run reports one finite mean loss per block the harness ran (the block-mean trajectory verdict)."""
    expected = expected_blocks(spec)
    got = (measurements or {}).get("block_losses")
    field = "measurements.block_losses"
    if not isinstance(got, list) or len(got) != expected:
        return [_mismatch(field, f"{expected} block means", "missing" if got is None else f"{len(got)} values")]
    bad = [index for index, value in enumerate(got) if not isinstance(value, int | float) or not math.isfinite(value)]
    if bad:
        return [_mismatch(field, "finite block means", f"non-finite at block {bad[0]} ({len(bad)} of {expected})")]
    return []


def _observed(parity: Parity, observed: dict[str, Any] | None) -> list[Mismatch]:
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


def check_optimizer(expected: dict[str, Any], actual: dict[str, Any] | None) -> list[Mismatch]:
    """The optimizer read back from the engine's live object against the spec's."""
    if not actual:
        return [_mismatch("optimizer", expected, actual)]
    if actual.get("name") != expected["name"]:
        return [_mismatch("optimizer.name", expected["name"], actual.get("name"))]
    return [_mismatch(f"optimizer.{key}", expected[key], actual.get(key))
            for key in OPTIMIZER_FIELDS[expected["name"]] if not _same(expected[key], actual.get(key))]


def check_loss(expected: str, actual: dict[str, Any] | None) -> list[Mismatch]:
    """The loss the step used: the spec's, mean-reduced, no label smoothing."""
    if not actual:
        return [_mismatch("loss", expected, actual)]
    want = {"name": expected, "reduction": "mean", "label_smoothing": 0.0}
    return [_mismatch(f"loss.{key}", value, actual.get(key)) for key, value in want.items() if not _same(value, actual.get(key))]


def _precision_policy(name: str, policy: dict[str, Any], device_kind: str | None, mode: str = "train") -> list[Mismatch]:
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


def cross_engine(runs: list[dict[str, Any]]) -> dict[str, list[Mismatch]]:
    """Compare the valid runs of different engines that share precision, batch and devices.

    ``runs`` items have ``run_id``, ``engine``, ``key`` (the comparison cell) and ``work``.
    Returns run_id -> mismatches for runs that disagree with the majority value of a field
    (with no majority, every disagreeing run is marked).
    """
    cells: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        cells[run["key"]].append(run)
    flagged: dict[str, list[Mismatch]] = defaultdict(list)
    for members in cells.values():
        if len({m["engine"] for m in members}) < 2:
            continue
        for field, read in CROSS_FIELDS.items():
            values = {m["run_id"]: read(m["work"]) for m in members}
            counts = Counter(map(repr, values.values()))
            if len(counts) == 1:
                continue
            top = counts.most_common()
            majority = top[0][0] if top[0][1] > top[1][1] else None
            for member in members:
                value = values[member["run_id"]]
                if majority is not None and repr(value) == majority:
                    continue
                others = [m for m in members if m["engine"] != member["engine"] and repr(values[m["run_id"]]) != repr(value)]
                if not others:
                    continue
                other = others[0]
                flagged[member["run_id"]].append(
                    _mismatch(field, values[other["run_id"]], value, against=f"{other['engine']} ({other['run_id']})")
                )
    return dict(flagged)
