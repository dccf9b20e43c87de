"""bench's shared initial weights through OpenNN: a layout pass, the file's tensors written into OpenNN's
buffers, the weights read back after loading and after the last step."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench_engine.contract import RunSpec
from bench_engine.weights import WeightChange, weight_change
from bench_opennn.child import run_driver
from bench_opennn.events import parse_events
from bench_opennn.initload import Layout


def shared_init(spec: RunSpec, spec_dir: Path, driver: Path, env: dict[str, str], plan_base: str,
                work_dir: Path) -> tuple[dict[str, Path], Layout]:
    """First pass for ``init: shared``: the driver reports OpenNN's buffer layout and its default
    buffers; the file's tensors are written into them. Returns the plan keys of the second pass."""
    from bench_engine.initweights import read_init
    from bench_opennn.initload import fill, raw

    path = spec.init_file(spec_dir)
    assert path is not None, "shared_init needs a spec with shared initial weights"
    tensors, _ = read_init(path)
    files = {key: work_dir / f"{key}.f32" for key in ("defaults_params", "defaults_states", "init_params", "init_states",
                                                      "readback_params", "readback_states", "final_params", "final_states")}
    layout_events = work_dir / "layout-events.txt"
    layout_plan = work_dir / "layout-plan.txt"
    layout_plan.write_text(plan_base.replace(f"events {work_dir / 'events.txt'}", f"events {layout_events}", 1)
                           + f"layout_only 1\ndump_params {files['defaults_params']}\ndump_states {files['defaults_states']}\n")
    if run_driver(driver, layout_plan, env) != 0:
        found = parse_events(layout_events)
        raise RuntimeError(f"OpenNN driver, layout pass: {found.error_message or 'failed (see the run log)'}")
    layout = parse_events(layout_events).layout
    params, states = raw(files["defaults_params"]), raw(files["defaults_states"])
    fill(layout, tensors, params, states)
    params.tofile(files["init_params"])
    states.tofile(files["init_states"])
    keys = {"init_params": files["init_params"], "init_states": files["init_states"],
            "dump_params": files["readback_params"], "dump_states": files["readback_states"],
            "final_params": files["final_params"], "final_states": files["final_states"]}
    return keys, layout


def init_readback(layout: Layout, keys: dict[str, Path]) -> str:
    """Canonical hash (docs/engine-contract.md 3.3) of the weights OpenNN held after loading."""
    from bench_engine.initweights import canonical_sha256
    from bench_opennn.initload import raw, read_back

    return canonical_sha256(read_back(layout, raw(keys["dump_params"]), raw(keys["dump_states"])))


def moved_weights(layout: Layout, keys: dict[str, Path]) -> WeightChange:
    """How far training moved the trainable parameters: the driver's dump after the last step
    against its dump after loading (the parameter tensors of ``layout``; padding excluded)."""
    from bench_opennn.initload import raw

    before, after = raw(keys["dump_params"]), raw(keys["final_params"])
    slots = [(offset, int(np.prod(shape))) for kind, _label, _index, offset, shape in layout if kind == "param"]
    return weight_change((before[o : o + n] for o, n in slots), (after[o : o + n] for o, n in slots))
