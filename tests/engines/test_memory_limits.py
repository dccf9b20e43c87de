"""Each engine reads its allocator's limit back from the framework (``measurements.memory_limit_bytes``): what a
maximal batch is relative to. No GPU here: the framework's readers are stood in for."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.engines.readback_helpers import add_paths


class _Device:
    def __init__(self, stats: Any):
        self.stats = stats

    def memory_stats(self) -> Any:
        if isinstance(self.stats, Exception):
            raise self.stats
        return self.stats


def test_jax_reads_the_smallest_bytes_limit_of_its_devices() -> None:
    add_paths("jax")
    pytest.importorskip("jax")
    import jax

    from bench_jax.workload import allocator_limit

    assert allocator_limit([_Device({"bytes_limit": 7, "peak_bytes_in_use": 3}), _Device({"bytes_limit": 5})]) == 5
    assert allocator_limit([_Device(None), _Device(RuntimeError("no stats")), _Device({"bytes_in_use": 1})]) is None
    assert allocator_limit([_Device({"bytes_limit": 9}), _Device(None)]) == 9
    assert allocator_limit(jax.devices("cpu")) is None  # the CPU has no allocator limit to report


def test_pytorch_reads_total_memory_times_the_process_fraction(monkeypatch: pytest.MonkeyPatch) -> None:
    add_paths("pytorch")
    torch = pytest.importorskip("torch")
    from bench_pytorch.workload import memory_limit

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(total_memory=150 * 2**30))
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda device: 0.5, raising=False)
    assert memory_limit(torch.device("cuda", 0)) == 75 * 2**30
    monkeypatch.delattr(torch.cuda, "get_per_process_memory_fraction")  # an older torch: the whole device
    assert memory_limit(torch.device("cuda", 0)) == 150 * 2**30
