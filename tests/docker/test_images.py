"""Image metadata, references, the build stream, the build context, the lock file and the CLI's
input errors (no daemon needed)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from orchestrator.errors import BadInput
from orchestrator.imagebuild import lock as lockfile
from orchestrator.imagebuild.build import BuildError, BuildStream, QuietReporter, StreamChunk, _build, build_context
from orchestrator.imagebuild.metadata import _load, dockerfile_default_base, get_image_meta, image_engines, set_default_base
from orchestrator.imagebuild.probe import ProbeResult, parse_probe_output, probe_spec
from orchestrator.imagebuild.refs import parse_ref, require_pinned
from tests.docker.conftest import REPO

DIGEST = "sha256:" + "0123456789abcdef" * 4
ENTRY_KEYS = tuple(lockfile.ENTRY_SCHEMA["properties"])  # the order bench image build writes an entry's keys in


def bench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})}, timeout=120)


# -- references -------------------------------------------------------------------------------

def test_parse_refs() -> None:
    ref = parse_ref(f"nvcr.io/nvidia/pytorch:26.07-py3@{DIGEST}")
    assert (ref.repository, ref.tag, ref.digest, ref.pinned) == ("nvcr.io/nvidia/pytorch", "26.07-py3", DIGEST, True)
    assert str(ref) == f"nvcr.io/nvidia/pytorch:26.07-py3@{DIGEST}"
    local = parse_ref("localhost:5000/team/img:1")
    assert (local.repository, local.tag, local.pinned) == ("localhost:5000/team/img", "1", False)
    assert parse_ref("bench-test-base:bookworm").with_digest(DIGEST).pinned


@pytest.mark.parametrize("bad", ["", "Upper/Case:1", "img:tag@sha256:123", "img@md5:abc", "a b"])
def test_bad_refs(bad: str) -> None:
    with pytest.raises(BadInput, match="--base"):
        parse_ref(bad)


def test_require_pinned() -> None:
    assert require_pinned(f"img:1@{DIGEST}").pinned
    with pytest.raises(BadInput, match="not pinned by digest"):
        require_pinned("nvcr.io/nvidia/pytorch:26.07-py3")


# -- metadata -----------------------------------------------------------------------------------

def test_every_framework_has_an_image_with_consistent_metadata() -> None:
    metas = image_engines()
    assert {"pytorch", "jax", "tensorflow"} <= set(metas)
    for name, meta in metas.items():
        assert meta.engine == name and meta.tag == f"bench/{name}:latest" and meta.module == f"bench_{name}"
        assert dockerfile_default_base(meta) == meta.base, f"{name}: Dockerfile ARG BASE != image.yaml base"
        text = meta.dockerfile.read_text()
        assert "FROM ${BASE}" in text and f'ENTRYPOINT ["python3", "-m", "bench_{name}"]' in text
        assert "USER 10001:10001" in text
        # Python engines install nothing (no network, any python); a compiled engine (OpenNN) says it builds
        assert "RUN " not in text or (meta.build_network != "none" and meta.vendor)
        for label in ("base.name", "base.digest", "version", "revision"):
            assert f"org.opencontainers.image.{label}=" in text
        assert meta.base_note and meta.probe.get("module")
        if not meta.base_ref.pinned:  # said honestly, never hidden
            assert "NOT PINNED BY DIGEST" in meta.base_note and "NOT pinned by digest" in text
    assert metas["pytorch"].base_ref.pinned and metas["pytorch"].base.startswith("nvcr.io/nvidia/pytorch:")
    assert metas["jax"].base.startswith("nvcr.io/nvidia/jax:") and metas["tensorflow"].base.startswith("tensorflow/tensorflow:")
    assert metas["tensorflow"].base.endswith("-gpu")


def test_unknown_engine_image() -> None:
    with pytest.raises(BadInput, match="has no image"):
        get_image_meta("nope")


def test_bump_rewrites_only_the_base_lines(tmp_path: Path) -> None:
    folder = tmp_path / "jax"
    shutil.copytree(REPO / "images" / "jax", folder, ignore=shutil.ignore_patterns("bench_jax"))
    meta = _load(folder / "image.yaml")
    new = parse_ref(f"nvcr.io/nvidia/jax:26.08-py3@{DIGEST}")
    previous = set_default_base(meta, new, "bumped: test", {"framework": "JAX 9.9", "cuda": "13.4", "measured": True})
    doc = yaml.safe_load((folder / "image.yaml").read_text())
    assert doc["base"] == str(new) and doc["base_note"] == "bumped: test" and doc["provides"]["cuda"] == "13.4"
    assert doc["probe"] == yaml.safe_load(previous[folder / "image.yaml"])["probe"]
    text = (folder / "Dockerfile").read_text()
    assert f"ARG BASE={new}\n" in text and f"ARG BASE_DIGEST={DIGEST}\n" in text and "NOT pinned" not in text
    assert (folder / "image.yaml").read_text().startswith("# bench image metadata")


# -- the build stream ---------------------------------------------------------------------------

def test_build_stream_names_the_failing_step() -> None:
    stream = BuildStream(QuietReporter())
    for chunk in ({"stream": "Step 1/4 : ARG BASE=x\n"}, {"stream": "Step 2/4 : FROM ${BASE}\n ---> 1234\n"},
                  {"stream": "Step 3/4 : COPY common/bench_engine /opt/bench/lib/bench_engine\n"},
                  {"errorDetail": {"message": "COPY failed: file not found in build context"}, "error": "COPY failed"}):
        stream.feed(StreamChunk.from_json(chunk))
    message = stream.failure("pytorch")
    assert message == ("image build for 'pytorch' failed at step 3/4 (COPY common/bench_engine /opt/bench/lib/bench_engine): "
                       "COPY failed: file not found in build context")


def test_build_stream_image_id_and_split_lines() -> None:
    seen: list[str] = []

    class Lines(QuietReporter):
        def line(self, text: str) -> None:
            seen.append(text)

    stream = BuildStream(Lines())
    for chunk in ({"stream": "Step 1/1 : FR"}, {"stream": "OM x\n"}, {"aux": {"ID": DIGEST}}, {"stream": "Successfully built 0123456789ab\n"}):
        stream.feed(StreamChunk.from_json(chunk))
    assert seen == ["Step 1/1 : FROM x", "Successfully built 0123456789ab"] and stream.image_id == DIGEST and stream.step == (1, 1, "FROM x")


def test_stream_chunks() -> None:
    assert StreamChunk.from_json({"status": "Downloading", "progress": "[==> ]"}) == StreamChunk(text="Downloading [==> ]\n")
    assert StreamChunk.from_json({"error": "boom ", "aux": {"ID": DIGEST}}) == StreamChunk(error="boom")
    assert StreamChunk.from_json({"errorDetail": {}}) == StreamChunk(error="unknown error")
    assert StreamChunk.from_json({"aux": {"ID": DIGEST}, "stream": ""}) == StreamChunk(image_id=DIGEST)


def test_failed_build_is_a_one_line_bad_input() -> None:
    class API:
        def build(self, **kwargs):
            yield {"stream": "Step 1/2 : FROM scratch\n"}
            yield {"stream": "Step 2/2 : RUN false\n"}
            yield {"error": "The command '/bin/sh -c false' returned a non-zero code: 1",
                   "errorDetail": {"code": 1, "message": "The command '/bin/sh -c false' returned a non-zero code: 1"}}

    class Client:
        api = API()

    with pytest.raises(BuildError) as err:
        _build(Client(), get_image_meta("pytorch"), {}, {}, False, QuietReporter())
    assert isinstance(err.value, BadInput)
    assert str(err.value) == "image build for 'pytorch' failed at step 2/2 (RUN false): The command '/bin/sh -c false' returned a non-zero code: 1"


def test_build_context_holds_only_the_library_and_the_engine() -> None:
    cache = REPO / "images" / "pytorch" / "bench_pytorch" / "__pycache__"
    names = tarfile.open(fileobj=io.BytesIO(build_context(get_image_meta("pytorch")))).getnames()
    assert "common/bench_engine/__init__.py" in names and "pytorch/bench_pytorch/__main__.py" in names and "pytorch/Dockerfile" in names
    assert not any(n.startswith(("jax/", "tensorflow/")) or "__pycache__" in n or n.endswith(".pyc") for n in names), cache
    members = tarfile.open(fileobj=io.BytesIO(build_context(get_image_meta("pytorch")))).getmembers()
    assert all(m.uid == 0 and m.mtime == 0 for m in members)


def test_probe_spec_and_output() -> None:
    spec = probe_spec(get_image_meta("pytorch"))
    assert spec.module == "torch" and spec.adapter == "bench_pytorch" and set(spec.fields) >= {"framework_version", "cuda", "cudnn"}
    assert list(spec.to_json()) == ["module", "adapter", "fields"]
    assert parse_probe_output("noise\nBENCH_PROBE {\"cuda\": \"13.0\"}\n") == ProbeResult(cuda="13.0")
    assert parse_probe_output("Traceback ...") is None and parse_probe_output("BENCH_PROBE [1]") is None
    found = parse_probe_output('BENCH_PROBE {"uid": 0, "errors": {"adapter": "x is not importable", "cuda": "no"}, "from_env": ["cudnn"]}')
    assert found is not None and found.uid == 0 and found.fatal() == {"adapter": "x is not importable"} and found.from_env == ("cudnn",)


def test_probe_runs_against_the_local_python() -> None:
    """The probe script itself, run by this interpreter (torch is a test dependency here)."""
    pytest.importorskip("torch")
    from orchestrator.imagebuild.probe import PROBE_SOURCE

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "images" / "common"), str(REPO / "images" / "pytorch")])}
    proc = subprocess.run([sys.executable, "-c", PROBE_SOURCE, json.dumps(probe_spec(get_image_meta("pytorch")).to_json())],
                          capture_output=True, text=True, env=env, timeout=120)
    found = parse_probe_output(proc.stdout)
    import torch

    assert found and found.framework_version == torch.__version__ and found.engine_version and not found.errors


# -- the lock file ------------------------------------------------------------------------------

def _entry(engine: str = "pytorch") -> lockfile.LockEntry:
    return lockfile.LockEntry.from_json({
        "engine": engine, "image": f"bench/{engine}:latest", "image_id": DIGEST,
        "base": {"ref": "b:1", "digest": None, "image_id": DIGEST, "pinned": False},
        "framework_version": "2.13.0", "cuda": None, "cudnn": None, "built_at": "2026-01-01T00:00:00Z", "source_revision": "abc",
        "dockerfile_sha256": "f" * 64})


def test_lock_record_and_read(tmp_path: Path) -> None:
    path = tmp_path / "lock.json"
    assert lockfile.read_lock(path)["images"] == {}
    lockfile.record(_entry("pytorch"), path)
    lockfile.record(_entry("jax"), path)
    document = json.loads(path.read_text())
    assert list(document["images"]) == ["jax", "pytorch"] and lockfile.locked("pytorch", path) == _entry("pytorch")
    assert list(document["images"]["jax"]) == list(ENTRY_KEYS) and document["images"]["jax"]["base"]["ref"] == "b:1"
    lockfile.record(replace(_entry("tensorflow"), dockerfile_sha256=None), path)  # a key the schema lets an entry lack
    assert "dockerfile_sha256" not in json.loads(path.read_text())["images"]["tensorflow"]
    bad = replace(_entry(), image_id="not-a-digest")
    with pytest.raises(BadInput, match="image_id"):
        lockfile.record(bad, path)


def test_committed_lock_is_valid() -> None:
    document = lockfile.read_lock(REPO / "images" / "images.lock.json")
    assert document["schema_version"] == 1


# -- the CLI's input errors (exit 2, one line, no daemon needed) -----------------------------------

def test_require_pinned_refuses_an_unpinned_base() -> None:
    proc = bench("image", "build", "pytorch", "--base", "bench-test-base:whatever", "--require-pinned")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: --base: 'bench-test-base:whatever' is not pinned by digest (--require-pinned wants name:tag@sha256:<digest>)"]
    proc = bench("image", "build", "jax", "--require-pinned")
    assert proc.returncode == 2 and "images/jax/image.yaml: base" in proc.stderr


def test_unreachable_daemon_is_exit_2(tmp_path: Path) -> None:
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no.sock", "BENCH_DATA_DIR": str(tmp_path / "data")}
    proc = bench("image", "build", "pytorch", "--base", "x:1", "--lock", str(tmp_path / "l.json"), env=env)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith("error: Docker daemon unreachable")
    proc = bench("scenario", "run", "scenarios/cifar_resnet50.yaml", "--smoke", "--engines", "pytorch", "--precisions", "fp32",
                 "--runtime", "docker", "--out", str(tmp_path / "out"), env=env)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith("error: Docker daemon unreachable")
    listed = bench("image", "list", "--json", env=env)
    assert listed.returncode == 0 and {r["status"] for r in json.loads(listed.stdout)} == {"unknown (daemon unreachable)"}
    inspected = bench("image", "inspect", "tensorflow", "--json", env=env)
    facts = json.loads(inspected.stdout)
    assert facts["metadata_consistent"] and facts["default_base_pinned"] is False and "unreachable" in facts["daemon"]
