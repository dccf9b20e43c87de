"""Shared initial weights (docs/engine-contract.md, section 3): read a bench-init-v1 file, hash tensors.

The file is safetensors, every tensor float32 in PyTorch layouts (conv OIHW, dense [out, in]) under
torchvision's ResNet names, read with the ``safetensors`` package. The canonical hash covers names,
shapes and values in sorted name order, so an engine can hash what it reads back out of its own model
after loading and prove it starts from the file's bits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

try:
    from safetensors import SafetensorError, safe_open
except ImportError:  # an engine image whose framework base lacks it (images install nothing): bench_engine.initplain
    safe_open = None
    SafetensorError = ValueError  # type: ignore[assignment,misc]

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


def _read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Tensors in file order and metadata, read and checked by the safetensors package."""
    tensors: dict[str, np.ndarray] = {}
    with safe_open(str(path), framework="numpy") as handle:
        meta = handle.metadata() or {}
        for name in getattr(handle, "offset_keys", handle.keys)():  # offset_keys: safetensors >= 0.7
            dtype = handle.get_slice(name).get_dtype()
            if dtype != "F32":
                raise InitError(f"{path}: tensor {name} is {dtype}, bench-init-v1 holds F32 only")
            tensors[name] = np.array(handle.get_tensor(name), dtype=np.float32)
    return tensors, meta


def read_init(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The tensors (in file order) and the metadata of a bench-init-v1 file."""
    path = Path(path)
    if not path.is_file():
        raise InitError(f"initial weights file missing: {path}")
    try:
        if safe_open is not None:
            tensors, meta = _read_safetensors(path)
        else:
            from bench_engine.initplain import read_plain

            tensors, meta = read_plain(path)
    except InitError:
        raise
    except (SafetensorError, ValueError, KeyError, TypeError, OSError) as exc:
        raise InitError(f"{path}: not a bench-init-v1 safetensors file ({exc})") from None
    if meta.get("format") != FORMAT:
        raise InitError(f"{path}: format {meta.get('format')!r}, expected {FORMAT}")
    return tensors, meta


def require(tensors: Mapping[str, np.ndarray], name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The tensor ``name`` with ``shape``; InitError naming it otherwise."""
    if name not in tensors:
        raise InitError(f"initial weights have no tensor {name!r}")
    value = tensors[name]
    if tuple(value.shape) != tuple(shape):
        raise InitError(f"initial weights: {name} is {tuple(value.shape)}, the model needs {tuple(shape)}")
    return value
