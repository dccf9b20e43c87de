"""One precision registry (bench_engine.precision): the schemas, engine.yaml files and parity agree with it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench_engine.api import UnsupportedError
from bench_engine.precision import NAMES, PRECISIONS, precision_info

ROOT = Path(__file__).resolve().parents[2]


def _precision_enums(node: Any, where: str) -> list[tuple[str, list[Any]]]:
    """Every JSON Schema ``enum`` below ``node`` that lists a precision name."""
    found = []
    if isinstance(node, dict):
        if isinstance(node.get("enum"), list) and set(node["enum"]) & set(NAMES):
            found.append((where, node["enum"]))
        for key, value in node.items():
            found += _precision_enums(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _precision_enums(value, f"{where}/{index}")
    return found


def test_the_registry_holds_what_each_name_means() -> None:
    assert NAMES == ("fp32", "tf32", "bf16", "fp16")
    as_table = {name: (i.compute_dtype, i.param_dtype, i.tf32, i.loss_scaling, i.needs_cuda, i.min_capability)
                for name, i in PRECISIONS.items()}
    assert as_table == {
        "fp32": ("float32", "float32", False, False, False, None),
        "tf32": ("float32", "float32", True, False, True, 8),
        "bf16": ("bfloat16", "float32", None, False, False, None),
        "fp16": ("float16", "float32", None, True, True, None),
    }
    assert all(info.name == name for name, info in PRECISIONS.items())


def test_the_registry_is_immutable() -> None:
    with pytest.raises(TypeError):
        PRECISIONS["fp8"] = PRECISIONS["fp16"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        PRECISIONS["fp32"].tf32 = True  # type: ignore[misc]


def test_an_unknown_name_is_unsupported() -> None:
    assert precision_info("bf16") is PRECISIONS["bf16"]
    with pytest.raises(UnsupportedError, match="unknown precision 'fp8'"):
        precision_info("fp8")


def test_every_schema_enum_of_precision_names_is_the_registry() -> None:
    """A name added to a schema and not the registry (or the other way round) fails here."""
    enums = [hit for path in sorted((ROOT / "schemas").glob("*.schema.json"))
             for hit in _precision_enums(json.loads(path.read_text()), path.name)]
    assert {where.split("/")[0] for where, _ in enums} >= {"run-spec.schema.json", "engine-result.schema.json",
                                                           "scenario.schema.json"}
    for where, names in enums:
        assert names == list(NAMES), where


def test_engine_yaml_precisions_are_registry_names() -> None:
    for meta_file in sorted((ROOT / "images").glob("*/engine.yaml")):
        meta = yaml.safe_load(meta_file.read_text())
        assert meta.get("precisions"), meta_file
        assert set(meta["precisions"]) <= set(NAMES), meta_file


def test_an_engine_yaml_with_an_unknown_precision_is_refused(tmp_path: Path) -> None:
    from orchestrator.engines.registry import _precisions
    from orchestrator.errors import BadInput

    assert _precisions(None, tmp_path / "engine.yaml") == ("fp32",)
    with pytest.raises(BadInput, match="precisions: fp8 not a precision name"):
        _precisions(["fp32", "fp8"], tmp_path / "engine.yaml")


def test_parity_derives_from_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """parity reads the registry: a changed meaning changes the verdict."""
    from orchestrator.judge import parity

    policy = {"name": "fp32", "compute_dtype": "float32", "param_dtype": "float32",
              "tf32_matmul": False, "tf32_conv": False, "loss_scaling": False}
    assert parity._precision_policy("fp32", policy, "cuda") == []
    monkeypatch.setattr(parity, "PRECISIONS", {**PRECISIONS, "fp32": dataclasses.replace(PRECISIONS["fp32"], tf32=True)})
    assert [m.field for m in parity._precision_policy("fp32", policy, "cuda")] == ["precision.tf32_matmul",
                                                                                      "precision.tf32_conv"]


def test_jax_supports_what_its_engine_yaml_lists() -> None:
    """bench_jax derives its supported names from the registry (no loss scaling); engine.yaml names the same."""
    import sys

    sys.path.insert(0, str(ROOT / "images" / "jax"))
    try:
        from bench_jax.precision import SUPPORTED
    finally:
        sys.path.remove(str(ROOT / "images" / "jax"))
    assert list(SUPPORTED) == yaml.safe_load((ROOT / "images" / "jax" / "engine.yaml").read_text())["precisions"]
