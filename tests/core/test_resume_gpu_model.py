"""A resume on a host whose GPUs are another model than the artifact's runs ran on is refused (exit 2, one line,
nothing moved); on the same model it goes on."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from orchestrator.errors import BadInput
from orchestrator.host.gpus import NvmlSnapshot
from orchestrator.judge.record import RunRecord
from orchestrator.judge.runtime_use import gpu_field
from orchestrator.run.gpu_model import check_same_gpu_model, recorded_gpu_models
from tests.core.cli_helpers import FAKE_SCENARIO, assert_one_line_error, run_cli
from tests.results.fake_nvml import FakeGpu, make_module

H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"


def on_host(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """NVML, as bench reads it, sees these GPUs (none: NVML reports 0 devices)."""
    gpus = [FakeGpu(name=name, uuid=f"GPU-{index:08d}-0000-0000-0000-000000000000") for index, name in enumerate(names)]
    monkeypatch.setitem(sys.modules, "pynvml", make_module(gpus))


def test_the_recorded_models_come_from_the_summary_nvml_names():
    summary = {"host": {"nvml": {"available": True, "gpus": [{"name": H200}, {"name": H200}, {"name": None}]}}}
    assert recorded_gpu_models(summary) == frozenset({H200})
    assert recorded_gpu_models(None) == frozenset()
    assert recorded_gpu_models({"host": {"nvml": {"available": False, "reason": "no NVML", "gpus": []}}}) == frozenset()


def test_check_refuses_another_model_or_no_gpu_and_passes_the_same_model_or_cpu():
    unavailable = NvmlSnapshot(False, "NVML Shared Library Not Found")
    with pytest.raises(BadInput, match=r"^art: its runs ran on NVIDIA H200; this host has no GPU NVML can "
                                       r"see \(NVML Shared Library Not Found\)"):
        check_same_gpu_model("art", frozenset({H200}), unavailable, "auto")
    check_same_gpu_model("art", frozenset({H200}), unavailable, "cpu")  # --device cpu: the GPUs play no part
    check_same_gpu_model("art", frozenset(), unavailable, "cuda")  # nothing recorded: nothing to compare


@pytest.mark.usefixtures("fake_engines")
def test_a_resume_on_another_gpu_model_is_refused_and_on_the_same_model_goes_on(capsys, monkeypatch, tmp_path: Path):
    on_host(monkeypatch, H200)
    code, out, err = run_cli(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--out",
                             str(tmp_path / "r"), "--precisions", "fp32", "--set", "engines.fake2.options.behaviour=crash", "--json")
    assert code == 1, err  # fake2 crashed: a run for the resume to make again
    artifact = Path(json.loads(out)["artifact"])
    assert recorded_gpu_models(json.loads((artifact / "summary.json").read_text())) == {H200}
    records = [RunRecord.from_json(json.loads(p.read_text())) for p in artifact.glob("runs/*/run.json")]
    assert {m for r in records for m in gpu_field(r, "name")} == {H200}  # what the check reads first
    before = sorted(p.relative_to(artifact).as_posix() for p in artifact.rglob("*"))

    on_host(monkeypatch, H100)
    code, _, err = run_cli(capsys, monkeypatch, "scenario", "resume", str(artifact), "--runtime", "local")
    assert_one_line_error(code, err, "its runs ran on NVIDIA H200", f"this host has {H100}", "another GPU model")
    assert sorted(p.relative_to(artifact).as_posix() for p in artifact.rglob("*")) == before  # nothing moved
    assert run_cli(capsys, monkeypatch, "results", "validate", str(artifact))[0] == 0

    on_host(monkeypatch, H200, H100)  # a host with both models is not the host the runs ran on either
    assert run_cli(capsys, monkeypatch, "scenario", "resume", str(artifact), "--runtime", "local")[0] == 2

    on_host(monkeypatch, H200)
    code, _, err = run_cli(capsys, monkeypatch, "scenario", "resume", str(artifact), "--runtime", "local", "--json")
    assert code in (0, 1) and "GPU model" not in err, err
    assert (artifact / "attempts").is_dir()  # the crashed run was moved aside and made again
