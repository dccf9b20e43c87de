"""The OpenNN adapter (bench_opennn) around a stand-in driver: results, faults, signals, the plan."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import FIXTURES, REPO, load_schema

FAKE_DRIVER = FIXTURES / "opennn" / "fake_driver.py"
ADAPTER_PATH = os.pathsep.join([str(REPO / "images" / "common"), str(REPO / "images" / "opennn")])


def _run(spec: dict, tmp_path: Path, behaviour: str = "ok", driver: Path | None = FAKE_DRIVER, timeout: float = 120):
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec_file, result_file = tmp_path / "spec.json", tmp_path / "run" / "result.json"
    spec_file.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": ADAPTER_PATH, "BENCH_FAKE_OPENNN": behaviour, "BENCH_OPENNN_CACHE": str(tmp_path / "empty-cache")}
    env.pop("BENCH_OPENNN_DRIVER", None)
    if driver is not None:
        env["BENCH_OPENNN_DRIVER"] = str(driver)
    proc = subprocess.run([sys.executable, "-m", "bench_opennn", "--spec", str(spec_file), "--result", str(result_file)],
                          capture_output=True, text=True, env=env, timeout=timeout)
    result = json.loads(result_file.read_text()) if result_file.exists() else None
    if result is not None:
        jsonschema.validate(result, load_schema("engine-result"))
    return proc.returncode, result, proc.stderr + proc.stdout


def test_result_merges_the_driver_events(make_spec, tmp_path):
    spec = make_spec("opennn", steps_per_epoch=3, epochs=2, warmup=2)
    spec["measurement"]["window_steps"] = 2
    code, result, log = _run(spec, tmp_path)
    assert code == 0, log
    assert result["status"] == "ok" and result["engine"] == "opennn"
    work, measured = result["work"], result["measurements"]
    assert work["trainable_parameters"] == 23528522
    assert work["steps"] == 6 and work["samples"] == 6 * 32 and work["epochs"] == 2
    assert work["precision"]["name"] == "fp32" and work["data_placement"] == "device"
    # harness schedule: 2 warmup steps, then windows of 2 that never cross an epoch: [1] in epoch 1, [2, 1] in epoch 2
    assert measured["warmup_steps"] == 2
    assert [w[0] for w in measured["windows"]] == [1, 2, 1]
    assert measured["steady"]["samples"] == 4 * 32
    assert measured["block_losses"] == pytest.approx([2.3, 2.29, 2.28, 2.27])  # one per block: warmup, [1], [2], [1]
    assert measured["setup_s"] > 0
    assert "parameter_buffer" in work["optimizations"] and "6 alignment padding" in work["optimizations"]["parameter_buffer"]["detail"]
    plan = (tmp_path / "run" / "opennn" / "plan.txt").read_text()
    assert plan.splitlines()[0] == "bench-opennn-plan 1" and "optimizer sgd" in plan


def test_the_adapter_says_the_drivers_phases(make_spec, tmp_path):
    spec = make_spec("opennn", steps_per_epoch=3, epochs=2, warmup=2)
    spec["measurement"]["window_steps"] = 2
    code, _, log = _run(spec, tmp_path)
    assert code == 0, log
    said = [line.removeprefix("[bench-engine] phase ") for line in log.splitlines() if line.startswith("[bench-engine] phase ")]
    assert said[0] == "setup" and said[-1] == "done"
    assert said.index("warmup 0/2") < said.index("timing 0/4") < said.index("timing 4/4")  # from the events, in order


def test_a_driver_crash_keeps_what_was_measured(make_spec, tmp_path):
    spec = make_spec("opennn", steps_per_epoch=3, warmup=1)
    spec["measurement"]["window_steps"] = 1
    code, result, _ = _run(spec, tmp_path, "crash")
    assert code == 1
    assert result["status"] == "failed" and result["failure"]["kind"] == "crash"
    assert "something broke" in result["failure"]["message"]
    assert result["measurements"]["warmup_steps"] == 1 and len(result["measurements"]["windows"]) == 1


def test_a_driver_killed_by_a_signal_is_a_crash(make_spec, tmp_path):
    spec = make_spec("opennn", steps_per_epoch=3, warmup=1)
    spec["measurement"]["window_steps"] = 1
    code, result, _ = _run(spec, tmp_path, "segv")
    assert code == 1 and result["failure"]["kind"] == "crash"
    assert "SIGSEGV" in result["failure"]["message"]


def test_unsupported_and_missing_driver(make_spec, tmp_path):
    code, result, _ = _run(make_spec("opennn"), tmp_path, "unsupported")
    assert code == 1 and result["failure"]["kind"] == "unsupported" and "cannot do that" in result["failure"]["message"]
    code, result, _ = _run(make_spec("opennn"), tmp_path / "nodriver", driver=None)
    assert code == 1 and result["failure"]["kind"] == "unsupported"
    assert "bench env create opennn" in result["failure"]["message"]


def test_fewer_optimizer_updates_than_steps_fail_parity(make_spec, tmp_path):
    """OpenNN's own step counter (Adam) is what `steps` reports, so lost updates show in parity."""
    from tests.parity_docs import check_against_spec

    spec = make_spec("opennn", steps_per_epoch=3, warmup=1)
    spec["parity"]["optimizer"] = {"name": "adam", "lr": 0.001, "betas": [0.9, 0.999], "eps": 1.1920928955078125e-07, "weight_decay": 0.0}
    code, result, log = _run(spec, tmp_path, "short")
    assert code == 0, log
    assert result["work"]["steps"] == 2
    assert result["work"]["optimizations"]["optimizer_steps"]["applied"] is False
    assert any(m["field"] == "steps" for m in check_against_spec(spec, result, "cpu"))


def test_sigterm_stops_a_hanging_driver_and_writes_the_result(make_spec, tmp_path):
    spec = make_spec("opennn")
    spec_file, result_file = tmp_path / "spec.json", tmp_path / "run" / "result.json"
    spec_file.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": ADAPTER_PATH, "BENCH_FAKE_OPENNN": "hang", "BENCH_OPENNN_DRIVER": str(FAKE_DRIVER)}
    proc = subprocess.Popen([sys.executable, "-m", "bench_opennn", "--spec", str(spec_file), "--result", str(result_file)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    events = tmp_path / "run" / "opennn" / "events.txt"
    deadline = time.monotonic() + 60
    while not (events.exists() and "setup_done" in events.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 130
    result = json.loads(result_file.read_text())
    jsonschema.validate(result, load_schema("engine-result"))
    assert result["failure"]["kind"] == "interrupted"
    assert result["measurements"]["setup_s"] > 0  # setup finished before the hang
    hung = subprocess.run(["pgrep", "-f", f"fake_driver.py {tmp_path}"], capture_output=True, text=True)
    assert hung.stdout.strip() == "", "the driver outlived the adapter"


@pytest.mark.parametrize("precision,cuda,expected", [("fp32", False, "fp32"), ("tf32", False, "tf32")])
def test_precision_name_from_what_opennn_reports(precision, cuda, expected):
    sys.path.insert(0, str(REPO / "images" / "opennn"))
    from bench_opennn.results import precision_of

    applied = {"training_type": "float32", "observed_compute_dtype": "float32", "tf32_matmul": "0", "tf32_conv": "0"}
    assert precision_of(precision, cuda, applied).name == expected
    # on CUDA, OpenNN's float32 with TF32 math is bench's tf32, whatever was asked
    assert precision_of("fp32", True, {**applied, "tf32_matmul": "1", "tf32_conv": "1"}).name == "tf32"
    assert precision_of("bf16", True, {**applied, "training_type": "bfloat16"}).name == "bf16"


def test_graph_path_refuses_blocks_shorter_than_a_graph_group(make_spec):
    sys.path.insert(0, str(REPO / "images" / "opennn"))
    from bench_opennn.plan import Switches, UnsupportedSchedule, check_schedule

    from bench_engine.contract import RunSpec

    spec = make_spec("opennn", batch=4, steps_per_epoch=24, warmup=8)  # 96 samples
    spec["measurement"]["window_steps"] = 8
    check_schedule(RunSpec.from_json(spec), 96, Switches(cuda_graph=True, gpu_resident=True))  # blocks of 8, 8, 8
    spec["measurement"]["window_steps"] = 3
    with pytest.raises(UnsupportedSchedule, match="at least 8 steps"):
        check_schedule(RunSpec.from_json(spec), 96, Switches(cuda_graph=True, gpu_resident=True))
    check_schedule(RunSpec.from_json(spec), 96, Switches(cuda_graph=False, gpu_resident=True))  # eager: any block


def test_shared_init_round_trips_through_opennn_layouts():
    sys.path.insert(0, str(REPO / "images" / "opennn"))
    import numpy as np
    from bench_opennn.initload import fill, read_back

    # stem conv (OpenNN OHWI + gamma, beta; states mean, var) and the classifier (bias, [in, out]), 16-float padded
    layout = [("param", "stem_conv", 0, 0, (4, 3, 3, 2)), ("param", "stem_conv", 1, 80, (4,)), ("param", "stem_conv", 2, 96, (4,)),
              ("param", "classifier", 0, 112, (3,)), ("param", "classifier", 1, 128, (4, 3)),
              ("state", "scaling_layer", 0, 0, (2,)), ("state", "stem_conv", 0, 16, (4,)), ("state", "stem_conv", 1, 32, (4,))]
    rng = np.random.default_rng(0)
    tensors = {"conv1.weight": rng.normal(size=(4, 2, 3, 3)), "bn1.weight": rng.normal(size=4), "bn1.bias": rng.normal(size=4),
               "bn1.running_mean": rng.normal(size=4), "bn1.running_var": rng.normal(size=4),
               "fc.weight": rng.normal(size=(3, 4)), "fc.bias": rng.normal(size=3)}
    tensors = {k: v.astype(np.float32) for k, v in tensors.items()}
    params, states = np.zeros(144, np.float32), np.full(48, 7.0, np.float32)
    fill(layout, tensors, params, states)
    assert params[0] == tensors["conv1.weight"][0, 0, 0, 0] and params[1] == tensors["conv1.weight"][0, 1, 0, 0]  # OHWI: input channel fastest
    assert params[128 + 1] == tensors["fc.weight"][1, 0]  # [in, out]
    assert states[0] == 7.0  # the scaling layer's statistics are OpenNN's own
    back = read_back(layout, params, states)
    assert back.keys() == tensors.keys() and all(np.array_equal(back[k], tensors[k]) for k in tensors)
    with pytest.raises(ValueError, match=r"bn1\.bias"):
        fill(layout, {k: v for k, v in tensors.items() if k != "bn1.bias"}, params, states)
    with pytest.raises(ValueError, match="no place"):
        fill(layout, {**tensors, "layer9.0.conv1.weight": tensors["fc.bias"]}, params, states)


def _recorded_events(path: Path, spec: dict, losses: list[str]) -> None:
    """An events file as the driver writes it (images/opennn/driver/main.cpp), one line per harness block."""
    from bench_engine.harness import timing_blocks
    from bench_engine.schedule import Schedule

    lines = ["applied trainable_parameters 23528522"]
    blocks = list(timing_blocks(Schedule.from_json(spec), spec["parity"]["dataset"]["samples"]))
    assert len(blocks) == len(losses)
    for block, loss in zip(blocks, losses, strict=True):
        samples = sum(step.size for step in block.steps)
        lines.append(f"block {block.epoch} {int(block.warmup)} {len(block.steps)} {samples} 0.125 {loss}")
    lines.append(f"done {losses[-1]}")
    path.write_text("\n".join(lines) + "\n")


def test_block_losses_come_from_the_recorded_driver_events(make_spec, tmp_path):
    """The seed protocol's shape (warmup block, then multi-step windows): OpenNN has block means but no per-step losses."""
    sys.path.insert(0, str(REPO / "images" / "opennn"))
    from bench_opennn.events import parse_events
    from bench_opennn.results import block_losses, first_losses

    from tests.parity_docs import check_block_losses

    spec = make_spec("opennn", batch=16, steps_per_epoch=6, epochs=2, warmup=2)
    spec["measurement"]["window_steps"] = 3  # epoch 1: warmup [2], [3], [1]; epoch 2: [3], [3]
    events_file = tmp_path / "events.txt"
    _recorded_events(events_file, spec, ["2.302585", "2.2871", "2.2790", "2.2613", "2.2500"])
    events = parse_events(events_file)
    measurements: dict = {"block_losses": block_losses(events)}
    assert measurements["block_losses"] == [2.302585, 2.2871, 2.2790, 2.2613, 2.25]
    assert check_block_losses(spec, measurements) == []
    assert first_losses(events) == []  # blocks of several steps: no per-step record, only block means
    _recorded_events(events_file, spec, ["2.302585", "2.2871", "nan", "2.2613", "2.2500"])  # a diverged block
    [mismatch] = check_block_losses(spec, {"block_losses": block_losses(parse_events(events_file))})
    assert mismatch["field"] == "measurements.block_losses" and "block 2" in mismatch["actual"]
    events_file.write_text(events_file.read_text().split("block 1 0 1")[0])  # cut off after two blocks
    [mismatch] = check_block_losses(spec, {"block_losses": block_losses(parse_events(events_file))})
    assert mismatch["actual"] == "2 values"
