"""bench's shared initial weights (bench-init-v1, docs/engine-contract.md) in OpenNN's flat buffers.

OpenNN keeps every parameter in one float buffer and every state (batch-norm running statistics,
the input scaling layer's statistics) in another: layers in order, each layer's tensors in order,
each padded to 64 bytes. The driver reports that layout (``layout`` events) and dumps the buffers;
this module writes the file's tensors into them (conv kernels OIHW -> OpenNN's OHWI, the
classifier's [out, in] -> OpenNN's [in, out], bias first) and reads them back, so the hash the
result reports is of the values OpenNN holds after loading.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

Layout = list[tuple[str, str, int, int, tuple[int, ...]]]


def torch_names(label: str) -> tuple[str, str | None]:
    """OpenNN ResNet layer label -> (torchvision conv or fc name, its batch norm)."""
    if label == "stem_conv":
        return "conv1", "bn1"
    if label == "classifier":
        return "fc", None
    match = re.fullmatch(r"s(\d+)b(\d+)_(conv(\d)|skip)", label)
    if not match:
        raise KeyError(label)
    stage, block = int(match.group(1)) + 1, int(match.group(2))
    if match.group(3) == "skip":
        return f"layer{stage}.{block}.downsample.0", f"layer{stage}.{block}.downsample.1"
    return f"layer{stage}.{block}.conv{match.group(4)}", f"layer{stage}.{block}.bn{match.group(4)}"


def _slots(layout: Layout) -> Iterator[tuple[str, int, tuple[int, ...], str, str]]:
    """(kind, offset, OpenNN shape, torch name, conversion) for every tensor bench's file holds."""
    for kind, label, index, offset, shape in layout:
        if label.startswith("scaling") or label.lower().startswith("scaling"):
            continue
        try:
            conv, bn = torch_names(label)
        except KeyError:
            if kind == "state":
                continue  # states of layers bench's file does not describe (input scaling) keep OpenNN's values
            raise
        if conv == "fc":
            yield kind, offset, shape, ("fc.bias" if index == 0 else "fc.weight"), ("copy" if index == 0 else "transpose")
        elif kind == "param":
            yield kind, offset, shape, (f"{conv}.weight", f"{bn}.weight", f"{bn}.bias")[index], ("ohwi" if index == 0 else "copy")
        else:
            yield kind, offset, shape, (f"{bn}.running_mean", f"{bn}.running_var")[index], "copy"


def _to_opennn(value: np.ndarray, conversion: str) -> np.ndarray:
    if conversion == "ohwi":
        return value.transpose(0, 2, 3, 1)
    if conversion == "transpose":
        return value.T
    return value


def _from_opennn(value: np.ndarray, conversion: str) -> np.ndarray:
    if conversion == "ohwi":
        return value.transpose(0, 3, 1, 2)
    if conversion == "transpose":
        return value.T
    return value


def fill(layout: Layout, tensors: dict[str, np.ndarray], params: np.ndarray, states: np.ndarray) -> None:
    """Write ``tensors`` into the flat buffers; every tensor of the file must find its place."""
    used = set()
    for kind, offset, shape, name, conversion in _slots(layout):
        if name not in tensors:
            raise ValueError(f"initial weights have no tensor {name!r} (OpenNN layer needs it)")
        value = np.ascontiguousarray(_to_opennn(tensors[name].astype(np.float32), conversion))
        if value.shape != shape:
            raise ValueError(f"initial weights: {name} is {tensors[name].shape}, OpenNN's tensor is {shape} after conversion")
        target = params if kind == "param" else states
        target[offset : offset + value.size] = value.ravel()
        used.add(name)
    missing = sorted(set(tensors) - used)
    if missing:
        raise ValueError(f"initial weights: {len(missing)} tensors have no place in OpenNN's ResNet (first: {missing[0]})")


def read_back(layout: Layout, params: np.ndarray, states: np.ndarray) -> dict[str, np.ndarray]:
    """The file's tensors, re-made from OpenNN's buffers (names and layouts of bench-init-v1)."""
    out = {}
    for kind, offset, shape, name, conversion in _slots(layout):
        source = params if kind == "param" else states
        size = int(np.prod(shape))
        out[name] = np.ascontiguousarray(_from_opennn(source[offset : offset + size].reshape(shape), conversion))
    return out


def raw(path: Path) -> np.ndarray:
    return np.fromfile(path, dtype="<f4")
