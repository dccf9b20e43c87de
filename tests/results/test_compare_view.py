"""``bench results compare`` on the terminal: compact at 80 columns, the interval named for what it is, one line
per distinct note, and warnings when runtimes or images differ within or between the artifacts."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.cli.console import out
from tests.results.helpers import run_cli

ONE_REPEAT = {(engine, precision): [100.0] for engine in ("pytorch", "jax", "tensorflow") for precision in ("fp32", "bf16")}
IMAGE_A, IMAGE_B = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def _docker(image_id: str) -> dict[str, str]:
    return {"name": "docker", "image": "bench/pytorch:latest", "image_id": image_id}


def test_one_repeat_artifacts_read_compactly(make_artifact: Callable[..., Path], monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture) -> None:
    a = make_artifact(ONE_REPEAT)
    b = make_artifact({key: [108.0] for key in ONE_REPEAT})
    monkeypatch.setattr(out, "width", 80)
    code, text, err = run_cli(["results", "compare", a, b], monkeypatch, capsys)
    assert code == 0, err
    assert max(len(line) for line in text.splitlines()) <= 80
    header = next(line for line in text.splitlines() if line.startswith("engine"))
    assert re.search(r"\brange\b", header) and "95% CI" not in header  # 1 repeat a side: the range of the ratio, not a CI
    assert re.search(r"^pytorch\s+fp32\s+1/1\s+1\.080x\s+1\.080-1\.080\s", text, re.M)
    notes = [line for line in err.splitlines() if line.startswith("note")]
    assert notes == ["note (6 groups): n/a: needs 2+ repeats a side (have 1 and 1)"]  # once, not once per group
    monkeypatch.setattr(out, "width", 300)
    code, wide, _ = run_cli(["results", "compare", a, b, "--wide"], monkeypatch, capsys)
    assert "median A" in wide and "change" in wide and "n A" in wide


def test_a_ci_reads_95_percent_ci(make_artifact: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    base = [100.0, 100.5, 101.0, 99.5, 100.2]
    a, b = make_artifact({("pytorch", "bf16"): base}), make_artifact({("pytorch", "bf16"): [v * 1.5 for v in base]})
    code, text, _ = run_cli(["results", "compare", a, b], monkeypatch, capsys)
    assert code == 0 and "95% CI" in next(line for line in text.splitlines() if line.startswith("engine"))


def test_no_runtime_warning_when_runtimes_and_images_agree(make_artifact: Callable[..., Path], monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture) -> None:
    docker = {engine: _docker(IMAGE_A) for engine in ("pytorch", "jax", "tensorflow")}
    a, b = make_artifact(ONE_REPEAT, runtimes=docker), make_artifact(ONE_REPEAT, runtimes=docker)
    code, text, err = run_cli(["results", "compare", a, b, "--json"], monkeypatch, capsys)
    assert code == 0 and json.loads(text)["warnings"] == []
    code, _, err = run_cli(["results", "compare", a, b], monkeypatch, capsys)
    assert code == 0 and "warning" not in err


def test_runtimes_or_images_that_differ_between_a_and_b(make_artifact: Callable[..., Path], monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture) -> None:
    local = make_artifact(ONE_REPEAT)
    docker = make_artifact(ONE_REPEAT, runtimes={engine: _docker(IMAGE_A) for engine in ("pytorch", "jax", "tensorflow")})
    rebuilt = make_artifact(ONE_REPEAT, runtimes={engine: _docker(IMAGE_B) for engine in ("pytorch", "jax", "tensorflow")})
    code, text, err = run_cli(["results", "compare", local, docker], monkeypatch, capsys)
    assert code == 0
    warnings = [line for line in err.splitlines() if line.startswith("warning")]
    assert warnings == ["warning A and B ran on different runtimes: jax local in A, docker in B; pytorch local in A, docker in B; "
                        "tensorflow local in A, docker in B"]
    code, text, _ = run_cli(["results", "compare", docker, rebuilt, "--json"], monkeypatch, capsys)
    assert json.loads(text)["warnings"] == [f"A and B ran from different images: jax {IMAGE_A[:19]} in A, {IMAGE_B[:19]} in B; "
                                            f"pytorch {IMAGE_A[:19]} in A, {IMAGE_B[:19]} in B; "
                                            f"tensorflow {IMAGE_A[:19]} in A, {IMAGE_B[:19]} in B"]


def test_runtimes_or_images_that_differ_within_an_artifact(make_artifact: Callable[..., Path], monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture) -> None:
    runs = {("pytorch", "bf16"): [100.0, 101.0], ("jax", "bf16"): [90.0]}
    same = make_artifact(runs)
    mixed = make_artifact(runs, runtimes={"pytorch-bf16-optimized-b32-d1-r1": _docker(IMAGE_A),
                                          "pytorch-bf16-optimized-b32-d1-r2": _docker(IMAGE_B)})
    code, text, err = run_cli(["results", "show", same, "--json"], monkeypatch, capsys)
    assert code == 0 and json.loads(text)["warnings"] == [] and "warning" not in err
    code, text, _ = run_cli(["results", "show", mixed, "--json"], monkeypatch, capsys)
    assert json.loads(text)["warnings"] == [
        "this artifact's runs ran on different runtimes, not measured alike (docker: pytorch x2; local: jax x1)",
        f"this artifact's pytorch runs ran from different images, not measured alike ({IMAGE_A[:19]} x1, {IMAGE_B[:19]} x1)"]
    code, _, err = run_cli(["results", "show", mixed], monkeypatch, capsys)
    assert code == 0 and err.count("different runtimes") == 1 and err.count("different images") == 1
    code, text, err = run_cli(["results", "compare", mixed, same], monkeypatch, capsys)
    assert "A's runs ran on different runtimes" in err and "A and B ran on different runtimes: pytorch docker in A, local in B" in err


def test_runs_on_different_physical_gpus_are_said() -> None:
    """A resume on another machine of the same kind: the artifact's runs used two GPUs (by UUID); one GPU says nothing."""
    from orchestrator.judge.runtime_use import RuntimeUse, mixed_warnings

    first, second = ("GPU-5a6eafee-1932",), ("GPU-0b1c2d3e-4f50",)
    same = [RuntimeUse(f"r{i}", engine, "local", gpus=first) for i, engine in enumerate(("jax", "opennn", "pytorch"))]
    assert mixed_warnings(same) == [] and mixed_warnings([*same, RuntimeUse("cpu", "jax", "local")]) == []
    moved = [*same, RuntimeUse("r9", "jax", "local", gpus=second)]
    assert mixed_warnings(moved) == ["this artifact's runs ran on 2 different sets of physical GPUs "
                                     "(GPU-0b1c2d3e: jax x1; GPU-5a6eafee: jax x1, opennn x1, pytorch x1)"]


def test_runs_on_different_gpu_models_are_said_not_comparable() -> None:
    """An artifact whose runs ran on two GPU models (made otherwise than by a resume, which refuses that)."""
    from orchestrator.judge.runtime_use import RuntimeUse, mixed_warnings

    h200 = [RuntimeUse(f"r{i}", engine, "local", gpus=("GPU-5a6eafee",), models=("NVIDIA H200",))
            for i, engine in enumerate(("jax", "pytorch"))]
    assert mixed_warnings(h200) == []
    h100 = RuntimeUse("r9", "jax", "local", gpus=("GPU-0b1c2d3e",), models=("NVIDIA H100 80GB HBM3",))
    first, second = mixed_warnings([*h200, h100])
    assert first == ("this artifact's runs ran on different GPU models, not comparable "
                     "(NVIDIA H100 80GB HBM3: jax x1; NVIDIA H200: jax x1, pytorch x1)")
    assert second.startswith("this artifact's runs ran on 2 different sets of physical GPUs")


def test_the_resumed_h200_artifact_says_its_two_gpus() -> None:
    """The published fair seed artifact: its JAX bf16 runs were made again on another H200 (README "JAX at bf16")."""
    from orchestrator.jsonio import read_json
    from orchestrator.judge.runtime_use import artifact_warnings
    from tests.conftest import REPO

    root = REPO / "docs" / "results" / "h200" / "opennn_seed" / "20261201T122211Z-e8033e"
    from orchestrator.judge.summary_model import Summary

    warnings = artifact_warnings(root, Summary.from_json(read_json(root / "summary.json", "summary")))
    assert len(warnings) == 1 and "2 different sets of physical GPUs" in warnings[0] and "jax x3;" in warnings[0]
