"""PyTorch's engine.log says what torch.compile spent in the warmup and whether its caches hit (bench_pytorch.compile_report)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO / "images" / "common", REPO / "images" / "pytorch"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))


def test_the_line_sums_each_phase_and_names_each_cache() -> None:
    from bench_pytorch.compile_report import describe

    times = {"_compile.compile_inner": [5.0, 2.5], "bytecode_tracing": [1.25], "create_aot_dispatcher_function": [4.0],
             "compile_fx_inner": [2.0]}
    counters = {"inductor": {"fxgraph_cache_bypass": 1}, "aot_autograd": {"autograd_cache_hit": 2}}
    assert describe(times, counters) == (
        "torch.compile: 7.5s in all (tracing 1.2s, AOT and freezing 4.0s, Inductor 2.0s); "
        "FX graph cache hit 0 miss 0 bypass 1; AOT autograd cache hit 2 miss 0 bypass 0")
    assert describe({}, counters) is None  # nothing compiled: nothing said
    assert describe({"_compile.compile_inner": [0.0]}, {}) is None


def test_a_compiled_run_says_it_once_after_the_warmup_and_an_eager_one_not(make_spec, run_engine) -> None:
    pytest.importorskip("torch")
    compiled = make_spec("pytorch", mode="infer", batch=2, steps_per_epoch=3, options={"compile": True})
    code, _, log = run_engine(compiled)
    assert code == 0, log
    said = [line for line in log.splitlines() if "torch.compile:" in line]
    assert len(said) == 1 and "s in all (tracing" in said[0] and "FX graph cache hit" in said[0], log
    assert log.index("torch.compile:") > log.index("phase warmup")
    code, _, log = run_engine(make_spec("pytorch", mode="infer", batch=2, steps_per_epoch=3))
    assert code == 0 and "torch.compile:" not in log
