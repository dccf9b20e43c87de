"""The tables of bench env, image list, data list, scenario list/show and compare's environment diff: compact at
80 columns (key cells whole), every column with --wide."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from orchestrator.cli.console import out
from orchestrator.cli.data_cmd import splits_table
from orchestrator.cli.env_cmd import engines_table
from orchestrator.cli.image_cmd import images_table
from orchestrator.cli.results_output_cmd import environment_table
from orchestrator.cli.results_view import rich_table
from orchestrator.reports.model import Table
from tests.core.cli_helpers import run_cli

SEED = "scenarios/opennn_seed.yaml"
IMAGE = "sha256:" + "e" * 64
BASE = "nvidia/cuda:13.0.0-cudnn-devel-ubuntu24.04@sha256:c2621d98e7de80c2aec5eb8403b19c67454c8f5b0c929e8588fd3563c9b6558d"


def render(table: Table, wide: bool = False, width: int = 80) -> str:
    console = Console(file=io.StringIO(), width=width, highlight=False, record=True)
    console.print(rich_table(table, wide))
    return console.export_text()


def fits(text: str, *rows: list[str]) -> None:
    """No line wider than 80; each row's cells whole and in order on one line."""
    assert max(len(line) for line in text.splitlines()) <= 80, text
    for cells in rows:
        pattern = r"\s+(.*\s+)?".join(re.escape(cell) for cell in cells)
        assert re.search(pattern, text), (cells, text)


def _image(engine: str, status: str) -> dict:
    return {"engine": engine, "status": status, "local_image_id": IMAGE, "locked_image_id": IMAGE, "built_from": BASE,
            "framework_version": "2.21.0", "cuda": "13.0", "cudnn": "9.13", "default_base": BASE, "default_base_pinned": True}


def test_image_list() -> None:
    rows = [_image("tensorflow", "unknown (daemon unreachable)"), _image("pytorch", "built, differs from lock"), _image("jax", "built")]
    fits(render(images_table(rows, False)), ["tensorflow", "unknown (daemon unreachable)", IMAGE[:19], "2.21.0", "13.0"],
         ["pytorch", "built, differs from lock"], ["jax", "built"])
    wide = images_table(rows, True)
    assert {"locked image", "built from", "cuDNN", "default base"} <= set(wide.headers)
    assert BASE in render(wide, True, 400)


def test_data_list() -> None:
    rows = [{"name": "imagenet", "split": "train", "samples": 1_281_167, "shape": [224, 224, 3], "sha256": "f" * 64, "synthetic": False,
             "subset_of": "a" * 64, "prepared": True, "path": "/root/.cache/bench/datasets/imagenet/train-real-224x224x3-" + "f" * 40}]
    compact = splits_table(rows, "datasets in /root/.cache/bench/datasets", False)
    fits(render(compact), ["imagenet", "train", "1,281,167", "224x224x3"])
    assert "path" not in compact.headers and rows[0]["path"] in render(splits_table(rows, "", True), True, 400)


def test_env_engines() -> None:
    reason = "the interpreter /opt/venvs/tensorflow/bin/python3 cannot import tensorflow: ModuleNotFoundError: No module named 'tensorflow'"
    rows = [{"engine": "tensorflow", "framework": "tensorflow", "usable": False, "reason": reason, "interpreter": "/opt/venvs/tensorflow/bin/python3"},
            {"engine": "pytorch", "framework": "torch", "usable": True, "version": "2.9.1+cu130", "interpreter": "/usr/bin/python3"}]
    text = render(engines_table(rows, False))
    fits(text, ["tensorflow", "tensorflow", "no"], ["pytorch", "torch", "yes"])
    assert reason not in text and "…" in text
    assert reason in render(engines_table(rows, True), True, 400)


def test_environment_diff() -> None:
    from orchestrator.judge.environment_diff import Difference, EnvironmentDiff

    env = EnvironmentDiff(("pytorch",), (
        Difference("pytorch", "runtime.image_id", IMAGE, None),
        Difference("artifact", "host.cpu_model", "AMD EPYC 9654 96-Core Processor with a very long marketing name", "Intel")))
    fits(render(environment_table(env, False)), ["pytorch", "runtime.image_id"], ["artifact", "host.cpu_model"])


def test_scenario_list_and_show(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(out, "width", 80)
    code, text, _ = run_cli(capsys, monkeypatch, "scenario", "list")
    assert code == 0
    fits(text, ["opennn_seed_as_published", "opennn, pytorch,"], ["cifar_resnet50"])
    assert "engines x precisions" in text  # one column, wrapped between words
    code, text, _ = run_cli(capsys, monkeypatch, "scenario", "show", SEED, "--set", "workload.epochs=1")
    assert code == 0 and "1 epoch," in text and "1 epochs" not in text
    fits(text, ["opennn", "tf32", "1"], ["tensorflow", "bf16", "3"])
    assert "opennn-tf32-optimized-b128-d1-r1" not in text and "(optimized, batch 128, 1 device)" in text
    monkeypatch.setattr(out, "width", 300)
    code, text, _ = run_cli(capsys, monkeypatch, "scenario", "show", SEED, "--wide")
    assert code == 0 and "opennn-tf32-optimized-b128-d1-r1" in text and "2 epochs," in text
    code, text, _ = run_cli(capsys, monkeypatch, "scenario", "list", "--wide")
    assert code == 0 and re.search(r"engines\s+\S\s+precisions\s+\S\s+description", text)  # a column each


@pytest.mark.usefixtures("fake_engines")
def test_the_end_of_a_run_at_80_columns(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from tests.core.cli_helpers import FAKE_SCENARIO

    monkeypatch.setattr(out, "width", 80)
    code, text, err = run_cli(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--out", str(tmp_path))
    assert code == 0, err
    fits(text, ["fake", "fp32", "1", "ok"], ["fake2", "bf16", "1", "ok"])
    assert "fake-fp32-optimized" not in text and "artifact:" in err
    code, text, err = run_cli(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--out", str(tmp_path),
                              "--json", "--engines", "fake")
    assert code == 0 and json.loads(text)["warnings"] == []  # one runtime, no image: nothing to warn about
