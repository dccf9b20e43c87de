"""benchmarks/tresnet_table.py: the TResNet paper's table from artifacts, its flags, ratios and reference."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "tresnet_table.py"
PARAMS = {"tresnet_m": 31_389_032, "resnet50_v1.5": 25_557_032}
GMACS = {"tresnet_m": 5.74, "resnet50_v1.5": 4.09}


@pytest.fixture(scope="module")
def table():
    spec = importlib.util.spec_from_file_location("tresnet_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["tresnet_table"] = module
    spec.loader.exec_module(module)
    return module


def make(root: Path, ident: str, arch: str, mode: str, runs: dict[str, list[tuple[str, float | None]]], batch: int,
         search: dict[str, dict] | None = None, parity: str | None = None) -> Path:
    """A fake artifact: ``runs`` engine -> [(status, img/s)] at ``batch`` (bf16); ``search`` engine -> search.json fields."""
    folder = root / ident
    rows, groups = [], []
    for engine, repeats in runs.items():
        ok = [v for s, v in repeats if s == "ok"]
        for index, (status, value) in enumerate(repeats, 1):
            run_id = f"{engine}-bf16-optimized-b{batch}-d1-r{index}"
            row = {"run_id": run_id, "engine": engine, "precision": "bf16", "batch_per_device": batch, "devices": 1,
                   "repeat": index, "status": status, "throughput": value}
            if parity and index == 1:
                row["parity_warning"] = parity
            rows.append(row)
            (folder / "runs" / run_id).mkdir(parents=True)
            (folder / "runs" / run_id / "spec.json").write_text(json.dumps({"trainable_parameters_expected": 1}))
            if status == "ok":
                result = {"work": {"arch": arch, "mode": mode, "trainable_parameters": PARAMS[arch]}}
                (folder / "runs" / run_id / "result.json").write_text(json.dumps(result))
        if ok:
            median = sorted(ok)[len(ok) // 2]
            groups.append({"engine": engine, "precision": "bf16", "batch_per_device": batch, "devices": 1, "n": len(ok),
                           "n_total": len(repeats), "throughput": {"median": median, "min": min(ok), "max": max(ok)},
                           "gmacs_per_sample": GMACS[arch], "achieved_tflops": median * GMACS[arch] * 6 / 1000})
    searches = [{"engine": e, "precision": "bf16", "max_batch": s.get("max"), "chosen_batch": s.get("chosen"),
                 "capped_by": s.get("capped"), "probes": [{"batch": 1, "outcome": "fits"}] * 6, "error": s.get("error"),
                 **({"memory_limit_bytes": s["limit"]} if "limit" in s else {})}
                for e, s in (search or {}).items()]
    summary = {"artifact_id": ident, "host": {"nvml": {"gpus": [{"name": "NVIDIA H200"}]}}, "runs": rows, "groups": groups,
               "max_batch": searches}
    (folder / "summary.json").write_text(json.dumps(summary))
    batch_block = {"size": 64, "max_search": {"fraction": 0.9}} if search is not None else {"size": batch}
    workload = {"mode": mode, "model": {"arch": arch}, "batch": batch_block}
    (folder / "scenario.yaml").write_text(yaml.safe_dump({"name": "tresnet_m", "workload": workload}))
    return folder


FIVE = [("ok", v) for v in (980.0, 1000.0, 1010.0, 990.0, 1005.0)]


def campaign(root: Path) -> list[Path]:
    """Training, both archs, both batch choices, PyTorch and JAX; TResNet-M 0.8x ResNet-50 at 90% of max."""
    tres = {"pytorch": FIVE, "jax": [("ok", v * 0.9) for _, v in FIVE]}
    base = {"pytorch": [("ok", v * 1.25) for _, v in FIVE], "jax": [("ok", v * 1.2) for _, v in FIVE]}
    return [
        make(root, "20270101T000001Z-a", "tresnet_m", "train", {"pytorch": FIVE}, 2688,
             {"pytorch": {"max": 2990, "chosen": 2688}}),
        make(root, "20270101T000002Z-b", "resnet50_v1.5", "train", {"pytorch": base["pytorch"]}, 2304,
             {"pytorch": {"max": 2600, "chosen": 2304}}),
        make(root, "20270101T000003Z-c", "tresnet_m", "train", tres, 256),
        make(root, "20270101T000004Z-d", "resnet50_v1.5", "train", base, 256),
    ]


def test_rows_carry_the_runs_figures_and_the_papers_beside_them(table, tmp_path):
    reference = table.load_reference()
    rows = table.collect(campaign(tmp_path), reference)
    assert [(r.arch, r.choice, r.engine) for r in rows] == [
        ("tresnet_m", "max", "pytorch"), ("resnet50_v1.5", "max", "pytorch"),
        ("tresnet_m", "common", "jax"), ("tresnet_m", "common", "pytorch"),
        ("resnet50_v1.5", "common", "jax"), ("resnet50_v1.5", "common", "pytorch")]
    top = rows[0]
    assert (top.search.max_batch, top.batch, top.parameters, top.gmacs) == (2990, 2688, 31_389_032, 5.74)
    assert (top.median, top.low, top.high, top.ok, top.runs) == (1000.0, 980.0, 1010.0, 5, 5)
    assert (top.paper_img_s, top.paper_max_batch, top.paper_gflops) == (730, 512, 5.5) and top.flags == ()
    common = rows[3]  # the common-batch row shows its arch's searched maximum
    assert (common.batch, common.search.max_batch) == (256, 2990)
    text = table.markdown(rows, table.ratios(rows, reference), reference, "H200")
    assert "| tresnet_m | train | 90% of max | pytorch bf16 | 2,990 | 2,688 | 31,389,032 | 5.74 (5.5) | 1,000 [980-1,010], 5/5 |" in text
    assert "| resnet50_v1.5 | train | 90% of max | pytorch bf16 | 2,600 | 2,304 | 25,557,032 | 4.09 (4.1) |" in text
    assert "| 805 | 288 |" in text and "Alibaba-MIIL/TResNet README.md @ 0e39f2e886e2" in text


def test_ratios_set_this_gpu_against_the_paper(table, tmp_path):
    reference = table.load_reference()
    by_key = {(q.choice, q.engine): q for q in table.ratios(table.collect(campaign(tmp_path), reference), reference)}
    searched = by_key[("max", "pytorch")]
    assert searched.img_s == pytest.approx(0.8) and searched.paper_img_s == pytest.approx(730 / 805)
    assert searched.max_batch == pytest.approx(2990 / 2600) and searched.paper_max_batch == pytest.approx(512 / 288)
    assert by_key[("common", "jax")].img_s == pytest.approx(0.9 / 1.2)
    text = table.markdown([], list(by_key.values()), reference, "H200")
    assert "| train | 90% of max | pytorch | 0.80 | 0.91 | 1.15 | 1.78 |" in text


def test_inference_rows_take_the_papers_inference_speed_and_no_train_batch(table, tmp_path):
    make(tmp_path, "20270101T000001Z-a", "tresnet_m", "infer", {"pytorch": FIVE}, 14336, {"pytorch": {"max": 16384, "chosen": 14336}})
    make(tmp_path, "20270101T000002Z-b", "resnet50_v1.5", "infer", {"pytorch": FIVE}, 14336, {"pytorch": {"max": 16000, "chosen": 14336}})
    reference = table.load_reference()
    rows = table.collect(table.find_artifacts([tmp_path]), reference)
    assert [(r.mode, r.paper_img_s, r.paper_max_batch) for r in rows] == [("infer", 2930, None), ("infer", 2830, None)]
    (ratio,) = table.ratios(rows, reference)
    assert ratio.paper_img_s == pytest.approx(2930 / 2830) and ratio.paper_max_batch is None


def test_flags_fewer_repeats_bad_runs_parity_and_a_capped_search(table, tmp_path):
    runs = {"pytorch": [*FIVE[:3], ("failed", None), ("invalid", None)], "jax": FIVE}
    make(tmp_path, "20270101T000001Z-a", "tresnet_m", "train", runs, 256, parity="loss off by 3%")
    make(tmp_path, "20270101T000002Z-b", "resnet50_v1.5", "train", {"jax": FIVE}, 2048,
         {"jax": {"max": 8192, "chosen": 7372, "capped": "limit"}})
    make(tmp_path, "20270101T000003Z-c", "tresnet_m", "train", {"jax": [("skipped", None)] * 5}, 64, {"jax": {"error": "error: crash"}})
    rows = {(r.arch, r.choice, r.engine): r for r in table.collect(table.find_artifacts([tmp_path]), table.load_reference())}
    assert rows[("tresnet_m", "common", "pytorch")].flags == ("3 of 5 repeats ok", "1 failed", "1 invalid", "parity warning")
    assert rows[("tresnet_m", "common", "jax")].flags == ("parity warning",)
    assert rows[("resnet50_v1.5", "max", "jax")].flags == ("max capped by the limit",)
    failed = rows[("tresnet_m", "max", "jax")]
    assert failed.flags == ("0 of 5 repeats ok", "5 skipped", "search failed: error: crash") and failed.batch is None
    text = table.markdown(list(rows.values()), [], table.load_reference(), "H200")
    assert "| >=8,192 |" in text and "| failed |" in text
    three = {(r.arch, r.choice, r.engine): r for r in table.collect(table.find_artifacts([tmp_path]), table.load_reference(), want=3)}
    assert three[("tresnet_m", "common", "pytorch")].flags == ("1 failed", "1 invalid", "parity warning")  # --repeats 3


def test_the_newest_artifact_of_a_cell_wins(table, tmp_path):
    make(tmp_path, "20270101T000001Z-a", "tresnet_m", "train", {"pytorch": [("skipped", None)] * 5}, 64, {})
    make(tmp_path, "20270101T000009Z-z", "tresnet_m", "train", {"pytorch": FIVE}, 2688, {"pytorch": {"max": 2990, "chosen": 2688}})
    (row,) = table.collect(table.find_artifacts([tmp_path]), table.load_reference())
    assert row.ok == 5 and row.batch == 2688


def test_the_reference_names_its_source(table, tmp_path):
    doc = json.loads(table.REFERENCE.read_text())
    source = doc["source"]
    assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]) and source["commit"] in source["url"]
    assert source["repo"] == "Alibaba-MIIL/TResNet" and source["path"] == "README.md"
    assert doc["models"]["tresnet_m"]["max_train_batch"] == 512  # the reference document's own figure
    del doc["source"]["commit"]
    bare = tmp_path / "reference.json"
    bare.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="source: missing commit"):
        table.load_reference(bare)


def test_the_command_prints_json_and_exits_2_without_an_artifact(tmp_path):
    campaign(tmp_path / "artifacts")
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "artifacts"), "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["machine"] == "H200" and len(doc["rows"]) == 6 and doc["rows"][0]["search"]["max_batch"] == 2990
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "none")], capture_output=True, text=True)
    assert proc.returncode == 2 and "no bench artifact" in proc.stderr


def test_artifacts_of_two_gpu_models_make_no_table(tmp_path):
    """One table, one machine: an H100 artifact beside H200 ones is refused (exit 2, naming both), not tabled as H200."""
    campaign(tmp_path / "artifacts")
    odd = make(tmp_path / "artifacts", "20270101T000009Z-h", "tresnet_m", "infer", {"pytorch": FIVE}, 256)
    summary = json.loads((odd / "summary.json").read_text())
    summary["host"]["nvml"]["gpus"] = [{"name": "NVIDIA H100 80GB HBM3"}]
    (odd / "summary.json").write_text(json.dumps(summary))
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "artifacts")], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("error: the artifacts ran on different machines (H100 80GB HBM3: 20270101T000009Z-h; H200: ")


@pytest.mark.parametrize(("jax_gib", "flagged"), [(104.9, True), (132.8, False), (None, False)])
def test_searched_rows_whose_memory_limits_differ_by_more_than_a_tenth_are_flagged(table, tmp_path, jax_gib, flagged):
    """JAX's default allocator share (75% of the H200's 139.8 GiB) against PyTorch's whole device: the two maximal
    batches do not compare and both rows say so; 95% does; a search without a reported limit says so (and only it)."""
    gib = 2**30
    make(tmp_path, "20270101T000001Z-a", "tresnet_m", "train", {"pytorch": FIVE}, 3456,
         {"pytorch": {"max": 3840, "chosen": 3456, "limit": int(139.8 * gib)}})
    jax_search = {"max": 3200, "chosen": 2880, **({"limit": int(jax_gib * gib)} if jax_gib else {})}
    make(tmp_path, "20270101T000002Z-b", "tresnet_m", "train", {"jax": FIVE}, 2880, {"jax": jax_search})
    rows = {(r.arch, r.choice, r.engine): r for r in table.collect(table.find_artifacts([tmp_path]), table.load_reference())}
    expected = ("memory limits more than 10% apart",) if flagged else ()
    assert rows[("tresnet_m", "max", "pytorch")].flags == expected
    assert rows[("tresnet_m", "max", "jax")].flags == (expected if jax_gib else ("memory limit not recorded",))
    text = table.markdown(list(rows.values()), [], table.load_reference(), "H200")
    assert "| 3,840 (139.8 GiB) |" in text
