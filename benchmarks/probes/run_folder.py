"""What both JAX probes start from: a run folder's spec (made by ``bench scenario run``) and bench's own workload for it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


def read_spec(spec_path: Path) -> dict[str, Any]:
    """A run folder's ``spec.json``, its shared-weights file named by its path beside the spec."""
    spec = json.loads(spec_path.read_text())
    spec["parity"]["init"]["file"] = str(spec_path.parent / spec["parity"]["init"]["file"])
    return spec


def build_jax_workload(spec: dict[str, Any]) -> tuple[Any, str, list[Any], float]:
    """(workload, device kind, devices, setup seconds): the process configured, the dataset loaded, the workload built."""
    from bench_engine.data import load_dataset
    from bench_jax.environment import configure_process, resolve_devices
    from bench_jax.prepare import build_workload

    configure_process(spec)
    kind, devices = resolve_devices(spec.get("device", "auto"))
    data = load_dataset(spec["parity"]["dataset"]["path"], spec["parity"]["dataset"]["sha256"])
    began = time.perf_counter()
    workload = build_workload(spec, data, kind, devices)
    return workload, kind, devices, time.perf_counter() - began
