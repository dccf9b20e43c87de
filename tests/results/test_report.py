"""``bench results report``: Markdown, CSV, and the HTML page rendered by headless Chromium."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.artifacts.manifest import file_sha256
from tests.results.helpers import run_cli

RUNS = {("pytorch", "bf16"): [100.0, 104.0, 98.0], ("pytorch", "fp32"): [50.0, 51.0, 49.0],
        ("jax", "bf16"): [180.0, 185.0, 178.0], ("jax", "fp32"): [60.0, None, 61.0]}
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]


def chromium() -> str:
    """The Chromium binary; skip when absent unless BENCH_REQUIRE_CHROMIUM=1 (then fail)."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("BENCH_REQUIRE_CHROMIUM") == "1":
        pytest.fail("BENCH_REQUIRE_CHROMIUM=1 but no chromium binary on PATH (apt-get install -y chromium)")
    pytest.skip("chromium is not installed (apt-get install -y chromium)")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """One synthetic artifact with telemetry and its report (built once for the module)."""
    from orchestrator.reports import build_report, default_report_dir, load_report_data
    from tests.results.helpers import build_artifact

    artifact = build_artifact(tmp_path_factory.mktemp("report") / "results", RUNS, telemetry_power=250.0)
    before = {p: file_sha256(p) for p in artifact.rglob("*") if p.is_file()}
    data = load_report_data(artifact)
    out = default_report_dir(artifact, data.summary.scenario, data.artifact_id)
    files = build_report(data, out, html=True, artifact_root=artifact)
    assert {p: file_sha256(p) for p in artifact.rglob("*") if p.is_file()} == before  # never modified
    return artifact, out, {k: str(v) for k, v in files.items()}


def test_markdown(report: tuple[Path, Path, dict[str, str]]) -> None:
    _, out, files = report
    text = Path(files["markdown"]).read_text()
    for heading in ("# Benchmark report: synthetic", "## Runs", "## Throughput statistics per group", "## Cross-engine ratios",
                    "## Setup, warmup and latency", "## GPU telemetry and energy", "## Environment", "### Engines", "### GPUs used"):
        assert heading in text, heading
    assert "| jax | bf16 | optimized | 32 | 1 | 3/3 | 180.0 |" in text
    assert "| bf16 | optimized | 32 | 1 | jax | pytorch | 1.80x | " in text
    assert "![Throughput](plot-throughput.png)" in text and (out / "plot-throughput.png").read_bytes()[:4] == b"\x89PNG"
    assert "crash: synthetic failure" in text


def test_csv_export(report: tuple[Path, Path, dict[str, str]]) -> None:
    """runs.csv: a header and one row per run, numbers as plain decimals; pandas.read_csv reads it as is."""
    _, _, files = report
    with open(files["runs_csv"], newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 12
    assert rows[0]["run_id"] == "pytorch-bf16-optimized-b32-d1-r1" and float(rows[0]["throughput"]) == 100.0
    failed = next(r for r in rows if r["status"] == "failed")
    assert failed["throughput"] == "" and failed["reason"] == "crash: synthetic failure"
    assert float(rows[0]["energy_per_sample_j"]) == pytest.approx(250.0 * 2.0 / 192)
    with open(files["groups_csv"], newline="") as handle:
        groups = list(csv.DictReader(handle))
    assert len(groups) == 4 and float(groups[0]["median"]) == 100.0 and float(groups[0]["interval_low"]) <= 100.0
    assert groups[0]["interval_kind"] == ("ci95" if int(groups[0]["n"]) >= 5 else "range")


def test_csv_with_pandas(report: tuple[Path, Path, dict[str, str]]) -> None:
    pandas = pytest.importorskip("pandas")
    frame = pandas.read_csv(report[2]["runs_csv"])
    assert len(frame) == 12 and frame["throughput"].dtype.kind == "f" and frame["repeat"].dtype.kind == "i"


def test_html_in_chromium(report: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    browser = chromium()
    html = Path(report[2]["html"])
    text = html.read_text()
    assert not re.search(r"(src|href)=\"(https?:|//)", text)  # self-contained
    assert text.count("<svg") == 3
    profile = tmp_path / "chromium-profile"
    dom = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom",
                          html.as_uri()], capture_output=True, text=True, timeout=90)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-plots-rendered="3/3"' in dom.stdout  # the page's load handler saw 3 laid-out plots
    for key in ("throughput", "steps", "telemetry"):
        assert f'data-plot="{key}"' in dom.stdout
    assert dom.stdout.count('data-table="') >= 8
    shot = tmp_path / "shot.png"
    subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--window-size=1280,2000", f"--screenshot={shot}",
                    html.as_uri()], capture_output=True, timeout=90, check=True)
    from PIL import Image

    with Image.open(shot) as image:
        assert image.size == (1280, 2000)
        colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
        assert colours is None or len(colours) > 50  # text, tables and plots, not a blank page


def test_report_options(make_artifact: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                        capsys: pytest.CaptureFixture) -> None:
    artifact = make_artifact({("pytorch", "bf16"): [100.0]})
    before = {p: file_sha256(p) for p in artifact.rglob("*") if p.is_file()}
    code, out, err = run_cli(["results", "report", artifact, "--html", "--json"], monkeypatch, capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert Path(doc["out"]) == artifact.parents[1] / "reports" / artifact.parent.name / f"{artifact.name}-report"  # the documented default
    assert set(doc["files"]) >= {"markdown", "runs_csv", "groups_csv", "html"}
    assert {p: file_sha256(p) for p in artifact.rglob("*") if p.is_file()} == before  # never modified
    code, _, err = run_cli(["results", "report", artifact, "--out", artifact / "reports"], monkeypatch, capsys)
    assert code == 2 and "inside the artifact" in err
    code, out, err = run_cli(["results", "report", artifact, "--out", tmp_path / "r", "--json"], monkeypatch, capsys)
    assert code == 0, err
    files = json.loads(out)["files"]
    assert "html" not in files and (tmp_path / "r" / "report.md").is_file()
    text = (tmp_path / "r" / "report.md").read_text()
    assert "No GPU telemetry to plot (not recorded)." in text
    code, _, err = run_cli(["results", "report", tmp_path / "nope"], monkeypatch, capsys)
    assert code == 2


def test_report_from_archive(make_artifact: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture) -> None:
    from orchestrator.artifacts.archive import create_archive

    archive = create_archive(make_artifact(RUNS), tmp_path / "a.tar.gz")
    code, out, err = run_cli(["results", "report", archive, "--html", "--json"], monkeypatch, capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert Path(doc["out"]).parents[1] == tmp_path / "reports" and Path(doc["files"]["html"]).is_file()


def test_report_without_matplotlib(make_artifact: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture) -> None:
    from orchestrator.reports import plots

    monkeypatch.setattr(plots, "matplotlib_available", lambda: (False, "plots need matplotlib (missing); pip install matplotlib"))
    code, _, err = run_cli(["results", "report", make_artifact(RUNS), "--html", "--out", tmp_path / "r"], monkeypatch, capsys)
    assert code == 0, err
    assert "plots need matplotlib" in (tmp_path / "r" / "report.md").read_text()
    page = (tmp_path / "r" / "report.html").read_text()
    assert "plots need matplotlib" in page and "<svg" not in page
    assert not list((tmp_path / "r").glob("*.png"))
