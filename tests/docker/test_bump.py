"""``bench image bump`` on a copy of images/: pins by the local image's registry digest, rebuilds
(faked here), and only then rewrites image.yaml and the Dockerfile; --require-pinned refuses."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

import orchestrator.imagebuild.bump as bump_module
import orchestrator.imagebuild.metadata as metadata
from orchestrator.errors import BadInput
from orchestrator.imagebuild.build import BuildError, Built
from orchestrator.imagebuild.lock import LockBase, LockEntry
from orchestrator.imagebuild.probe import ProbeResult
from tests.docker.conftest import REPO, FakeClient, FakeImage

DIGEST = "sha256:" + "c" * 64


@pytest.fixture()
def images(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "images"
    shutil.copytree(REPO / "images", root, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(metadata, "images_dir", lambda: root)
    return root


def _fake_build(calls: list):
    def build(engine, base, **kwargs):
        calls.append((engine, base, kwargs.get("pinned_only")))
        entry = LockEntry(engine, f"bench/{engine}:latest", "sha256:" + "d" * 64, LockBase(base, DIGEST, "sha256:" + "e" * 64, True),
                          "JAX", "0.11.0", "13.4", "9.20.0", "3.12.3", "Ubuntu 24.04.3 LTS", None, "2026-01-01T00:00:00Z", "abc")
        return Built(entry, None, ProbeResult())
    return build


def test_bump_pins_the_local_digest_then_rewrites_metadata(images: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local = FakeImage("sha256:" + "e" * 64)
    local.attrs["RepoDigests"] = [f"nvcr.io/nvidia/jax@{DIGEST}"]
    monkeypatch.setattr(bump_module, "connect", lambda: FakeClient(images={"nvcr.io/nvidia/jax:26.08-py3": local}))
    calls: list = []
    monkeypatch.setattr(bump_module, "build_engine_image", _fake_build(calls))
    bump_module.bump_engine_image("jax", "nvcr.io/nvidia/jax:26.08-py3", pinned_only=True)
    pinned = f"nvcr.io/nvidia/jax:26.08-py3@{DIGEST}"
    assert calls == [("jax", pinned, True)]
    doc = yaml.safe_load((images / "jax" / "image.yaml").read_text())
    assert doc["base"] == pinned and "RepoDigests" in doc["base_note"]
    assert doc["provides"] == {"framework": "JAX 0.11.0", "cuda": "13.4", "cudnn": "9.20.0", "python": "3.12.3", "os": "Ubuntu 24.04.3 LTS", "measured": True}
    dockerfile = (images / "jax" / "Dockerfile").read_text()
    assert f"ARG BASE={pinned}\n" in dockerfile and f"ARG BASE_DIGEST={DIGEST}\n" in dockerfile and "NOT pinned" not in dockerfile
    assert metadata.get_image_meta("jax").base == pinned


def test_bump_refuses_unpinned_with_require_pinned_and_changes_nothing(images: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = (images / "jax" / "image.yaml").read_text()
    monkeypatch.setattr(bump_module, "connect", lambda: FakeClient(images={}))
    monkeypatch.setattr(bump_module, "build_engine_image", _fake_build([]))
    with pytest.raises(BadInput, match="not pinned by digest"):
        bump_module.bump_engine_image("jax", "nvcr.io/nvidia/jax:26.08-py3", pinned_only=True)
    assert (images / "jax" / "image.yaml").read_text() == before


def test_failed_rebuild_leaves_the_metadata_alone(images: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = {p: p.read_text() for p in (images / "pytorch" / "image.yaml", images / "pytorch" / "Dockerfile")}

    def failing(*args, **kwargs):
        raise BuildError("image build for 'pytorch' failed at step 2/9 (FROM ${BASE}): pull access denied")

    monkeypatch.setattr(bump_module, "build_engine_image", failing)
    with pytest.raises(BuildError, match="step 2/9"):
        bump_module.bump_engine_image("pytorch", f"nvcr.io/nvidia/pytorch:26.08-py3@{DIGEST}")
    assert {p: p.read_text() for p in before} == before
