"""Placing the dataset: resident on the device, or on the host and copied batch by batch."""

from __future__ import annotations

import numpy as np
import torch

from bench_engine.data import NORMALIZED, Dataset, normalize

CHUNK_BYTES = 64 << 20  # uint8 images copied and looked up per chunk: a bounded int64 index tensor


def normalized_on(images_uint8: np.ndarray, device: torch.device) -> torch.Tensor:
    """The split normalised on ``device`` (NHWC float32): the uint8 images copied there chunk by chunk (a quarter of
    the float32 bytes) and each value looked up in bench_engine.data's table (the host normalisation's bits)."""
    table = torch.from_numpy(NORMALIZED.copy()).to(device)
    out = torch.empty(images_uint8.shape, dtype=torch.float32, device=device)
    per_image = max(1, int(np.prod(images_uint8.shape[1:])))
    step = max(1, CHUNK_BYTES // per_image)
    for start in range(0, images_uint8.shape[0], step):
        chunk = torch.tensor(images_uint8[start : start + step], device=device)  # a copy: the split may be read-only
        out[start : start + step] = table[chunk.long()]
    return out


class BatchSource:
    """Serves ``(images, labels)`` for samples ``start .. start + size`` on the compute device.

    Images are normalised once (bench_engine.data.normalize) and held as NCHW tensors in the
    model's memory format; labels as int64. ``device`` placement keeps the whole split on the
    device; ``host`` keeps it in host memory (pinned on CUDA) and copies each batch, non-blocking.
    """

    def __init__(self, data: Dataset, placement: str, device: torch.device, channels_last: bool) -> None:
        self.placement = placement
        self.device = device
        cuda = device.type == "cuda"
        on_device = placement == "device" and cuda
        nhwc = normalized_on(data.images, device) if on_device else torch.from_numpy(normalize(data.images))
        images = nhwc.permute(0, 3, 1, 2)  # NCHW view of NHWC memory
        if not channels_last:
            images = images.contiguous()
        labels = torch.from_numpy(data.labels.astype(np.int64))
        if placement == "device":
            self.images, self.labels = images.to(device), labels.to(device)
            where = "on the device (uint8 copied, values looked up)" if on_device else "once"
            self.detail = f"whole split resident on {device.type}, normalised {where}"
        elif placement == "host" and cuda:
            self.images, self.labels = images.pin_memory(), labels.pin_memory()
            self.detail = "host memory, pinned, copied per step (non_blocking)"
        elif placement == "host":  # numpy arrays, each batch wrapped as a tensor per step (no copy on a CPU)
            self.images, self.labels = images.numpy(), labels.numpy()
            self.detail = "host numpy arrays, each batch wrapped per step (cpu: no copy needed)"
        else:
            raise ValueError(f"unknown data placement {placement!r}")
        self._copy = placement == "host" and cuda

    def batch(self, start: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch on the compute device (a view for device placement, a fresh copy for host)."""
        images, labels = self.images[start : start + size], self.labels[start : start + size]
        if not isinstance(images, torch.Tensor):
            return torch.from_numpy(images), torch.from_numpy(labels)
        if self._copy:
            return images.to(self.device, non_blocking=True), labels.to(self.device, non_blocking=True)
        return images, labels

    def placement_in_effect(self) -> str:
        """Read back: 'device' when the split is a tensor on the compute device, else 'host'."""
        on_device = isinstance(self.images, torch.Tensor) and self.images.device.type == self.device.type
        return "device" if on_device else "host"

    def fill(self, start: int, size: int, images_out: torch.Tensor, labels_out: torch.Tensor) -> None:
        """Copy the batch into static buffers (CUDA graph inputs), straight from host or device."""
        images_out.copy_(self.images[start : start + size], non_blocking=True)
        labels_out.copy_(self.labels[start : start + size], non_blocking=True)
