"""Leaving the process group is bounded: a teardown that never returns is abandoned, not waited on.

On 2 H200s, ``destroy_process_group`` never returned after a DDP step captured in a CUDA graph
had finished its measurements; the worker then never wrote its result. These tests fake a
blocked teardown on CPU.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO / "images" / "common", REPO / "images" / "pytorch"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

torch = pytest.importorskip("torch")


def _fake_group(monkeypatch: pytest.MonkeyPatch, destroy) -> None:
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_available", lambda: True)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "destroy_process_group", destroy)


def test_blocked_teardown_is_abandoned_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench_pytorch.distributed import shutdown

    release = threading.Event()
    _fake_group(monkeypatch, lambda: release.wait(30))
    started = time.monotonic()
    assert shutdown(timeout_s=0.5) is False
    assert time.monotonic() - started < 5
    release.set()


def test_teardown_that_returns_is_reported_done(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench_pytorch.distributed import shutdown

    calls: list[int] = []
    _fake_group(monkeypatch, lambda: calls.append(1))
    assert shutdown(timeout_s=5) is True
    assert calls == [1]


def test_workload_close_flags_an_abandoned_teardown(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from bench_pytorch import distributed, workload

    monkeypatch.setattr(workload, "TEARDOWN_ABANDONED", False)
    monkeypatch.setattr(distributed, "shutdown", lambda timeout_s=0.0: False)

    class _Ctx:
        rank = 1

    runner = workload.EagerRunner(lambda *a: None, lambda *a: None, None, 1)  # type: ignore[arg-type]
    w = workload.TorchWorkload(runner, torch.device("cpu"), True, dist=_Ctx(),  # type: ignore[arg-type]
                               trainable_parameters=1, precision={}, data_placement="host", optimizations={}, world_size=2)
    w.close()
    assert workload.TEARDOWN_ABANDONED is True
    assert "rank 1: leaving the process group did not finish" in capsys.readouterr().err
