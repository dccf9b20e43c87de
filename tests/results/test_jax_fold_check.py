"""benchmarks/probes/jax_fold_check.py: the fold passes against float32 HIGHEST and a wrong fold fails it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax")
pytest.importorskip("flax")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "probes"))

from jax_fold_check import main

SMALL = ["--size", "32", "--batch", "8", "--classes", "10", "--precisions", "fp32"]


def test_the_fold_passes_and_a_wrong_fold_fails(capsys) -> None:
    assert main(SMALL) == 0
    line = json.loads(capsys.readouterr().out.strip())
    assert line["ok"] is True and line["folded_rel_err"] < 1e-4 and line["folded_top1_agree"] == 1.0
    assert main([*SMALL, "--fold-epsilon", "0.5"]) == 1  # the statistics folded with another epsilon
    wrong = json.loads(capsys.readouterr().out.strip())
    assert wrong["ok"] is False and wrong["folded_rel_err"] > wrong["allowed_rel_err"]


def test_a_precision_the_device_cannot_run_is_one_line_and_exit_2(capsys) -> None:
    import jax

    if jax.devices()[0].platform == "gpu":
        pytest.skip("this device runs tf32")
    assert main([*SMALL[:-1], "tf32"]) == 2
    assert capsys.readouterr().err.strip() == \
        "error: --precisions: precision 'tf32' needs a CUDA GPU with TF32 tensor cores (compute capability 8.0+)"
