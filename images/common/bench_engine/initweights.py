"""Shared initial weights (docs/engine-contract.md, section 3): read a bench-init-v1 file, hash tensors.

The file is safetensors (8-byte little-endian header length, JSON header, raw data), every tensor
float32 in PyTorch layouts (conv OIHW, dense [out, in]) under torchvision's ResNet names. The
canonical hash covers names, shapes and values in sorted name order, so an engine can hash what it
reads back out of its own model after loading and prove it starts from the file's bits.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "bench-init-v1"


class InitError(RuntimeError):
    """The initial-weights file is missing, malformed or not the one the spec names."""


def canonical_sha256(tensors: Mapping[str, Any]) -> str:
    """sha256 over (name, shape, float32 little-endian bytes) in sorted name order."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        array = np.ascontiguousarray(np.asarray(tensors[name], dtype="<f4"))
        digest.update(name.encode() + b"\n" + ",".join(str(d) for d in array.shape).encode() + b"\n")
        digest.update(array.tobytes())
    return digest.hexdigest()


def read_init(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The tensors (in file order) and the metadata of a bench-init-v1 file."""
    raw = Path(path).read_bytes() if Path(path).is_file() else None
    if raw is None:
        raise InitError(f"initial weights file missing: {path}")
    try:
        size = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8 : 8 + size])
        meta = header.pop("__metadata__", {}) or {}
        data = memoryview(raw)[8 + size :]
        tensors: dict[str, np.ndarray] = {}
        for name, entry in sorted(header.items(), key=lambda item: item[1]["data_offsets"][0]):
            if entry["dtype"] != "F32":
                raise InitError(f"{path}: tensor {name} is {entry['dtype']}, bench-init-v1 holds F32 only")
            begin, end = entry["data_offsets"]
            array = np.frombuffer(data[begin:end], dtype="<f4")
            tensors[name] = array.reshape(entry["shape"]).astype(np.float32)
    except (ValueError, KeyError, TypeError) as exc:
        raise InitError(f"{path}: not a bench-init-v1 safetensors file ({exc})") from None
    if meta.get("format") != FORMAT:
        raise InitError(f"{path}: format {meta.get('format')!r}, expected {FORMAT}")
    return tensors, meta


def resolve_init(spec: dict[str, Any], spec_dir: str | Path | None) -> Path | None:
    """The file a ``shared`` spec names (relative to the spec's folder), or None for ``framework``."""
    init = spec["parity"].get("init") or {"mode": "framework"}
    if init["mode"] != "shared":
        return None
    path = Path(init["file"])
    if not path.is_absolute() and spec_dir is not None:
        path = Path(spec_dir) / path
    return path


def require(tensors: Mapping[str, np.ndarray], name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The tensor ``name`` with ``shape``; InitError naming it otherwise."""
    if name not in tensors:
        raise InitError(f"initial weights have no tensor {name!r}")
    value = tensors[name]
    if tuple(value.shape) != tuple(shape):
        raise InitError(f"initial weights: {name} is {tuple(value.shape)}, the model needs {tuple(shape)}")
    return value
