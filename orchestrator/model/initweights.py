"""Shared initial weights: one seeded set written by bench, loaded by every engine (docs/engine-contract.md, 3).

The tensors follow the analytic layer list of ``orchestrator.model.layers`` (same stages, same counts:
a check below) under torchvision's ResNet names and PyTorch layouts, written as a safetensors file
(format ``bench-init-v1``; bytes laid out by bench, read back by the ``safetensors`` package) with its
canonical hash; engines report the hash of what they read back after loading, so the parity check
can tell whether every engine started from these bits.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import safe_open

from bench_engine.initweights import FORMAT, canonical_sha256
from orchestrator.errors import BadInput
from orchestrator.model.layers import RESNET50_STAGES, trainable_parameters

INIT_DIR = "init"
RUN_FILE = "init.safetensors"
BN_SUFFIXES = ("weight", "bias", "running_mean", "running_var")
TRAINABLE_SUFFIXES = ("weight", "bias")
# The last BatchNorm scale of each bottleneck's residual branch starts at zero ("zero-init residual", as in
# NVIDIA's ResNet-50 v1.5 recipe): with all 16 branches adding unit-variance outputs from the first step, fp32
# rounding alone moved PyTorch's own loss 0.6% from float64 at step 2 and 5% at step 5 (CPU, 32x32, batch 128,
# SGD lr 1e-3); with zero-init branches the two agree to 3e-7 over those 5 steps, so cross-engine trajectories
# measure the engines, not the conditioning.
ZERO_SCALE_SUFFIX = ".bn3.weight"


def resnet50_tensors(num_classes: int, channels: int = 3) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, kind, shape) of every tensor of ResNet-50 v1.5 in definition order (conv | bn.<suffix> | fc)."""
    out: list[tuple[str, str, tuple[int, ...]]] = [("conv1.weight", "conv", (64, channels, 7, 7))]
    out += [(f"bn1.{s}", f"bn.{s}", (64,)) for s in BN_SUFFIXES]
    cin = 64
    for stage, (blocks, width, cout) in enumerate(RESNET50_STAGES, start=1):
        for block in range(blocks):
            prefix = f"layer{stage}.{block}"
            for index, (i, o, k) in enumerate(((cin, width, 1), (width, width, 3), (width, cout, 1)), start=1):
                out.append((f"{prefix}.conv{index}.weight", "conv", (o, i, k, k)))
                out += [(f"{prefix}.bn{index}.{s}", f"bn.{s}", (o,)) for s in BN_SUFFIXES]
            if block == 0:
                out.append((f"{prefix}.downsample.0.weight", "conv", (cout, cin, 1, 1)))
                out += [(f"{prefix}.downsample.1.{s}", f"bn.{s}", (cout,)) for s in BN_SUFFIXES]
            cin = cout
    out += [("fc.weight", "fc", (num_classes, cin)), ("fc.bias", "fc", (num_classes,))]
    return out


LAYOUTS = {"resnet50_v1.5": resnet50_tensors}


def shared_archs() -> list[str]:
    return sorted(LAYOUTS)


def init_mode(workload: dict[str, Any]) -> str:
    """workload.init, default shared where the arch has a shared layout."""
    return workload.get("init") or ("shared" if workload["model"]["arch"] in shared_archs() else "framework")


def generate(arch: str, num_classes: int, channels: int, seed: int) -> dict[str, np.ndarray]:
    """The seeded tensors (insertion order = definition order); BadInput for an arch without a shared layout."""
    layout = LAYOUTS.get(arch)
    if layout is None:
        raise BadInput(f"workload.init: shared initial weights are defined for {', '.join(shared_archs())} only, not {arch!r}")
    rng = np.random.default_rng(seed)
    tensors: dict[str, np.ndarray] = {}
    for name, kind, shape in layout(num_classes, channels):
        if kind == "conv":
            value = rng.normal(0.0, np.sqrt(2.0 / (shape[0] * shape[2] * shape[3])), size=shape)
        elif kind == "fc":
            bound = 1.0 / np.sqrt(layout(num_classes, channels)[-2][2][1])
            value = rng.uniform(-bound, bound, size=shape)
        else:
            one = kind in ("bn.weight", "bn.running_var") and not name.endswith(ZERO_SCALE_SUFFIX)
            value = np.full(shape, 1.0 if one else 0.0)
        tensors[name] = value.astype(np.float32)
    trainable = sum(v.size for n, v in tensors.items() if n.rsplit(".", 1)[1] in TRAINABLE_SUFFIXES)
    expected = trainable_parameters(arch, num_classes, channels)
    if trainable != expected:  # the file and the analytic layer list describe the same network
        raise AssertionError(f"shared layout of {arch} has {trainable} trainable values, the analytic count is {expected}")
    return tensors


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    """A safetensors file of float32 tensors in insertion order, written atomically and read back.

    Written by hand on purpose: published manifests hash these bytes and ``bench scenario resume``
    re-makes a deleted file that must equal the original bit for bit (artifacts/publish.py), so the
    layout is fixed: compact JSON header, metadata first, tensors in definition order, header padded
    with spaces to 8 bytes. ``safetensors.numpy.save`` orders tensors by dtype and name, metadata
    arbitrarily, and pads differently (checked with safetensors 0.8.0: other bytes). The
    ``safetensors`` package then reads the file back (``verify_safetensors``) before it is put in place.
    """
    entries: dict[str, dict[str, str | list[int]]] = {}
    offset = 0
    for name, value in tensors.items():
        size = value.size * 4
        entries[name] = {"dtype": "F32", "shape": list(value.shape), "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps({"__metadata__": metadata, **entries}, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # safetensors pads the header to 8 bytes
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(len(blob).to_bytes(8, "little"))
            handle.write(blob)
            for value in tensors.values():
                handle.write(np.ascontiguousarray(value, dtype="<f4").tobytes())
        verify_safetensors(tmp, tensors, metadata)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def verify_safetensors(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    """The safetensors package reads ``path`` as exactly ``tensors`` (same order, shapes, bits) and ``metadata``."""
    with safe_open(str(path), framework="numpy") as handle:
        names = list(handle.offset_keys())
        if names != list(tensors) or (handle.metadata() or {}) != metadata:
            raise RuntimeError(f"{path}: safetensors reads other tensor names or metadata than bench wrote")
        for name in names:
            back, value = handle.get_tensor(name), np.ascontiguousarray(tensors[name], dtype="<f4")
            if back.dtype != np.float32 or back.shape != value.shape or back.tobytes() != value.tobytes():
                raise RuntimeError(f"{path}: safetensors reads tensor {name} back differently")


def file_name(arch: str, num_classes: int, channels: int, seed: int) -> str:
    return f"{arch}-c{num_classes}-ch{channels}-seed{seed}.safetensors"


def write_init(root: Path, arch: str, num_classes: int, channels: int, seed: int) -> tuple[Path, str]:
    """Write (once) the artifact's init file under ``root/init``; return its path and canonical hash."""
    folder = root / INIT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name(arch, num_classes, channels, seed)
    tensors = generate(arch, num_classes, channels, seed)
    sha = canonical_sha256(tensors)
    if not path.is_file():
        meta = {"format": FORMAT, "arch": arch, "num_classes": str(num_classes), "channels": str(channels),
                "seed": str(seed), "sha256": sha}
        write_safetensors(path, tensors, meta)
    return path, sha


def place_in_run(source: Path, run_dir: Path) -> Path:
    """The run folder's ``init.safetensors``: a hard link to the artifact's file (a copy across file systems)."""
    target = run_dir / RUN_FILE
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
    return target


_WRITTEN: dict[tuple[str, str, int, int, int], str] = {}


def shared_init(root: Path, workload: dict[str, Any], run_dir: Path | None = None) -> dict[str, str] | None:
    """The spec's ``parity.init`` block for ``workload`` in the artifact at ``root`` (None: framework).

    Shared: the artifact's file is written on first use (its hash remembered for the session) and
    placed in ``run_dir`` as ``init.safetensors``, the name the block gives relative to the spec.
    """
    if init_mode(workload) != "shared":
        return None
    model, channels = workload["model"], workload["input"]["channels"]
    key = (str(root.resolve()), model["arch"], model["num_classes"], channels, workload["seed"])
    path = root / INIT_DIR / file_name(model["arch"], model["num_classes"], channels, workload["seed"])
    if key not in _WRITTEN or not path.is_file():
        _WRITTEN[key] = write_init(root, model["arch"], model["num_classes"], channels, workload["seed"])[1]
    if run_dir is not None:
        place_in_run(path, run_dir)
    return {"mode": "shared", "file": RUN_FILE, "sha256": _WRITTEN[key], "format": FORMAT}
