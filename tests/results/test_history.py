"""``bench results list``, ``latest`` as an artifact, ``bench results history`` and the artifact label (``--label``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.artifacts import Artifact, write_manifest
from orchestrator.artifacts.label import relabel
from orchestrator.artifacts.validate import validate_artifact
from orchestrator.cli.console import out as out_console
from orchestrator.written import note_written
from tests.results.helpers import run_cli

OLD, MID, NEW = "20260301T080000Z-aaa111", "20260302T080000Z-bbb222", "20260303T080000Z-ccc333"
V210, V211 = {"framework_version": "2.10.0"}, {"framework_version": "2.11.0"}


@pytest.fixture()
def results(make_artifact: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three artifacts of one scenario (PyTorch 2.10 twice, then 2.11: +5% fp32) and one of another; bench's results folder."""
    make_artifact({("pytorch", "fp32"): [100.0, 98.0, 102.0], ("jax", "fp32"): [50.0, 51.0, 49.0]}, artifact_id=OLD, environment=V210)
    relabel(make_artifact({("pytorch", "fp32"): [100.0, 99.0, 101.0], ("jax", "fp32"): [50.0, None, 49.0]}, artifact_id=MID,
                          environment=V210), "torch 2.10 baseline")
    relabel(make_artifact({("pytorch", "fp32"): [105.0, 104.0, 106.0], ("jax", "fp32"): [60.0, 61.0, 59.0]}, artifact_id=NEW,
                          environment=V211, telemetry_power=300.0), "torch 2.11 image")
    make_artifact({("pytorch", "bf16"): [10.0]}, scenario="other", artifact_id="20260201T000000Z-ddd444")
    root = tmp_path / "results"
    monkeypatch.setattr("orchestrator.paths.default_results_dir", lambda: root)
    return root


def _listed(root: Path, monkeypatch, capsys, *extra: str) -> list[dict]:
    code, out, err = run_cli(["results", "list", root, "--json", *extra], monkeypatch, capsys)
    assert code == 0, err
    return json.loads(out)["artifacts"]


def test_list_is_newest_first_with_runs_engines_gpu_and_label(results: Path, monkeypatch, capsys) -> None:
    rows = _listed(results, monkeypatch, capsys)
    assert [r["artifact_id"] for r in rows] == [NEW, MID, OLD, "20260201T000000Z-ddd444"]
    new, mid, old, other = rows
    assert (new["scenario"], other["scenario"]) == ("synthetic", "other")
    assert new["time"] == "2026-03-03T08:00:00Z"
    assert (mid["runs_ok"], mid["runs_total"]) == (5, 6)  # one failed jax run
    assert new["engines"] == ["jax", "pytorch"]
    assert new["gpu"] == "NVIDIA H200" and old["gpu"] is None  # the GPU the run records saw, none without telemetry
    assert (new["label"], mid["label"], old["label"]) == ("torch 2.11 image", "torch 2.10 baseline", None)
    assert all(r["valid"] and r["problem"] is None for r in rows)
    assert [r["artifact_id"] for r in _listed(results, monkeypatch, capsys, "--scenario", "other")] == ["20260201T000000Z-ddd444"]


def test_list_table(results: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(out_console, "width", 120)
    code, out, _err = run_cli(["results", "list"], monkeypatch, capsys)  # bench's results folder by default
    assert code == 0
    lines = out.splitlines()
    assert "4 artifact(s)" in lines[0] and "newest first" in lines[0]
    body = [line for line in lines if "2026" in line and "artifact(s)" not in line]
    assert [next(part for part in line.split() if part.startswith("2026") and "T" in part) for line in body] == [
        NEW, MID, OLD, "20260201T000000Z-ddd444"]
    assert "torch 2.11 image" in body[0] and "5/6" in body[1] and "jax, pytorch" in body[0]


def test_an_unusable_artifact_is_listed_with_its_problem(results: Path, monkeypatch, capsys) -> None:
    (results / "synthetic" / MID / "summary.json").write_text("{}\n")  # changed after bench wrote it
    (results / "synthetic" / "20260304T000000Z-eee555").mkdir()  # no manifest
    broken = results / "synthetic" / "20260305T000000Z-fff666"
    broken.mkdir()
    (broken / "manifest.json").write_text("{not json")
    rows = {r["artifact_id"]: r for r in _listed(results, monkeypatch, capsys)}
    assert not rows[MID]["valid"] and "summary.json: sha256 differs from the manifest" in rows[MID]["problem"]
    assert rows["20260304T000000Z-eee555"]["problem"] == "not a bench artifact (no manifest.json)"
    assert rows["20260305T000000Z-fff666"]["problem"].startswith("manifest.json: invalid")
    assert rows[NEW]["valid"] and rows[OLD]["valid"]
    monkeypatch.setattr(out_console, "width", 200)
    code, out, err = run_cli(["results", "list", results], monkeypatch, capsys)
    assert code == 0 and "Traceback" not in err
    assert "invalid" in out and "not a bench artifact (no manifest.json)" in out


def test_validate_finds_what_the_cheap_listing_cannot(results: Path, monkeypatch, capsys) -> None:
    log = results / "synthetic" / OLD / "runs" / "jax-fp32-optimized-b32-d1-r1" / "engine.log"
    log.write_text("changed\n")
    assert _listed(results, monkeypatch, capsys, "--scenario", "synthetic")[2]["valid"]  # the summary and manifest are intact
    old = _listed(results, monkeypatch, capsys, "--scenario", "synthetic", "--validate")[2]
    assert old["artifact_id"] == OLD and not old["valid"] and "engine.log: sha256 differs" in old["problem"]


def test_an_incomplete_artifact_without_summary(results: Path, monkeypatch, capsys) -> None:
    folder = results / "synthetic" / "20260306T000000Z-abcdef"
    (folder / "runs").mkdir(parents=True)
    write_manifest(Artifact(folder, "synthetic", folder.name), complete=False)
    row = _listed(results, monkeypatch, capsys)[0]
    assert row["artifact_id"] == folder.name and row["complete"] is False and not row["valid"]
    assert "no summary.json yet" in row["problem"]
    code, out, _ = run_cli(["results", "list", results], monkeypatch, capsys)
    assert code == 0 and "incomplete" in out


def test_an_archive_is_listed_and_latest_prefers_its_folder(results: Path, monkeypatch, capsys) -> None:
    from orchestrator.artifacts.archive import create_archive

    archive = create_archive(results / "synthetic" / NEW)
    assert archive.parent == results / "archives" / "synthetic"
    rows = [r for r in _listed(results, monkeypatch, capsys) if r["artifact_id"] == NEW]
    assert [r["archive"] for r in rows] == [False, True]
    assert rows[1]["valid"] and rows[1]["label"] == "torch 2.11 image" and rows[1]["path"] == str(archive)
    code, _out, err = run_cli(["results", "show", "latest~1", "--scenario", "synthetic", "--json"], monkeypatch, capsys)
    assert code == 0 and err.strip().endswith(f"synthetic/{MID}")  # the one before the newest, not the newest's archive


def test_show_latest(results: Path, monkeypatch, capsys) -> None:
    code, out, err = run_cli(["results", "show", "latest", "--json"], monkeypatch, capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["artifact_id"] == NEW and doc["label"] == "torch 2.11 image"
    assert f"latest: {results / 'synthetic' / NEW}" in err
    for argument, expected in ((f"{results}/latest~2", OLD), ("other/latest", "20260201T000000Z-ddd444"),
                               (f"{results / 'synthetic'}/latest~1", MID)):
        code, out, err = run_cli(["results", "show", argument, "--json"], monkeypatch, capsys)
        assert code == 0, err
        assert json.loads(out)["artifact_id"] == expected
    code, out, _ = run_cli(["results", "show", "latest", "--scenario", "other"], monkeypatch, capsys)
    assert code == 0 and "20260201T000000Z-ddd444" in out
    code, out, _ = run_cli(["results", "show", "latest"], monkeypatch, capsys)
    assert code == 0 and out.startswith("label: torch 2.11 image\n")


def test_latest_skips_an_unusable_artifact_and_says_when_there_is_none(results: Path, monkeypatch, capsys) -> None:
    (results / "synthetic" / NEW / "summary.json").write_text("{}\n")
    code, out, _ = run_cli(["results", "show", "latest", "--scenario", "synthetic", "--json"], monkeypatch, capsys)
    assert code == 0 and json.loads(out)["artifact_id"] == MID
    code, _, err = run_cli(["results", "show", "latest~5", "--scenario", "synthetic"], monkeypatch, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "2 usable artifact(s)" in err and "Traceback" not in err
    code, _, err = run_cli(["results", "show", results / "synthetic" / NEW, "--scenario", "synthetic"], monkeypatch, capsys)
    assert code == 2 and "--scenario" in err


def test_latest_in_validate_compare_and_report(results: Path, monkeypatch, capsys, tmp_path: Path) -> None:
    code, out, _ = run_cli(["results", "validate", "synthetic/latest"], monkeypatch, capsys)
    assert code == 0 and NEW in out
    code, out, err = run_cli(["results", "compare", "synthetic/latest~2", "synthetic/latest", "--json"], monkeypatch, capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["a"]["artifact_id"], doc["b"]["artifact_id"]) == (OLD, NEW)
    code, out, err = run_cli(["results", "report", "latest", "--out", tmp_path / "report", "--json"], monkeypatch, capsys)
    assert code == 0, err
    assert json.loads(out)["artifact"] == str(results / "synthetic" / NEW)


def _history(monkeypatch, capsys, *args: str) -> dict:
    code, out, err = run_cli(["results", "history", "synthetic", "--json", *args], monkeypatch, capsys)
    assert code == 0, err
    return json.loads(out)


def test_history_follows_each_cell_across_framework_versions(results: Path, monkeypatch, capsys) -> None:
    doc = _history(monkeypatch, capsys)
    assert [a["artifact_id"] for a in doc["artifacts"]] == [OLD, MID, NEW]  # oldest first; the other scenario left out
    torch = [p for p in doc["points"] if p["engine"] == "pytorch"]
    assert [p["artifact_id"] for p in torch] == [OLD, MID, NEW]
    assert [p["median"] for p in torch] == [100.0, 100.0, 105.0]
    assert [p["framework"] for p in torch] == ["PyTorch 2.10.0", "PyTorch 2.10.0", "PyTorch 2.11.0"]
    assert [p["label"] for p in torch] == [None, "torch 2.10 baseline", "torch 2.11 image"]
    assert torch[0]["change_pct"] is None and torch[1]["change_pct"] == pytest.approx(0.0)
    assert torch[2]["change_pct"] == pytest.approx(5.0) and torch[2]["within_spread"] is False
    assert torch[2]["interval"] == {"kind": "range", "low": 104.0, "high": 106.0}
    jax = [p for p in doc["points"] if p["engine"] == "jax"]
    assert [(p["n"], p["n_total"]) for p in jax] == [(3, 3), (2, 3), (3, 3)]
    assert jax[1]["change_pct"] == pytest.approx(-1.0) and jax[1]["within_spread"] is True
    assert doc["transitions"] == [
        "jax fp32: PyTorch 2.10.0 -> PyTorch 2.11.0: +21.2% (2026-03-02 08:00 -> 2026-03-03 08:00)",
        "pytorch fp32: PyTorch 2.10.0 -> PyTorch 2.11.0: +5.0% (2026-03-02 08:00 -> 2026-03-03 08:00)"]
    assert doc["warnings"] == ["the artifacts ran on different GPUs: NVIDIA H200, none"]


def test_history_filters_and_metrics(results: Path, monkeypatch, capsys) -> None:
    doc = _history(monkeypatch, capsys, "--engine", "pytorch", "--precision", "fp32", "--batch", "32", "--devices", "1")
    assert {p["engine"] for p in doc["points"]} == {"pytorch"} and len(doc["points"]) == 3
    assert _history(monkeypatch, capsys, "--engine", "jax,tensorflow")["points"][0]["engine"] == "jax"
    assert _history(monkeypatch, capsys, "--batch", "64")["points"] == []
    energy = _history(monkeypatch, capsys, "--metric", "energy", "--engine", "pytorch")
    assert energy["metric"] == "energy" and [p["median"] is None for p in energy["points"]] == [True, True, False]
    code, _, err = run_cli(["results", "history", "synthetic", "--metric", "speed"], monkeypatch, capsys)
    assert code == 2 and "--metric" in err and "throughput" in err
    code, _, err = run_cli(["results", "history", "nosuch"], monkeypatch, capsys)
    assert code == 2 and "nosuch" in err and "no artifacts" in err


def test_history_table(results: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(out_console, "width", 80)
    code, out, err = run_cli(["results", "history", "synthetic", "--engine", "pytorch"], monkeypatch, capsys)
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.startswith("pytorch")]
    assert len(rows) == 3 and all(len(line) <= 80 for line in out.splitlines()), out
    assert "2.10.0" in rows[0] and "2.11.0" in rows[2] and "+5.0%" in rows[2] and "100" in rows[0]
    assert "version pytorch fp32: PyTorch 2.10.0 -> PyTorch 2.11.0: +5.0%" in " ".join(out.split())
    assert "(optimized, batch 32, 1 device)" in out.splitlines()[0]
    assert "different GPUs" in err


def test_history_plot_and_html(results: Path, monkeypatch, capsys, tmp_path: Path) -> None:
    png, svg, page = tmp_path / "h.png", tmp_path / "h.svg", tmp_path / "h.html"
    doc = _history(monkeypatch, capsys, "--plot", png, "--html", page)
    assert doc["plot"] == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    _history(monkeypatch, capsys, "--plot", svg)
    text = svg.read_text()
    assert text.startswith("<svg") and 'id="history/pytorch/fp32"' in text and 'id="history/jax/fp32"' in text
    html = page.read_text()
    assert html.count("<svg") == 1 and 'data-table="history-table"' in html and "torch 2.11 image" in html
    assert "PyTorch 2.10.0 -&gt; PyTorch 2.11.0: +5.0%" in html
    for option, name in (("--plot", "h.txt"), ("--html", "h.png"), ("--plot", "nofolder/h.png")):
        code, _, err = run_cli(["results", "history", "synthetic", option, tmp_path / name], monkeypatch, capsys)
        assert code == 2 and option in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "h.txt").exists()


def test_history_leaves_out_an_unusable_artifact(results: Path, monkeypatch, capsys) -> None:
    (results / "synthetic" / MID / "summary.json").write_text("{}\n")
    doc = _history(monkeypatch, capsys)
    assert [a["artifact_id"] for a in doc["artifacts"]] == [OLD, NEW]
    assert doc["skipped"][0]["path"].endswith(MID) and "sha256 differs" in doc["skipped"][0]["problem"]
    torch = [p for p in doc["points"] if p["engine"] == "pytorch"]
    assert torch[1]["previous_artifact_id"] == OLD


def test_a_label_that_breaks_its_schema_fails_validation(make_artifact: Callable[..., Path], monkeypatch, capsys) -> None:
    folder = make_artifact({("pytorch", "fp32"): [1.0]})
    text = json.dumps({"schema_version": 1, "label": "x" * 81, "set_at": "2026-01-01T00:00:00.000Z"})
    (folder / "label.json").write_text(text)
    note_written(folder / "label.json", text.encode())  # as though bench wrote it: listed in the manifest
    write_manifest(Artifact(folder, "synthetic", folder.name), complete=True)
    assert [p.kind for p in validate_artifact(folder)] == ["schema"]
    assert "label" in str(validate_artifact(folder)[0])
    row = _listed(folder, monkeypatch, capsys)[0]
    assert not row["valid"] and "label.json: does not match the label schema" in row["problem"]


def test_relabel_keeps_the_artifact_valid(make_artifact: Callable[..., Path]) -> None:
    folder = make_artifact({("pytorch", "fp32"): [1.0]})
    relabel(folder, "first")
    relabel(folder, "second")
    assert validate_artifact(folder) == []
    manifest = json.loads((folder / "manifest.json").read_text())
    assert "label.json" in {f["path"] for f in manifest["files"]} and manifest["complete"] is True
    assert json.loads((folder / "label.json").read_text())["label"] == "second"
    (folder / "label.json").write_text((folder / "label.json").read_text().replace("second", "third"))
    assert [p.kind for p in validate_artifact(folder)] == ["modified"]


FAULTY_RUN = "fake-fp32-optimized-b16-d1-r1"


@pytest.mark.parametrize("label, why", [("a\nb", "U+000A"), ("x" * 81, "81 characters"), ("  ", "empty"), ("rm -rf $HOME", "'$'"),
                                        ("a\\b", "'\\'")])
def test_a_bad_label_is_refused(label: str, why: str, monkeypatch, capsys, tmp_path: Path) -> None:
    from tests.core.cli_helpers import FAKE_SCENARIO

    code, _, err = run_cli(["scenario", "run", FAKE_SCENARIO, "--dry-run", "--label", label], monkeypatch, capsys)
    assert code == 2 and err.startswith("error: --label: ") and why in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["scenario", "resume", tmp_path, "--label", label], monkeypatch, capsys)
    assert code == 2 and err.startswith("error: --label: ")


def test_label_round_trip_through_run_resume_list_and_history(data_dir, monkeypatch, capsys, tmp_path: Path) -> None:
    from tests.core.cli_helpers import FAKE_SCENARIO, use_fake_engines

    use_fake_engines(monkeypatch)
    monkeypatch.setenv("BENCH_FAKE_FAULT", f"{FAULTY_RUN}:crash")
    code, _, err = run_cli(["scenario", "run", FAKE_SCENARIO, "--runtime", "local", "--device", "cpu", "--out", tmp_path,
                            "--engines", "fake", "--label", " numpy 1.26 (base) "], monkeypatch, capsys)
    assert code == 1, err  # the crashed run
    (folder,) = (tmp_path / "fake_tiny").iterdir()
    assert json.loads((folder / "label.json").read_text())["label"] == "numpy 1.26 (base)"
    assert "label.json" in {f["path"] for f in json.loads((folder / "manifest.json").read_text())["files"]}
    assert validate_artifact(folder) == []
    monkeypatch.delenv("BENCH_FAKE_FAULT")
    code, _, err = run_cli(["scenario", "resume", folder], monkeypatch, capsys)  # runs the crashed run again
    assert code == 0, err
    assert json.loads((folder / "label.json").read_text())["label"] == "numpy 1.26 (base)" and validate_artifact(folder) == []
    code, _, err = run_cli(["scenario", "resume", folder, "--label", "numpy 2.0"], monkeypatch, capsys)  # nothing to run
    assert code == 0, err
    assert json.loads((folder / "label.json").read_text())["label"] == "numpy 2.0" and validate_artifact(folder) == []
    (row,) = _listed(tmp_path, monkeypatch, capsys)
    assert (row["label"], row["runs_ok"], row["runs_total"], row["engines"]) == ("numpy 2.0", 2, 2, ["fake"])
    code, out, err = run_cli(["results", "history", "fake_tiny", "--dir", tmp_path, "--json"], monkeypatch, capsys)
    assert code == 0, err
    assert {p["label"] for p in json.loads(out)["points"]} == {"numpy 2.0"}


def test_report_history_section(results: Path, monkeypatch, capsys, tmp_path: Path) -> None:
    code, _out, err = run_cli(["results", "report", results / "synthetic" / MID, "--history", "--out", tmp_path / "r", "--json"],
                             monkeypatch, capsys)
    assert code == 0, err
    html = (tmp_path / "r" / "report.html").read_text()  # --history implies --html
    assert '<a href="#history">History</a>' in html and '<h2 id="history">History</h2>' in html
    assert f"this report's artifact: {MID}" in html and 'data-plot="history"' in html
    assert html.index('id="history"') < html.index('<h2 id="environment">')
    assert "PyTorch 2.10.0 -&gt; PyTorch 2.11.0: +5.0%" in html and html.count('id="history"') == 1
    code, _, _ = run_cli(["results", "report", results / "synthetic" / MID, "--html", "--out", tmp_path / "plain"], monkeypatch, capsys)
    assert code == 0 and 'id="history"' not in (tmp_path / "plain" / "report.html").read_text()


def test_a_history_of_energy_says_when_the_artifacts_define_it_differently() -> None:
    from types import SimpleNamespace

    from orchestrator.judge.summary_model import ENERGY_DEFINITION, STEADY_ENERGY_DEFINITION, TelemetryOverview
    from orchestrator.reports.history import METRICS, build_history

    def entry(name: str, definition: str) -> SimpleNamespace:
        summary = SimpleNamespace(smoke=False, telemetry=TelemetryOverview(True, 1, 1, (), definition))
        return SimpleNamespace(artifact_id=name, time=None, summary=summary, gpu="NVIDIA H200")

    entries = [entry("a", ENERGY_DEFINITION), entry("b", STEADY_ENERGY_DEFINITION)]
    mixed = build_history("s", METRICS["energy"], entries, lambda e: [SimpleNamespace(cell=("pytorch",), median=None)])
    assert len(mixed.warnings) == 1 and "defined differently" in mixed.warnings[0] and STEADY_ENERGY_DEFINITION in mixed.warnings[0]
    assert build_history("s", METRICS["throughput"], entries, lambda e: [SimpleNamespace(cell=("pytorch",), median=None)]).warnings == ()
    same = [entry("a", STEADY_ENERGY_DEFINITION), entry("b", STEADY_ENERGY_DEFINITION)]
    assert build_history("s", METRICS["power"], same, lambda e: [SimpleNamespace(cell=("pytorch",), median=None)]).warnings == ()
