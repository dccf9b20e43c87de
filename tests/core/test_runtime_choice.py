"""``--runtime auto`` says what it chose in one line, for every engine at once, in the right words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest

from orchestrator.engines.registry import EngineInfo
from orchestrator.errors import BadInput
from orchestrator.imagebuild.facts import ImageFacts
from orchestrator.run import execute
from orchestrator.run.runtime_choice import RuntimeChoice, choice_line, lock_note, without_suggestion
from orchestrator.runtimes import RuntimeFacts, RuntimeSettings
from orchestrator.runtimes.base import Execution, Runtime
from tests.core.cli_helpers import use_fake_engines

UNREACHABLE = "Docker daemon unreachable at unix:///var/run/docker.sock: connection refused; start it, or use --runtime local"
IMAGE = "sha256:" + "c" * 64


class Notes:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, message: str) -> None:
        self.notes.append(message)


class FakeLocal(Runtime):
    name = "local"

    def check(self, engine: EngineInfo, settings: RuntimeSettings) -> RuntimeFacts:
        return RuntimeFacts(self.name, interpreter="/usr/bin/python3")

    def execute(self, engine, paths, settings, timeout_s, sink) -> Execution:  # never run here
        raise AssertionError("not run")


class FakeDocker(FakeLocal):
    name = "docker"
    built: ClassVar[set[str]] = set()

    def check(self, engine: EngineInfo, settings: RuntimeSettings) -> RuntimeFacts:
        if engine.name not in self.built:
            raise BadInput(UNREACHABLE)
        return RuntimeFacts(self.name, image=f"bench/{engine.name}:latest", image_facts=ImageFacts(IMAGE))

    def availability(self, engine: EngineInfo, settings: RuntimeSettings) -> tuple[bool, str]:
        try:
            info = self.check(engine, settings)
        except BadInput as exc:
            return False, str(exc)
        return True, f"image {info.image} ({IMAGE[:19]})"


@pytest.fixture()
def fakes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> type[FakeDocker]:
    use_fake_engines(monkeypatch)
    runtimes = {"local": FakeLocal, "docker": FakeDocker}
    monkeypatch.setattr(execute, "runtime_names", lambda: sorted(runtimes))
    monkeypatch.setattr(execute, "get_runtime", lambda name: runtimes[name]())
    monkeypatch.setenv("BENCH_IMAGES_LOCK", str(tmp_path / "images.lock.json"))  # an empty lock: no image is locked
    FakeDocker.built = set()
    return FakeDocker


def _choose(requested: str = "auto") -> list[str]:
    notes = Notes()
    engines = ["fake", "fake2"]
    execute.choose_runtimes(engines, requested, {name: RuntimeSettings() for name in engines}, notes)  # type: ignore[arg-type]
    return notes.notes


def test_one_line_for_every_engine_never_suggesting_the_runtime_chosen(fakes: type[FakeDocker]) -> None:
    notes = _choose()
    assert notes == ["runtime auto -> local for fake, fake2 (docker: Docker daemon unreachable at unix:///var/run/docker.sock: "
                     "connection refused; start it)"]
    assert "--runtime local" not in notes[0]


def test_docker_for_one_engine_names_its_image_and_that_it_is_not_locked(fakes: type[FakeDocker]) -> None:
    fakes.built = {"fake2"}
    (notes,) = _choose()
    assert notes.startswith("runtime auto -> local for fake (docker: ")
    assert notes.endswith(f"; docker for fake2 (image bench/fake2:latest ({IMAGE[:19]}), not in images.lock.json)")


def test_no_line_for_a_runtime_asked_for(fakes: type[FakeDocker]) -> None:
    assert _choose("local") == []


def test_lock_note(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from orchestrator.imagebuild.lock import SCHEMA_VERSION

    lock = tmp_path / "images.lock.json"
    monkeypatch.setenv("BENCH_IMAGES_LOCK", str(lock))
    assert lock_note("pytorch", IMAGE) == ", not in images.lock.json"
    entry = {"engine": "pytorch", "image": "bench/pytorch:latest", "image_id": IMAGE, "framework_version": "2.9", "cuda": None, "cudnn": None,
             "base": {"ref": "nvcr.io/nvidia/pytorch:26.07-py3", "digest": None, "image_id": None, "pinned": False},
             "built_at": "2026-01-01T00:00:00Z", "source_revision": "abc"}
    lock.write_text(json.dumps({"schema_version": SCHEMA_VERSION, "images": {"pytorch": entry}}))
    assert lock_note("pytorch", IMAGE) == ""  # the locked image: nothing to say
    assert lock_note("pytorch", "sha256:" + "d" * 64) == ", not the image of images.lock.json"


def test_wording() -> None:
    assert without_suggestion("no GPUs (install the toolkit and restart dockerd, or use --runtime local)", "local") == \
        "no GPUs (install the toolkit and restart dockerd)"
    assert without_suggestion("start it, or use --runtime local", "docker") == "start it, or use --runtime local"
    line = choice_line([RuntimeChoice("jax", "local", "docker: engine 'jax': docker image 'bench/jax:latest' is not built"),
                        RuntimeChoice("pytorch", "local", "docker: engine 'pytorch': docker image 'bench/pytorch:latest' is not built")])
    assert line == "runtime auto -> local for jax, pytorch (docker: docker image 'bench/ENGINE:latest' is not built)"
