"""CLI behaviour: one-line errors with exit code 2, --json output, env."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.cli_helpers import assert_one_line_error, run_cli

SEED = str(Path(__file__).resolve().parents[2] / "scenarios" / "cifar_resnet50.yaml")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["scenario", "validate", "/no/such.yaml"], ["/no/such.yaml", "not found"]),
        (["scenario", "run", SEED, "--engines", "caffe", "--dry-run"], ["--engines", "caffe"]),
        (["scenario", "run", SEED, "--device", "tpu", "--dry-run"], ["--device"]),
        (["scenario", "run", SEED, "--set", "batch.size=zero", "--dry-run"], ["workload.batch.size"]),
        (["scenario", "run", SEED, "--runtime", "kubernetes", "--engines", "pytorch"], ["--runtime", "kubernetes"]),
        (["results", "show", "/no/artifact"], ["/no/artifact"]),
        (["results", "validate", "/tmp"], ["not a bench artifact"]),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, monkeypatch, data_dir, args, needles):
    code, _, err = run_cli(capsys, monkeypatch, *args)
    assert_one_line_error(code, err, *needles)


def test_cuda_requested_without_gpu(capsys, monkeypatch, data_dir, tmp_path):
    from orchestrator.host import gpus

    monkeypatch.setattr(gpus, "nvml_snapshot", lambda: gpus.NvmlSnapshot(False, "no NVIDIA driver"))
    code, _, err = run_cli(capsys, monkeypatch, "scenario", "run", SEED, "--smoke", "--engines", "pytorch", "--device", "cuda",
                           "--runtime", "local", "--out", str(tmp_path))
    assert_one_line_error(code, err, "--device cuda", "no GPU")


def test_unusable_interpreter_is_bad_input(capsys, monkeypatch, data_dir, tmp_path):
    code, _, err = run_cli(capsys, monkeypatch, "scenario", "run", SEED, "--smoke", "--engines", "pytorch", "--runtime", "local",
                           "--python", "/no/python3", "--out", str(tmp_path))
    assert_one_line_error(code, err, "/no/python3")


def test_show_json_lists_the_matrix(capsys, monkeypatch):
    code, out, _ = run_cli(capsys, monkeypatch, "scenario", "show", SEED, "--json", "--repeats", "2")
    document = json.loads(out)
    assert code == 0 and len(document["runs"]) == 12


def test_list_and_validate(capsys, monkeypatch):
    code, out, _ = run_cli(capsys, monkeypatch, "scenario", "list", "--json")
    assert code == 0 and "cifar_resnet50" in [row["name"] for row in json.loads(out)]
    code, out, _ = run_cli(capsys, monkeypatch, "scenario", "validate", SEED)
    assert code == 0 and "valid" in out


def test_env_reports_no_gpu_plainly(capsys, monkeypatch):
    code, out, _ = run_cli(capsys, monkeypatch, "env", "--json")
    facts = json.loads(out)
    assert code == 0
    assert facts["python"] == sys.version.split()[0]
    assert {"cpu_model", "cpu_affinity", "governors", "boost", "load_avg"} <= set(facts["cpu"])  # the run records' host block
    usable = {row["engine"]: row["usable"] for row in facts["engines"]}
    assert {k: usable[k] for k in ("pytorch", "jax", "tensorflow")} == {"pytorch": True, "jax": True, "tensorflow": True}, facts["engines"]
    opennn = next(row for row in facts["engines"] if row["engine"] == "opennn")  # compiled: usable once built, else says why
    assert opennn["usable"] or "bench env create opennn" in opennn["reason"]
    if not facts["nvml"]["gpus"]:
        assert facts["nvml"]["reason"]


def test_console_script_is_installed():
    proc = subprocess.run(["bench", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("bench ")


def test_relative_out_folder_reaches_the_engine(capsys, monkeypatch, data_dir, tmp_path):
    """A relative --out is the caller's: the engine, started in another folder, still finds its spec (seen on the H200)."""
    from tests.core.cli_helpers import FAKE_SCENARIO, use_fake_engines

    use_fake_engines(monkeypatch)
    monkeypatch.chdir(tmp_path)
    code, _out, err = run_cli(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--out", "rel/out")
    assert code == 0, err
    records = [json.loads(p.read_text()) for p in (tmp_path / "rel" / "out").glob("*/*/runs/*/run.json")]
    assert records and all(r["status"] == "ok" for r in records)


def test_command_tree_is_registered_explicitly():
    """app.py's COMMAND_GROUPS, with the commands the extension modules add, in a fixed order."""
    import typer.main

    from orchestrator.cli.app import app

    root = typer.main.get_command(app)
    tree = {name: list(group.commands) for name, group in root.commands.items()}
    assert tree == {"data": ["prepare", "list"], "env": ["create"], "image": ["build", "bump", "list", "inspect"],
                    "results": ["show", "validate", "compare", "report", "archive", "publish", "list", "history"],
                    "scenario": ["run", "validate", "show", "list", "resume"]}


def test_run_and_resume_share_the_slurm_options():
    import typer.main

    from orchestrator.cli.app import app

    scenario = typer.main.get_command(app).commands["scenario"]

    def slurm(command: str) -> list[tuple[tuple[str, ...], str | None]]:
        return [(tuple(p.opts), p.help) for p in scenario.commands[command].params if any(o.startswith("--slurm-") for o in p.opts)]

    assert len(slurm("run")) == 9 and slurm("run") == slurm("resume")  # --slurm-max-concurrent the ninth


def test_the_command_ignores_a_signal_that_comes_after_it_is_done() -> None:
    """A SIGTERM/SIGHUP/SIGINT after the last write, while the interpreter exits, must not kill bench by the default
    action (the exit status would say killed although everything was written); in-process main() leaves them alone."""
    import signal
    import subprocess
    import sys

    probe = ("import signal\nfrom orchestrator.cli.app import {fn}\ntry:\n    {fn}()\nexcept SystemExit:\n    pass\n"
             "print([signal.getsignal(s) == signal.SIG_IGN for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)])")
    def default_signals() -> None:  # the child starts with the default actions, whatever this test runner inherited (nohup)
        for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(number, signal.SIG_DFL)

    for fn, expected in (("entry", "[True, True, True]"), ("main", "[False, False, False]")):
        done = subprocess.run([sys.executable, "-c", probe.format(fn=fn), "scenario", "list"], capture_output=True, text=True, timeout=60,
                              preexec_fn=default_signals)
        assert done.stdout.strip().splitlines()[-1] == expected, done.stdout + done.stderr
