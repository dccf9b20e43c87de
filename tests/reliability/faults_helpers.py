"""Helpers of the fault-injection tests: bench as a child process on the fake engines, the checks
every fault must pass (the artifact validates, nothing is left running, resume completes the
matrix and keeps every measured run), and the figures the suite records for the README.

Figures: every case adds one row (case, outcome, seconds) to a JSON file, by default
``reliability-figures/faults.json`` under pytest's base temporary folder, or the path in
``$BENCH_RELIABILITY_FIGURES``; the README's "Reliability" section states the last run's.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
FAKE_SCENARIO = FIXTURES / "fake_scenario.yaml"
FIGURES_ENV = "BENCH_RELIABILITY_FIGURES"
# The matrix of every case: two engines, one precision (two runs of ~1 s each).
SELECT = ("--precisions", "fp32")
RUN_IDS = ("fake-fp32-optimized-b16-d1-r1", "fake2-fp32-optimized-b16-d1-r1")


def bench_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "BENCH_ENGINE_PATH": os.pathsep.join([str(FIXTURES / "fake_engine"), str(FIXTURES / "fake_engine2")]),
           "BENCH_DATA_DIR": str(data_dir)}
    env.pop("BENCH_FAKE_FAULT", None)
    return {**env, **extra}


def write_scenario(folder: Path, timeout_s: int = 60, step_s: float = 0.0) -> Path:
    """The fake scenario (optionally slower steps, a shorter timeout) in ``folder``."""
    text = FAKE_SCENARIO.read_text().replace("timeout_s: 60", f"timeout_s: {timeout_s}")
    if step_s:
        text += f"engines:\n  fake: {{options: {{step_s: {step_s}}}}}\n  fake2: {{options: {{step_s: {step_s}}}}}\n"
    path = folder / "scenario.yaml"
    path.write_text(text)
    return path


def start_bench(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "orchestrator", *args], env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def run_bench(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def the_artifact(out: Path) -> Path | None:
    found = sorted(p for p in out.glob("fake_tiny/*") if p.is_dir() and not p.name.startswith("."))
    assert len(found) <= 1, found
    return found[0] if found else None


def records(artifact: Path) -> dict[str, dict[str, Any]]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(artifact.glob("runs/*/run.json"))}


def measured(artifact: Path) -> dict[str, str]:
    """run id -> sha256 of result.json, for every run recorded ok (what must never be lost)."""
    found = {}
    for run_id, record in records(artifact).items():
        result = artifact / "runs" / run_id / "result.json"
        if record["status"] == "ok" and result.is_file():
            found[run_id] = hashlib.sha256(result.read_bytes()).hexdigest()
    return found


def engines_left(marker: str, wait_s: float = 20.0) -> list[str]:
    """Processes whose command line mentions ``marker`` (the artifact's path) still alive after ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = []
        for proc in psutil.process_iter(["pid", "cmdline", "status"]):
            try:
                if proc.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(proc.info["cmdline"] or []):
                    alive.append(f"{proc.info['pid']}: {' '.join(proc.info['cmdline'])}")
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.2)


def validate(artifact: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_bench("results", "validate", str(artifact), env=env)


def resume_completes(artifact: Path, env: dict[str, str], before: dict[str, str]) -> dict[str, Any]:
    """Resume (no fault): every run of the matrix ok, every run measured before kept byte for byte, valid, complete."""
    proc = run_bench("scenario", "resume", str(artifact), "--json", env=env, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = records(artifact)
    assert sorted(runs) == sorted(RUN_IDS), runs.keys()
    assert {r["status"] for r in runs.values()} == {"ok"}, {k: (r["status"], r["reason"]) for k, r in runs.items()}
    after = measured(artifact)
    lost = {run_id for run_id, digest in before.items() if after.get(run_id) != digest}
    assert not lost, f"measured runs replaced or lost by resume: {lost}"
    check = validate(artifact, env)
    assert check.returncode == 0, check.stdout + check.stderr
    manifest = json.loads((artifact / "manifest.json").read_text())
    assert manifest["complete"] is True and "in_flight" not in manifest
    return runs


class Figures:
    """Rows of the suite's figures, merged into one JSON file (one key per test module)."""

    def __init__(self, path: Path, module: str) -> None:
        self.path, self.module, self.rows = path, module, []

    def add(self, case: str, outcome: str, seconds: float, **facts: Any) -> None:
        self.rows.append({"case": case, "outcome": outcome, "seconds": round(seconds, 2), **facts})

    def save(self) -> None:
        try:
            document = json.loads(self.path.read_text())
        except (OSError, ValueError):
            document = {}
        rows = document.get(self.module, []) if isinstance(document.get(self.module), list) else []
        done = {row["case"] for row in self.rows}
        document[self.module] = [row for row in rows if row["case"] not in done] + self.rows
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(document, indent=2) + "\n")


def figures_fixture(module: str):
    """A module-scoped ``figures`` fixture for a test module (saved when the module ends)."""

    @pytest.fixture(scope="module")
    def figures(tmp_path_factory: pytest.TempPathFactory):
        path = Path(os.environ.get(FIGURES_ENV) or tmp_path_factory.getbasetemp() / "reliability-figures" / "faults.json")
        recorder = Figures(path, module)
        yield recorder
        recorder.save()

    return figures
