"""Data parallelism in the engine library: shard plans, merging the workers' results, the launcher.

The launcher tests run a framework-free engine (fake_dp/bench_fakedp) as real worker processes:
fast, and every failure mode is exercised for real (a worker that dies, raises or hangs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from bench_engine.api import StepBatch, UnsupportedError
from bench_engine.contract import EngineResult, RunSpec
from bench_engine.launch import merge_results
from bench_engine.shards import plan_shards, stacked_shards
from tests.conftest import run_spec

REPO = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).parent / "fake_dp"


def _spec(samples: int, per_device: int, world: int, steps: int, drop_last: bool = True) -> RunSpec:
    return run_spec(parity={"batch": {"per_device": per_device, "drop_last": drop_last}, "devices": world, "steps_per_epoch": steps})


def test_shard_plan_takes_contiguous_shares_of_every_global_batch() -> None:
    plan = plan_shards(_spec(20, 4, 2, 3, drop_last=False), 20)  # global batches 8, 8 and a kept partial 4
    assert plan.global_batch == 8 and [s.size for s in plan.steps] == [8, 8, 4]
    assert plan.slice_of(plan.steps[0], 0) == (0, 4) and plan.slice_of(plan.steps[0], 1) == (4, 4)
    assert plan.slice_of(plan.steps[2], 1) == (18, 2)  # the partial batch split evenly
    assert plan.rank_indices(0).tolist() == [0, 1, 2, 3, 8, 9, 10, 11, 16, 17]
    assert plan.rank_indices(1).tolist() == [4, 5, 6, 7, 12, 13, 14, 15, 18, 19]
    assert plan.local_starts == (0, 4, 8) and plan.shard_samples == 10
    assert plan.local(StepBatch(epoch=2, index=2, start=16, size=4)) == StepBatch(epoch=2, index=2, start=8, size=2)
    stacked = stacked_shards(np.arange(20), plan)
    assert stacked.shape == (2, 10) and stacked[1, 4:8].tolist() == [12, 13, 14, 15]
    with pytest.raises(UnsupportedError, match="does not divide"):
        plan_shards(_spec(19, 4, 2, 3, drop_last=False), 19)  # a partial batch of 3 over 2 devices


def _doc(rank: int, windows: list[list[float]], setup: float, start_wall: float, warmup: float) -> dict[str, Any]:
    return {
        "schema_version": 1, "status": "ok", "engine": "x", "run_id": "r", "environment": {"devices": [f"rank{rank}"]},
        "work": {"steps": 4, "samples": 64, "epochs": 1, "batch_global": 16, "world_size": 2},
        "measurements": {"setup_s": setup, "warmup_s": warmup, "warmup_steps": 1, "steady": {},
                         "epochs": [{"epoch": 1, "steps": 4, "samples": 64, "time_s": warmup + sum(w[2] for w in windows)}],
                         "windows": windows, "peak_memory_bytes": 100 * (rank + 1), "final_loss": 1.0 + rank},
        "_worker": {"rank": rank, "world_size": 2, "start_wall": start_wall},
    }


def test_merge_takes_the_slowest_worker_of_every_window() -> None:
    rank0 = _doc(0, [[1, 16, 1.0], [2, 32, 3.0]], setup=2.0, start_wall=100.5, warmup=5.0)
    rank1 = _doc(1, [[1, 16, 1.5], [2, 32, 2.0]], setup=1.0, start_wall=100.2, warmup=6.0)
    merged = merge_results([EngineResult.from_json(rank0), EngineResult.from_json(rank1)], launch_wall=100.0).to_json()
    m = merged["measurements"]
    assert "_worker" not in merged and merged["environment"] == rank0["environment"]
    assert m["windows"] == [[1, 16, 1.5], [2, 32, 3.0]]
    assert m["steady"] == {"steps": 3, "samples": 48, "time_s": 4.5, "throughput": 48 / 4.5}
    assert m["setup_s"] == pytest.approx(2.5)  # rank 0 became ready 2.5 s after the launcher started
    assert m["warmup_s"] == 6.0 and m["epochs"][0]["time_s"] == pytest.approx(9.5)  # the slower rank's epoch
    assert m["peak_memory_bytes"] == 200 and m["final_loss"] == 1.0
    assert [w["rank"] for w in m["workers"]] == [0, 1] and m["workers"][1]["steady_time_s"] == 3.5
    rank1["work"]["samples"] = 63
    with pytest.raises(RuntimeError, match="disagree on samples"):
        merge_results([EngineResult.from_json(rank0), EngineResult.from_json(rank1)], launch_wall=100.0)


@pytest.fixture()
def launch_fake(make_spec: Any, tmp_path: Path):
    """Run bench_fakedp over ``world`` worker processes; return (exit code, result, log, seconds)."""

    def run(world: int = 2, fault: str | None = None, delay_s: float = 0.02, grace_s: float | None = None,
            timeout: float = 120, barrier: bool = False, stall_s: float | None = None,
            hang_at_exit: bool = False) -> tuple[int, dict[str, Any] | None, str, float]:
        options: dict[str, Any] = {"delay_s": delay_s, "hang_at_exit": hang_at_exit}
        if barrier:
            (tmp_path / "barrier").mkdir()
            options["barrier"] = str(tmp_path / "barrier")
        spec = make_spec("fakedp", batch=8, steps_per_epoch=4, epochs=2, warmup=1, options=options)
        spec["parity"]["devices"] = world
        spec["parity"]["batch"]["global"] = 8 * world
        spec["measurement"]["window_steps"] = 1
        if stall_s is not None:
            spec["measurement"]["stall_s"] = stall_s
        spec_file, result_file = tmp_path / "spec.json", tmp_path / "out" / "result.json"
        spec_file.write_text(json.dumps(spec))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "images" / "common"), str(FAKE)])}
        env.pop("BENCH_FAULT", None)
        if fault:
            env["BENCH_FAULT"] = fault
        if grace_s is not None:
            env["BENCH_LAUNCH_GRACE_S"] = str(grace_s)
        clock = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "bench_fakedp", "--spec", str(spec_file), "--result", str(result_file)],
                              capture_output=True, text=True, env=env, timeout=timeout)
        elapsed = time.monotonic() - clock
        result = json.loads(result_file.read_text()) if result_file.exists() else None
        if result is not None:
            schema = json.loads((REPO / "schemas" / "engine-result.schema.json").read_text())
            jsonschema.validate(result, schema)
        assert not any(p.name.endswith(".workers") for p in result_file.parent.iterdir()), "worker files left behind"
        return proc.returncode, result, proc.stderr, elapsed

    return run


def test_launcher_merges_two_workers(launch_fake: Any) -> None:
    code, result, log, _ = launch_fake(delay_s=0.05)
    assert code == 0 and result is not None and result["status"] == "ok", log
    work, m = result["work"], result["measurements"]
    assert (work["world_size"], work["batch_per_device"], work["batch_global"]) == (2, 8, 16)
    assert (work["steps"], work["samples"], work["epochs"]) == (8, 8 * 16, 2)  # every worker's samples
    assert [w["rank"] for w in m["workers"]] == [0, 1]
    # rank 1 sleeps 0.1 s a step, rank 0 0.05 s: every window is the slower rank's
    assert all(w[2] >= 0.1 for w in m["windows"]) and m["steady"]["samples"] == 7 * 16
    assert m["steady"]["time_s"] >= m["workers"][1]["steady_time_s"] > m["workers"][0]["steady_time_s"]
    assert m["steady"]["throughput"] == pytest.approx(m["steady"]["samples"] / m["steady"]["time_s"])
    assert m["setup_s"] >= max(w["setup_s"] for w in m["workers"]) and m["final_loss"] == 0.0
    assert "[rank 0]" in log and "[rank 1]" in log and "launching 2 worker processes" in log


def test_worker_that_dies_fails_the_run(launch_fake: Any) -> None:
    code, result, log, elapsed = launch_fake(fault="1:3")
    assert code == 1 and result is not None and result["status"] == "failed", log
    failure = result["failure"]
    assert failure["kind"] == "crash" and failure["message"].startswith("rank 1 of 2 exited with code 3 without writing a result")
    assert "BENCH_FAULT: rank 1 fails at step 3" in failure["message"]  # the worker's last output lines
    assert elapsed < 60


def test_worker_exception_is_the_reason(launch_fake: Any) -> None:
    code, result, log, _ = launch_fake(fault="0:2:raise")
    assert code == 1 and result is not None and result["status"] == "failed", log
    assert result["failure"]["kind"] == "crash"
    assert result["failure"]["message"] == "rank 0 of 2: InjectedFault: injected fault on rank 0 at step 2"
    assert "InjectedFault" in result["failure"]["traceback"]
    assert result["work"]["world_size"] == 2  # rank 0's partial work is kept


def test_failed_worker_does_not_wait_for_its_exit_handlers(launch_fake: Any) -> None:
    """Rank 0 raises; its interpreter exit would block (atexit): it leaves at once after writing its document."""
    code, result, log, elapsed = launch_fake(fault="0:2:raise", hang_at_exit=True, grace_s=1.0)
    assert code == 1 and result is not None, log
    assert result["failure"]["message"] == "rank 0 of 2: InjectedFault: injected fault on rank 0 at step 2", result["failure"]
    assert elapsed < 60  # not the stall limit (300 s), not the run timeout


def test_hung_worker_is_stopped_when_another_fails(launch_fake: Any) -> None:
    """Rank 1 hangs at its 2nd step, rank 0 dies at its 3rd: the launcher stops rank 1 and reports rank 0."""
    code, result, log, elapsed = launch_fake(fault="1:2:hang,0:3", grace_s=1.0)
    assert code == 1 and result is not None and result["status"] == "failed", log
    assert result["failure"]["message"].startswith("rank 0 of 2 exited with code 3"), result["failure"]
    assert "stopping the other workers" in log
    assert elapsed < 30


def _processes_with(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_sigterm_to_the_launcher_stops_every_worker(make_spec: Any, tmp_path: Path) -> None:
    """A run whose worker hangs ends with the runtime's timeout: SIGTERM to the launcher stops every worker."""
    spec = make_spec("fakedp", batch=8, steps_per_epoch=4, epochs=1, warmup=1)
    spec["parity"]["devices"], spec["parity"]["batch"]["global"] = 2, 16
    spec_file, result_file = tmp_path / "hang-spec.json", tmp_path / "result.json"
    spec_file.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "images" / "common"), str(FAKE)]), "BENCH_FAULT": "1:2:hang"}
    proc = subprocess.Popen([sys.executable, "-m", "bench_fakedp", "--spec", str(spec_file), "--result", str(result_file)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while len(_processes_with(str(spec_file))) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2.0)  # the workers reach the hang
        assert proc.poll() is None, "the run should be stuck on the hung worker"
        proc.terminate()
        _, log = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, log
    result = json.loads(result_file.read_text())
    assert result["status"] == "failed" and result["failure"]["kind"] == "interrupted", result["failure"]
    deadline = time.monotonic() + 10
    while _processes_with(str(spec_file)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _processes_with(str(spec_file)), "worker processes survived the launcher"


STALL_S = 4.0
# after the stall limit: the stacks (DUMP_WAIT_S), SIGTERM ignored (STALL_KILL_WAIT_S), SIGKILL, polling, Python startup
STALL_MARGIN_S = 15.0


def _stall_checks(spec_dir: Path, result: dict[str, Any] | None, log: str, elapsed: float) -> dict[str, Any]:
    assert result is not None and result["status"] == "failed", log[-3000:]
    failure = result["failure"]
    assert failure["kind"] == "stalled", failure
    assert elapsed < STALL_S + STALL_MARGIN_S, (elapsed, log[-3000:])
    assert not _processes_with(str(spec_dir / "spec.json")), "a worker survived the stalled run"
    return failure


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_stalled_rank_fails_the_run_within_the_stall_limit(launch_fake: Any, tmp_path: Path) -> None:
    """Rank 1 blocks at its 3rd step (SIGTERM masked, as inside a collective); rank 0 finishes: rank 1 is named."""
    code, result, log, elapsed = launch_fake(fault="1:3:block", stall_s=STALL_S)
    assert code == 1
    failure = _stall_checks(tmp_path, result, log, elapsed)
    assert failure["message"].startswith("rank 1 of 2 stalled in timing: no progress for "), failure["message"]
    assert f"(limit measurement.stall_s = {STALL_S:g} s) after step 1/7 of the phase" in failure["message"]
    idle = float(failure["message"].split("no progress for ")[1].split(" s")[0])
    assert STALL_S <= idle <= STALL_S + 2
    assert "rank 0 done" in failure["message"]  # where the other rank was
    # the stalled rank's Python stacks, from SIGUSR1, in the log and in the failure
    assert "faulty_step" in failure["traceback"] and "[rank 1] " in log and "(most recent call first)" in log


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_rank_blocked_in_a_collective_stalls_every_rank(launch_fake: Any, tmp_path: Path) -> None:
    """Rank 1 blocks at its 3rd step, rank 0 waits for it in the (file) barrier: both stall, both are named."""
    code, result, log, elapsed = launch_fake(fault="1:3:block", barrier=True, stall_s=STALL_S)
    assert code == 1
    failure = _stall_checks(tmp_path, result, log, elapsed)
    assert failure["message"].startswith("ranks 0, 1 of 2 stalled in timing"), failure["message"]
    stacks = failure["traceback"]
    assert "--- rank 0" in stacks and "wait_for_every_rank" in stacks  # rank 0 waits in the collective
    assert "--- rank 1" in stacks and "faulty_step" in stacks  # rank 1 is where it blocked


def test_every_rank_says_its_phases(launch_fake: Any) -> None:
    code, result, log, _ = launch_fake()
    assert code == 0 and result is not None, log
    for rank in (0, 1):
        lines = [line.split("phase ", 1)[1] for line in log.splitlines() if line.startswith(f"[rank {rank}] [bench-engine] phase ")]
        # the run has 8 steps: 1 warmup, 7 timed; the last step of each phase is always said
        assert lines[0] == "setup" and lines[-1] == "done", lines
        assert lines.index("warmup 0/1") < lines.index("warmup 1/1") < lines.index("timing 0/7") < lines.index("timing 7/7"), lines
