"""The shared initial-weights file: today's bytes (published manifests hash them, resume re-makes them),
read by the safetensors package and by the fallback reader of images without it, hostile files refused."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from bench_engine import initweights as engine_side
from orchestrator.model.initweights import write_init, write_safetensors

# sha256 of the files the hand-written writer produced before the safetensors package was adopted
RESNET50_C10_CH3_SEED0 = "23c8eedf86f8598dc0153573b8636d9c2505d4058612246d46f7a2a4111cb5f0"
SMALL = "3bba679b2e2d5d07f3b61048e09b5360f9a603231f6853cc3877906a98ccbd6a"


def _small() -> dict[str, np.ndarray]:
    return {"b.weight": np.arange(6, dtype=np.float32).reshape(2, 3), "a.bias": np.array([1.5, -2.0, 3.25], np.float32),
            "c": np.zeros((1,), np.float32)}


@pytest.fixture(params=["safetensors", "plain"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both readers: the safetensors package, and the fallback of an image whose base lacks it."""
    if request.param == "plain":
        monkeypatch.setattr(engine_side, "safe_open", None)
    return request.param


def test_small_file_bytes_are_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "x.safetensors"
    write_safetensors(path, _small(), {"format": "bench-init-v1", "seed": "0"})
    assert hashlib.sha256(path.read_bytes()).hexdigest() == SMALL
    assert [p.name for p in tmp_path.iterdir()] == ["x.safetensors"]  # no temporary file left


def test_resnet50_file_bytes_are_unchanged(tmp_path: Path) -> None:
    path, _ = write_init(tmp_path, "resnet50_v1.5", 10, 3, 0)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == RESNET50_C10_CH3_SEED0


def test_both_readers_read_the_same(tmp_path: Path, reader: str) -> None:
    path = tmp_path / "x.safetensors"
    write_safetensors(path, _small(), {"format": "bench-init-v1", "seed": "0"})
    tensors, meta = engine_side.read_init(path)
    assert list(tensors) == ["b.weight", "a.bias", "c"] and meta == {"format": "bench-init-v1", "seed": "0"}
    assert all(np.array_equal(tensors[n], v) and tensors[n].dtype == np.float32 for n, v in _small().items())


def _file(header: dict, data: bytes, size: int | None = None) -> bytes:
    blob = json.dumps(header).encode()
    return struct.pack("<Q", len(blob) if size is None else size) + blob + data


META = {"__metadata__": {"format": "bench-init-v1"}}
HOSTILE = {
    "truncated": b"\x05\x00\x00",
    "bad-json": b"\x05\x00\x00\x00\x00\x00\x00\x00{nope",
    "header-past-end": _file(META, b"", size=1 << 40),
    "not-an-object": _file([1, 2], b""),  # type: ignore[arg-type]
    "f16": _file({**META, "w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 4),
    "short-data": _file({**META, "w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8),
    "shape-mismatch": _file({**META, "w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8),
    "overlap": _file({**META, "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "v": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12),
    "trailing": _file({**META, "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 12),
    "no-offsets": _file({**META, "w": {"dtype": "F32", "shape": [1]}}, b"\0" * 4),
    "wrong-format": _file({"__metadata__": {"format": "other"}, "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}},
                          b"\0" * 4),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_files_are_init_errors(case: str, tmp_path: Path, reader: str) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(HOSTILE[case])
    with pytest.raises(engine_side.InitError, match=r"bad\.safetensors: ") as info:
        engine_side.read_init(bad)
    assert "\n" not in str(info.value)
    if case == "wrong-format":
        assert "expected bench-init-v1" in str(info.value)


def test_missing_file_is_an_init_error(tmp_path: Path, reader: str) -> None:
    with pytest.raises(engine_side.InitError, match="missing"):
        engine_side.read_init(tmp_path / "none.safetensors")
