"""Progress on stderr: the pace (steps/s, samples/s, ETA) of a phase, the time the runs left take, the warning
before a full-size run on a CPU, and --json keeping stdout one JSON document while progress goes to stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.cli.pace import Mark, Pace, duration_text
from orchestrator.cli.phases import PhaseBoard
from orchestrator.cli.reporter import RichReporter
from orchestrator.host.gpus import GpuFacts, NvmlSnapshot
from orchestrator.run.runlength import cpu_run_warning, matrix_length, runs_on_cpu
from orchestrator.scenario import RunPlan, expand, load_scenario
from tests.core.cli_helpers import FAKE_SCENARIO, run_cli
from tests.typed_docs import record_of

SEED = str(Path(__file__).resolve().parents[2] / "scenarios" / "cifar_resnet50.yaml")

NO_GPU = NvmlSnapshot(False, "no NVIDIA driver")
ONE_GPU = NvmlSnapshot(True, None, (GpuFacts(0, "NVIDIA H200", *([None] * 14), False),))
PLAN = RunPlan("jax", "fp32", "optimized", 128, 1, 1)


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (42.4, "42s"), (59.6, "1m00s"), (185, "3m05s"), (3600, "1h00m"),
                                               (7620, "2h07m"), (50 * 3600, "2d02h"), (-3, "0s")])
def test_duration_text(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_pace_between_two_marks() -> None:
    pace = Pace.between(Mark(0, 100.0), Mark(150, 110.0), 748)
    assert pace is not None and pace.rate == 15.0 and pace.eta_s == pytest.approx(598 / 15)
    assert pace.text() == "15.0 steps/s, ETA 40s"
    assert pace.text(128) == "15.0 steps/s (1,920.0 samples/s), ETA 40s"
    assert Pace.between(Mark(0, 100.0), Mark(0, 105.0), 748) is None  # no step timed yet
    assert Pace.between(Mark(5, 100.0), Mark(5, 100.0), 748) is None
    assert Pace.between(Mark(0, 100.0), Mark(4, 100.2), 748) is None  # two lines read together: no rate yet


def test_board_paces_timing_from_its_first_line() -> None:
    board = PhaseBoard()
    board.update("[bench-engine] phase timing 0/760", now=10.0)
    assert board.pace() is None
    board.update("[bench-engine] phase timing 40/760", now=30.0)
    pace = board.pace()
    assert pace is not None and pace.rate == 2.0 and pace.eta_s == 360.0


def test_board_paces_warmup_from_its_first_step() -> None:
    """The first warmup step includes compilation: the rate starts after it."""
    board = PhaseBoard()
    board.update("[bench-engine] phase warmup 0/20", now=0.0)
    board.update("[bench-engine] phase warmup 1/20", now=60.0)  # a minute of compilation
    assert board.pace() is None
    board.update("[bench-engine] phase warmup 11/20", now=65.0)
    assert board.pace() == Pace(2.0, 4.5)
    board.update("[bench-engine] phase timing 0/100", now=70.0)  # a new phase starts its own pace
    assert board.pace() is None


def test_board_paces_the_slowest_rank() -> None:
    board = PhaseBoard()
    for rank, done in ((0, 50), (1, 20)):
        board.update(f"[rank {rank}] [bench-engine] phase timing 0/100", now=0.0)
        board.update(f"[rank {rank}] [bench-engine] phase timing {done}/100", now=10.0)
    assert board.pace() == Pace(2.0, 40.0)
    assert board.text() == "rank 0: timing 50/100, rank 1: timing 20/100"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_plain_progress_lines_show_rate_and_eta(capsys) -> None:
    clock = Clock()
    reporter = RichReporter(live=False, clock=clock)
    reporter.run_started(1, 3, PLAN)
    reporter.engine_line("[bench-engine] phase timing 0/760")
    clock.now += 40.0
    reporter.engine_line("[bench-engine] phase timing 80/760")  # 30 s after the last printed line: printed again
    err = capsys.readouterr().err
    assert "[1/3] jax fp32 optimized b128 x1 #1  timing 0/760\n" in err
    assert "timing 80/760  2.0 steps/s (256.0 samples/s), ETA 5m40s" in err
    reporter.run_finished(record_of({"run_id": PLAN.run_id, "engine": "jax", "precision": "fp32", "status": "ok", "throughput": 256.0,
                                     "wall_s": 400.0}))
    assert "(400.0s; about 13m20s for 2 more runs)" in capsys.readouterr().err
    reporter.run_started(3, 3, PLAN)
    reporter.run_finished(record_of({"run_id": PLAN.run_id, "engine": "jax", "precision": "fp32", "status": "ok", "throughput": 256.0,
                                     "wall_s": 400.0}))
    assert "(400.0s)" in capsys.readouterr().err  # the last run: nothing left


def test_warn_prints_a_warning_line(capsys) -> None:
    RichReporter(live=False).warn("host busy")
    assert capsys.readouterr().err == "warning: host busy\n"
    RichReporter(quiet=True, live=False).warn("host busy")
    assert capsys.readouterr().err == ""


def test_cpu_warning_states_the_steps_of_a_full_size_run() -> None:
    scenario = load_scenario(SEED)
    plans = expand(scenario)  # 3 engines x fp32, bf16: 6 runs of 2 epochs x 50,000 // 128 steps
    assert matrix_length(scenario, plans, 50000).steps == (780,) * 6
    warning = cpu_run_warning(scenario, plans, 50000, "cpu", "local", ONE_GPU)
    assert warning is not None and warning.startswith("full-size run on a CPU: 6 runs, 780 steps each (4,680 steps, 599,040 samples) of "
                                                      "resnet50_v1.5 training; this may take hours")
    assert "--smoke" in warning
    assert cpu_run_warning(scenario, plans, 50000, "auto", "docker", NO_GPU) == warning  # auto without a GPU runs on the CPU


@pytest.mark.parametrize(("device", "runtime", "gpus", "smoke"), [
    ("cpu", "local", NO_GPU, True),  # --smoke
    ("cuda", "local", ONE_GPU, False),  # --device cuda
    ("auto", "local", ONE_GPU, False),  # auto on a GPU host
    ("auto", "slurm", NO_GPU, False),  # the compute nodes' GPUs are not this host's
])
def test_cpu_warning_stays_quiet(device: str, runtime: str, gpus: NvmlSnapshot, smoke: bool) -> None:
    scenario = load_scenario(SEED, smoke=smoke)
    assert cpu_run_warning(scenario, expand(scenario), 50000, device, runtime, gpus) is None
    assert runs_on_cpu(device, runtime, gpus) is (device == "cpu")


@pytest.mark.usefixtures("fake_engines")
def test_json_run_keeps_stdout_json_and_shows_progress_on_stderr(capsys, monkeypatch, tmp_path) -> None:
    from orchestrator.host import gpus

    monkeypatch.setattr(gpus, "nvml_snapshot", lambda: NO_GPU)
    code, out, err = run_cli(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--json",
                             "--engines", "fake", "--precisions", "fp32", "--out", str(tmp_path / "out"))
    assert code == 0, err
    document = json.loads(out)  # stdout: the one JSON document, nothing else
    assert document["counts"] == {"ok": 1}
    assert "[1/1] fake fp32 optimized b16 x1 #1  timing 0/" in err and "[1/1] fake fp32 optimized b16 x1 #1  ok" in err
    assert "warning: full-size run on a CPU: 1 run, 8 steps each" in err
    assert "warning: fake fp32 optimized b16 x1: 1 repeat: no spread; use --repeats 3+" in err  # the summary's warnings
    assert document["groups"][0]["warning_ids"][0] == "single_repeat"


@pytest.mark.usefixtures("fake_engines")
def test_smoke_run_draws_no_cpu_warning(capsys, monkeypatch, tmp_path) -> None:
    from orchestrator.host import gpus

    monkeypatch.setattr(gpus, "nvml_snapshot", lambda: NO_GPU)
    code, out, err = run_cli(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--json", "--smoke",
                             "--engines", "fake", "--precisions", "fp32", "--out", str(tmp_path / "out"))
    assert code == 0, err
    assert json.loads(out)["smoke"] is True
    assert "full-size run on a CPU" not in err and "timing 0/" in err
