"""The bench-init-v1 reader for engine images without the ``safetensors`` package.

Engine images install nothing (they build without network on the framework's own base), and not
every base ships ``safetensors``; there ``bench_engine.initweights`` falls back to this reader. It
accepts only what that package accepts of an all-F32 file: a header that fits the file, JSON with
``__metadata__`` of strings, and tensors that tile the data exactly. Errors are ValueError/KeyError/
TypeError, which ``read_init`` turns into InitError.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

MAX_HEADER = 100_000_000  # the safetensors package's own bound


def read_plain(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Tensors in file order and metadata; ValueError (or KeyError/TypeError) for a malformed file."""
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    if len(raw) < 8 or size > MAX_HEADER or 8 + size > len(raw):
        raise ValueError(f"header of {size} bytes does not fit a file of {len(raw)}")
    header = json.loads(raw[8 : 8 + size])
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not all(isinstance(v, str) for v in meta.values()):
        raise ValueError("metadata values must be strings")
    data = memoryview(raw)[8 + size :]
    tensors: dict[str, np.ndarray] = {}
    offset = 0
    for name, entry in sorted(header.items(), key=lambda item: item[1]["data_offsets"][0]):
        if entry["dtype"] != "F32":
            raise TypeError(f"tensor {name} is {entry['dtype']}, bench-init-v1 holds F32 only")
        begin, end = entry["data_offsets"]
        if begin != offset or end - begin != 4 * math.prod(entry["shape"]):
            raise ValueError(f"tensor {name}: data_offsets {[begin, end]} do not follow the tensors before it")
        tensors[name] = np.frombuffer(data[begin:end], dtype="<f4").reshape(entry["shape"]).astype(np.float32)
        offset = end
    if offset != len(data):
        raise ValueError(f"{len(data) - offset} bytes after the last tensor")
    return tensors, meta
