"""benchmarks/autotune_choices.py: Inductor's AUTOTUNE blocks read from an engine log, their winners and sums."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "autotune_choices.py"

LOG = """\
[pytorch] warmup 0/15
AUTOTUNE convolution(256x3x224x224, 64x3x7x7)
strides: [150528, 1, 672, 3], [147, 1, 21, 3]
dtypes: torch.bfloat16, torch.bfloat16
  convolution 1.8100 ms 100.0%
  triton_convolution2d_8 2.6361 ms 68.7% ALLOW_TF32=False, BLOCK_K=16
SingleProcess AUTOTUNE benchmarking takes 4.9727 seconds and 0.0004 seconds precompiling for 2 choices
AUTOTUNE mm(802816x64, 64x256)
  triton_mm_25 0.1800 ms 100.0% ACC_TYPE='tl.float32'
  mm 0.2000 ms 90.0%
  triton_mm_26 0.1900 ms 94.7% ACC_TYPE='tl.float32'
SingleProcess AUTOTUNE benchmarking takes 5.0273 seconds and 0.0004 seconds precompiling for 3 choices
AUTOTUNE mm(12544x512, 512x2048)
  triton_mm_853 0.0500 ms 100.0%
"""


@pytest.fixture(scope="module")
def choices():
    spec = importlib.util.spec_from_file_location("autotune_choices", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["autotune_choices"] = module
    spec.loader.exec_module(module)
    return module


def test_blocks_winners_and_sums(choices):
    ops, seconds = choices.parse(LOG.splitlines())
    assert [(op.op, op.winner.name) for op in ops] == [
        ("convolution", "convolution"), ("mm", "triton_mm_25"), ("mm", "triton_mm_853")]
    assert seconds == pytest.approx(10.0)
    assert ops[1].aten.name == "mm" and ops[2].aten is None  # a block cut by the log's end keeps its choices
    summary = choices.summarise("x", ops, seconds)
    assert (summary.ops, summary.template_wins) == (3, 2)
    # the cut block has no ATen time: it is left out of both sums, not counted as a gain
    assert summary.aten_ms == pytest.approx(2.01) and summary.winners_ms == pytest.approx(1.99)
    assert summary.saved_percent == pytest.approx(100 * 0.02 / 2.01)


def test_a_block_without_a_timed_choice_is_refused(choices):
    with pytest.raises(ValueError, match="no timed choice"):
        choices.TunedOp("mm", "1x1, 1x1", ())
    ops, _ = choices.parse(["AUTOTUNE mm(1x1, 1x1)", "SingleProcess AUTOTUNE benchmarking takes 1.0 seconds"])
    assert ops == []


def test_cli_table_json_and_bad_input(choices, tmp_path, capsys):
    run = tmp_path / "runs" / "pytorch-bf16-optimized-b256-d1-r1"
    run.mkdir(parents=True)
    (run / "engine.log").write_text(LOG)
    assert choices.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "3 operations tuned, 2 won by a Triton template, 10.0 s benchmarking" in out
    rows = {line.split()[-4]: line for line in out.splitlines() if line.startswith(("mm ", "convolution "))}
    assert rows["triton_mm_25"].endswith(" 10.0%") and rows["convolution"].endswith("  0.0%")
    assert rows["triton_mm_853"].endswith(" -")  # ATen's kernel not timed: no gain claimed
    assert choices.main([str(run / "engine.log"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc[0]["operations"][1] == {"op": "mm", "shapes": "802816x64, 64x256", "winner": "triton_mm_25",
                                       "winner_ms": 0.18, "aten_ms": 0.2, "choices": 3}
    plain = tmp_path / "plain.log"
    plain.write_text("[pytorch] warmup 0/15\n")
    assert choices.main([str(plain)]) == 2
    assert "no AUTOTUNE block" in capsys.readouterr().err
    assert choices.main([str(tmp_path / "missing.log")]) == 2
    assert "missing.log" in capsys.readouterr().err
