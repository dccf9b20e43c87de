"""Terminal tables: compact by default (fit 80 columns, every key cell whole), every column with --wide."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from orchestrator.cli.results_view import rich_table
from orchestrator.judge.summary_model import Summary
from orchestrator.reports import summary_tables
from orchestrator.reports.formats import Span, compact_rate, plural, significant_text
from orchestrator.reports.model import Table
from orchestrator.reports.views import Field, interval_heading, view
from orchestrator.scenario.blocks import Claims

ROOT = Path(__file__).resolve().parents[2]
FAIR = ROOT / "docs" / "results" / "h200" / "opennn_seed" / "20261201T122211Z-e8033e"
AS_PUBLISHED = ROOT / "docs" / "results" / "h200" / "opennn_seed_as_published" / "20261201T123335Z-1050a3"
LONG_REASON = ("crash: the engine exited with status 1 after CUDA_ERROR_OUT_OF_MEMORY while allocating the second "
               "convolution workspace of the backward pass, see engine.log")


class _OfDocuments:
    """summary_tables' functions, given summary.json documents (read as the typed Summary they take)."""

    def __getattr__(self, name: str) -> Any:
        table = getattr(summary_tables, name)
        return lambda doc, *args, **kwargs: table(Summary.from_json(doc), *args, **kwargs)


st = _OfDocuments()


def render(table: Table, wide: bool = False, width: int = 80) -> str:
    console = Console(file=io.StringIO(), width=width, highlight=False, record=True)
    console.print(rich_table(table, wide))
    return console.export_text()


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def _stats(median: float, kind: str = "range") -> dict[str, Any]:
    """A statistics block (orchestrator.judge.stats.SampleSummary) of 3 repeats around ``median``."""
    low, high = median * 0.98, median * 1.02
    return {"n": 3, "median": median, "mean": median, "min": low, "max": high, "iqr": high - low, "q1": low, "q3": high, "stdev": 0.0,
            "ci95": None, "interval": {"kind": kind, "low": low, "high": high}}


def _group(engine: str, precision: str, median: float, kind: str, warnings: list[str], **extra: Any) -> dict[str, Any]:
    return {"engine": engine, "precision": precision, "path": "optimized", "batch_per_device": 256, "devices": 1, "n": 3, "n_total": 3,
            "throughput": _stats(median, kind), "warnings": warnings, **extra}


def _run(engine: str, precision: str, repeat: int, status: str = "ok", **extra: Any) -> dict[str, Any]:
    return {"run_id": f"{engine}-{precision}-optimized-b256-d1-r{repeat}", "engine": engine, "precision": precision, "path": "optimized",
            "batch_per_device": 256, "devices": 1, "repeat": repeat, "status": status, "reason": None,
            "throughput": 1234.5 if status == "ok" else None, "setup_s": 21.5, "warmup_s": 0.25, **extra}


HARD = {  # every column kind, long names and reasons, tiny numbers
    "schema_version": 1, "counts": {"ok": 1, "failed": 1, "interrupted": 1, "invalid": 1, "skipped": 1},
    "scenario": "imagenet_resnet50_inference", "artifact_id": "20260101T000000Z-abcdef", "smoke": False, "reference_engine": "pytorch",
    "runs": [_run("tensorflow", "bf16", 1), _run("tensorflow", "bf16", 2, "failed", reason=LONG_REASON),
             _run("pytorch", "fp16", 1, "interrupted", reason="interrupted by the user (Ctrl-C) while in the warmup steps"),
             _run("opennn", "tf32", 1, "invalid", reason="parity: steps expected 780 got 381", apparent_throughput=74128.4,
                  work_shortfall="381 of 780 updates"),
             _run("jax", "tf32", 1, "skipped", reason="not started: the scenario was interrupted before this run")],
    "groups": [_group("tensorflow", "bf16", 36809.6, "range", ["high spread: 23.4% of the median across 3 repeats"],
                      achieved_tflops=0.0065, peak_fraction=0.00004, energy_per_sample_j=_stats(0.0370),
                      latency_ms={"p50": 3.5, "p99": 12.25}, time_to_train_h=8.36),
               _group("pytorch", "fp16", 121.0, "ci95", ["high spread: 27.4% of the median across 3 repeats"], achieved_tflops=167.0)],
    "ratios": [{"precision": "bf16", "path": "optimized", "batch_per_device": 256, "devices": 1, "engine": "tensorflow",
                "baseline_engine": "pytorch", "ratio": 0.74, "ci95": None, "range": [0.59, 0.77], "p_value": 0.1, "significant": False,
                "note": "3 x 3 repeats cannot reach p<0.05"}],
    "numerical_parity": [{"precision": "bf16", "engines": ["opennn", "tensorflow"], "runs": ["a", "b"], "kind": "block_means", "blocks": 20, "at_block": 12,
                          "max_rel_dev": 0.0869, "tolerance": 0.05, "verdict": "parity_warning",
                          "reason": "block-mean losses differ by more than the tolerance at block 12 of 20"}],
    "scaling": [{"engine": "tensorflow", "precision": "bf16", "path": "optimized", "batch_per_device": 256, "devices": 8, "batch_global": 2048,
                 "n": 3, "throughput": 7720.0, "speedup": 7.72, "speedup_ci95": [7.5, 7.9], "efficiency": 0.965,
                 "note": "no valid 1-device run of the same cell for the other path"}],
}
CLAIMS = Claims.from_json({"hardware": "NVIDIA GeForce RTX 4080", "source": "a report",
                           "ratios": [{"engine": "tensorflow", "vs": "pytorch", "precision": "bf16", "path": "optimized", "claimed": 1.9,
                                       "as_stated": "bf16: 1.90x PyTorch (89.6% more throughput)"}]})


KEY_HEADERS = ("engine", "prec", "#", "status", "ratio", "engines", "engine / vs", "n", "median", "samples/s", "claimed")


def _holds(line: str, cells: list[str]) -> bool:
    """Every cell in ``line`` as a whole token, in order."""
    return re.search(r"\s+(.*\s+)?".join(re.escape(cell) for cell in cells), line) is not None and line.startswith(cells[0])


def _summaries() -> list[dict[str, Any]]:
    return [HARD, *(json.loads((folder / "summary.json").read_text()) for folder in (FAIR, AS_PUBLISHED))]


@pytest.mark.parametrize("summary", _summaries(), ids=["synthetic", "h200-fair", "h200-as-published"])
def test_every_summary_table_fits_80_columns_with_its_key_cells_whole(summary: dict[str, Any]) -> None:
    tables = st.summary_tables(summary, claims_block=CLAIMS)
    assert {t.key for t in tables} >= {"runs", "groups", "claims"}
    for table in tables:
        text = render(table)
        assert widest(text) <= 80, (table.key, text)
        for row in table.rows:  # engines, precisions, statuses, ratios: whole, on one line of their own row
            keys = [cell for cell, column in zip(row, table.columns, strict=True) if column.header in KEY_HEADERS]
            assert keys and any(_holds(line, keys) for line in text.splitlines()), (table.key, keys, text)
    runs = render(st.runs(summary))
    for row in summary["runs"]:
        assert re.search(rf"^{row['engine']}\s+{row['precision']}\s+{row['repeat']}\s+{row['status']}\s", runs, re.M), runs


def test_compact_runs_table_splits_the_run_id_and_clips_reasons_wide_shows_them_whole() -> None:
    compact = render(st.runs(HARD))
    assert "tensorflow-bf16-optimized-b256-d1-r1" not in compact and "crash: the engi…" in compact and LONG_REASON not in compact
    assert "…" in compact and "(74,128)" in compact and "not a measurement" in compact  # an invalid run's figure, labelled
    assert st.runs(HARD).title == "imagenet_resnet50_inference 20260101T000000Z-abcdef (optimized, batch 256, 1 device)"  # shared
    wide = render(st.runs(HARD, wide=True), wide=True, width=400)
    assert "tensorflow-bf16-optimized-b256-d1-r1" in wide and LONG_REASON in wide
    assert all(header in wide for header in ("run", "path", "batch", "dev", "parity / reason"))
    assert "apparent 74,128, invalid: 381 of 780 updates" in wide


def test_footnotes_name_the_batch_when_the_table_has_several() -> None:
    """An inference table's groups differ by batch alone: 'pytorch tf32, pytorch tf32: ...' named neither."""
    one = {**HARD, "groups": [g for g in HARD["groups"] if g["engine"] == "tensorflow"]}
    assert "warning tensorflow bf16: high spread" in render(st.groups(one))
    small = {**one["groups"][0], "batch_per_device": 8}
    two = {**one, "groups": [*one["groups"], small]}
    compact = render(st.groups(two))
    assert "warning tensorflow bf16 b256, tensorflow bf16 b8: high spread: 23.4%" in compact
    assert "tensorflow bf16: high spread" not in compact


def test_reason_column_only_when_a_run_is_not_ok() -> None:
    ok = {**HARD, "runs": [_run("pytorch", "bf16", 1)], "counts": {"ok": 1}}
    assert "reason" not in st.runs(ok).headers and "reason" in st.runs(HARD).headers


def test_groups_compact_footnotes_warnings_wide_has_every_column() -> None:
    compact = render(st.groups(HARD))
    assert "warning tensorflow bf16: high spread: 23.4% of the median across 3 repeats" in compact
    assert "warnings" not in st.groups(HARD).headers and "min" not in st.groups(HARD).headers
    assert "0.0065" in compact and "% peak" not in compact  # TFLOP/s keeps its significant digits; latency takes % peak's place
    no_latency = {**HARD, "groups": [{**g, "latency_ms": None} for g in HARD["groups"]]}
    assert "0.004%" in render(st.groups(no_latency))
    assert "interval" in st.groups(HARD).headers  # a range and a CI: each cell labelled
    assert "range 36,073-37,546" in compact and "95% CI 119-123" in compact
    wide = st.groups(HARD, wide=True)
    assert {"min", "max", "warnings", "p50/p99 ms", "90-epoch h", "path", "batch", "dev"} <= set(wide.headers)
    assert "high spread: 23.4%" in render(wide, wide=True, width=300)


def test_interval_header_names_the_kind_it_holds() -> None:
    ranges, cis = [Span(1, 2, "range"), None], [Span(1, 2, "ci95")]
    assert interval_heading(ranges, compact_rate)[0] == "range" and interval_heading(cis, compact_rate)[0] == "95% CI"
    header, fmt = interval_heading([*ranges, *cis], compact_rate)
    assert header == "interval" and fmt(Span(1, 2, "range")) == "range 1-2" and fmt(Span(1.5, 2.5, "ci95")) == "95% CI 1.5-2.5"


def test_scaling_notes_and_claims() -> None:
    scaling = render(st.scaling(HARD))
    assert "note tensorflow bf16 x8: no valid 1-device run" in scaling and "7.72x" in scaling and "96.5%" in scaling
    claims = st.claims(HARD, CLAIMS)
    assert claims is not None and "as stated" not in claims.headers
    assert "as stated" in st.claims(HARD, CLAIMS, wide=True).headers
    assert st.claims(HARD, None) is None


def test_shared_columns_fold_into_the_title_only_when_every_row_agrees() -> None:
    fields = [Field("engine", lambda r: r[0]), Field("dev", lambda r: r[1], fold=lambda t: plural(int(t), "device"))]
    assert view("t", "T", fields, [["jax", 1], ["pytorch", 1]], wide=False).title == "T (1 device)"
    mixed = view("t", "T", fields, [["jax", 1], ["pytorch", 8]], wide=False)
    assert mixed.title == "T" and mixed.headers == ["engine", "dev"]
    assert view("t", "T", fields, [["jax", 1]], wide=True).headers == ["engine", "dev"]


def test_numbers_keep_significant_digits() -> None:
    assert [significant_text(v) for v in (0.0065, 18.49, 36945.4, 0.00001234, 0.0, 9.996)] == [
        "0.0065", "18.5", "36,945", "1.23e-05", "0", "10"]
    assert compact_rate(36945.4) == "36,945" and compact_rate(9.17) == "9.17" and compact_rate(None) == "-"
    assert plural(1, "epoch") == "1 epoch" and plural(2, "epoch") == "2 epochs"


def test_results_show_at_80_columns(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from orchestrator.cli.console import out
    from tests.results.helpers import run_cli

    monkeypatch.setattr(out, "width", 80)
    code, text, err = run_cli(["results", "show", FAIR], monkeypatch, capsys)
    assert code == 0, err
    assert widest(text) <= 80 and "claimed vs measured ratios" in text and "opennn / pytorch" in text
    assert re.search(r"^pytorch\s+bf16\s+3\s+ok\s+48,798\s", text, re.M)
    monkeypatch.setattr(out, "width", 300)
    code, wide, _ = run_cli(["results", "show", FAIR, "--wide"], monkeypatch, capsys)
    assert code == 0 and "pytorch-bf16-optimized-b128" in wide and "parity / reason" in wide


def test_columns_80_through_the_console_script(tmp_path: Path) -> None:
    """The acceptance check as a user runs it: COLUMNS=80 bench results show DIR, stdout not a terminal."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "orchestrator", "results", "show", str(AS_PUBLISHED)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert widest(done.stdout) <= 80 and widest(done.stderr or " ") <= 80
    assert len(re.findall(r"^opennn\s+(tf32|bf16)\s+\d\s+invalid\s+\(\d{2},\d{3}\)\s", done.stdout, re.M)) == 6
