"""Hostile environment variables: every user-facing BENCH_* variable is checked like a flag (one line
naming it, exit 2, before anything runs), and bench's internal ones are never taken from the user."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from orchestrator import envvars
from tests.reliability.hostile_support import FAKE_SCENARIO, call, fake_engines

__all__ = ["fake_engines"]
REPO = Path(__file__).resolve().parents[2]
FAKE_ENGINES = [str(REPO / "tests" / "fixtures" / "fake_engine"), str(REPO / "tests" / "fixtures" / "fake_engine2")]


def bad_engine(folder: Path, text: str) -> str:
    folder.mkdir()
    (folder / "engine.yaml").write_text(text)
    return str(folder)


CASES = {
    "a file for a folder": ("BENCH_DATA_DIR", lambda t: str(t / "file")),
    "a relative folder": ("BENCH_COMPILE_CACHE", lambda t: "relative/cache"),
    "a folder under a file": ("BENCH_ENVS_DIR", lambda t: str(t / "file" / "envs")),
    "abc for a number": ("BENCH_LAUNCH_GRACE_S", lambda t: "abc"),
    "nan for a number": ("BENCH_SLURM_POLL_S", lambda t: "nan"),
    "inf for a number": ("BENCH_SLURM_LIFELINE_S", lambda t: "inf"),
    "a negative number": ("BENCH_DIST_TIMEOUT_S", lambda t: "-5"),
    "a telemetry interval below its range": ("BENCH_TELEMETRY_INTERVAL_S", lambda t: "0.001"),
    "a bad size": ("BENCH_DOCKER_SHM_SIZE", lambda t: "8 gigs"),
    "a newline in a Slurm value": ("BENCH_SLURM_PARTITION", lambda t: "gpu\n#SBATCH --wrap=x"),
    "a bad choice": ("BENCH_SLURM_MODE", lambda t: "cloud"),
    "a missing engine folder": ("BENCH_ENGINE_PATH", lambda t: str(t / "nowhere")),
    "a relative engine folder": ("BENCH_ENGINE_PATH", lambda t: "tests/fixtures/fake_engine"),
    "a malformed engine.yaml": ("BENCH_ENGINE_PATH", lambda t: bad_engine(t / "e1", "name: [unclosed\n")),
    "an engine.yaml without module": ("BENCH_ENGINE_PATH", lambda t: bad_engine(t / "e2", "name: x\n")),
    "an engine.yaml that is a list": ("BENCH_ENGINE_PATH", lambda t: bad_engine(t / "e3", "- a\n- b\n")),
    "a driver that is not executable": ("BENCH_OPENNN_DRIVER", lambda t: str(t / "file")),
    "a lock that is a folder": ("BENCH_IMAGES_LOCK", lambda t: str(t)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_variable_is_one_line_naming_it_exit_2(case: str, tmp_path: Path, capsys, monkeypatch, fake_engines) -> None:
    name, value = CASES[case]
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv(name, value(tmp_path))
    for args in (("scenario", "validate", str(FAKE_SCENARIO)), ("results", "show", str(tmp_path))):
        code, _, err = call(capsys, monkeypatch, *args)
        assert code == 2 and err.startswith(f"error: {name}:"), (case, err)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_that_must_be_written_is_refused(tmp_path: Path, capsys, monkeypatch, fake_engines) -> None:
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o500)
    monkeypatch.setenv("BENCH_DATA_DIR", str(folder / "datasets"))
    code, _, err = call(capsys, monkeypatch, "scenario", "validate", str(FAKE_SCENARIO))
    assert code == 2 and "BENCH_DATA_DIR" in err and "not writable" in err


def test_good_values_pass(tmp_path: Path, capsys, monkeypatch, fake_engines) -> None:
    exe = tmp_path / "driver"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    good = {"BENCH_COMPILE_CACHE": str(tmp_path / "new" / "cache"), "BENCH_LAUNCH_GRACE_S": "10", "BENCH_SLURM_POLL_S": "0.5",
            "BENCH_SLURM_LIFELINE_S": "0", "BENCH_DOCKER_SHM_SIZE": "16g", "BENCH_SLURM_PARTITION": "gpu", "BENCH_SLURM_MODE": "local",
            "BENCH_ENGINE_PATH": os.pathsep.join(FAKE_ENGINES), "BENCH_OPENNN_DRIVER": str(exe),
            "BENCH_IMAGES_LOCK": str(tmp_path / "lock.json"), "BENCH_DATA_DIR": "", "BENCH_DEBUG": ""}
    for name, value in good.items():
        monkeypatch.setenv(name, value)
    code, _, err = call(capsys, monkeypatch, "scenario", "validate", str(FAKE_SCENARIO))
    assert code == 0, err


def test_an_inherited_heartbeat_variable_writes_nothing(tmp_path: Path, capsys, monkeypatch, fake_engines) -> None:
    victim = tmp_path / "victim.heartbeat"
    victim.write_bytes(b"precious content, not a heartbeat record " * 4)
    before = victim.read_bytes()
    for name, value in {"BENCH_HEARTBEAT": str(victim), "BENCH_WORKER": "1", "BENCH_PARENT_PID": "1", "BENCH_LAUNCH_WALL": "x"}.items():
        monkeypatch.setenv(name, value)
    code, _, err = call(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--engines", "fake",
                        "--precisions", "fp32", "--out", str(tmp_path / "out"))
    assert code == 0, err
    assert victim.read_bytes() == before


def test_internal_variables_are_stripped_and_refused_in_run_settings() -> None:
    from orchestrator.engines.registry import get_engine
    from orchestrator.errors import BadInput
    from orchestrator.runtimes.local import engine_env
    from orchestrator.runtimes.local_settings import LocalSettings

    os.environ["BENCH_HEARTBEAT"] = "/nonexistent/victim"
    try:
        env = engine_env(get_engine("pytorch"), LocalSettings(env={"BENCH_WORKER": "1", "OTHER": "kept"}))
    finally:
        del os.environ["BENCH_HEARTBEAT"]
    assert not envvars.INTERNAL_NAMES & set(env) and env["OTHER"] == "kept"
    with pytest.raises(BadInput, match=r"env\.BENCH_HEARTBEAT: set by bench itself"):
        envvars.refuse_internal({"BENCH_HEARTBEAT": "/x"}, "env")
    envvars.refuse_internal({"OTHER": "1"}, "env")


def test_a_launchers_workers_get_its_own_internal_values_only(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(REPO / "images" / "common"))
    from bench_engine import lifeline, progress
    from bench_engine.launch import worker_env

    assert lifeline.INTERNAL_ENV == envvars.INTERNAL_NAMES
    monkeypatch.setenv("BENCH_HEARTBEAT", str(tmp_path / "victim"))
    monkeypatch.setenv("BENCH_LAUNCH_WALL", "evil")
    record = progress.new_record(tmp_path / "rank-0.heartbeat")
    env = worker_env(0, 2, 1234, 5.0, record)
    assert env["BENCH_HEARTBEAT"] == str(record) and env["BENCH_LAUNCH_WALL"] == "5.0" and env["BENCH_PARENT_PID"] == str(os.getpid())
    assert "BENCH_HEARTBEAT" not in worker_env(0, 2, 1234, 5.0, None)
    plain = tmp_path / "plain.heartbeat"
    plain.write_bytes(b"x" * 100)
    link = tmp_path / "link.heartbeat"
    link.symlink_to(record)
    assert progress.is_record(record) and not progress.is_record(plain) and not progress.is_record(link)


def test_the_registry_names_every_bench_variable_in_the_code() -> None:
    names: set[str] = set()
    for folder in ("orchestrator", "images", "tests", ".ci"):
        for path in (REPO / folder).rglob("*"):
            if path.suffix in (".py", ".sh", ".yaml", "") and path.is_file() and "fixtures/opennn" not in str(path):
                try:
                    names |= set(re.findall(r"\bBENCH_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(errors="replace")))
                except OSError:
                    continue
    unknown = {n for n in names if (n not in envvars.REGISTRY and not n.startswith("BENCH_SLURM_")) or n == "BENCH_SLURM_"}
    assert unknown <= {"BENCH_PROBE"}, sorted(unknown)  # BENCH_PROBE: a marker of the image probe's output, not a variable


def test_the_readme_table_is_the_registrys() -> None:
    readme = (REPO / "README.md").read_text()
    assert envvars.markdown_table() in readme, "README's variable table differs: python3 -m orchestrator.envvars"


def test_the_registry_module_prints_the_table() -> None:
    import subprocess

    out = subprocess.run([sys.executable, "-m", "orchestrator.envvars"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == envvars.markdown_table()
