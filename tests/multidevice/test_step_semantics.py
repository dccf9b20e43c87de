"""One data-parallel step of JAX and TensorFlow equals the hand-computed update (tiny model, 2 CPU devices).

Each framework runs in its own process (dp_semantics.py): the device split (forced host devices,
logical CPU devices) must be set before the framework initialises.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("dp_semantics.py")


def _check(framework: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    proc = subprocess.run([sys.executable, str(SCRIPT), framework], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_jax_sharded_step_matches_per_device_reference() -> None:
    pytest.importorskip("jax")
    report = _check("jax")
    assert report["devices"] == 2
    for path in ("optimized", "baseline"):
        r = report[path]
        assert r["moved"] > 1e-3, "the step did not change the parameters"
        assert r["params_diff"] < 1e-12 and r["stats_diff"] < 1e-12, r  # float64: exact up to rounding
        assert r["replicated"], "parameters, statistics and optimizer state must stay replicated"
    assert report["optimized"]["all_reduce"] >= 1  # XLA inserted the gradient all-reduce


def test_tensorflow_mirrored_step_matches_per_replica_reference() -> None:
    pytest.importorskip("tensorflow")
    report = _check("tensorflow")
    assert report["devices"] == ["/CPU:0", "/CPU:1"]
    for path in ("graph", "xla"):
        r = report[path]
        assert r["moved"] > 1e-3 and r["params_diff"] < 1e-5, r
        assert r["replicas_diff"] == 0.0, "the replicas' variables diverged"
