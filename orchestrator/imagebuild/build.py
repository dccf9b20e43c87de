"""Build an engine image with the Docker SDK, read its versions from inside, record it in the lock.

The build context is the images/ folder (only common/ and the engine's own folder are sent,
without caches), the Dockerfile is images/<engine>/Dockerfile, and the base is the build
argument BASE (image.yaml's pinned default unless --base says otherwise). RUN steps get no
network. A base that is not present locally is pulled visibly, with its progress, never
silently. A failed build is one line naming the failing step.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from orchestrator.clock import utc_now
from orchestrator.docker_client import connect, find_image
from orchestrator.errors import BadInput
from orchestrator.imagebuild import lock as lockfile
from orchestrator.imagebuild.facts import LABEL_BASE_ID, LABEL_ENGINE, repo_digest
from orchestrator.imagebuild.lock import LockBase, LockEntry
from orchestrator.imagebuild.metadata import ENGINE_LIBRARY, ImageMeta, engine_library_version, get_image_meta
from orchestrator.imagebuild.probe import ProbeResult, run_probe
from orchestrator.imagebuild.refs import ImageRef, parse_ref, require_pinned

STEP_RE = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
_SKIP_PARTS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".ipynb_checkpoints"}
_SKIP_SUFFIXES = {".pyc", ".pyo"}


class BuildReporter(Protocol):
    def note(self, message: str) -> None: ...
    def line(self, text: str) -> None: ...
    def step(self, number: int, total: int, instruction: str) -> None: ...


class QuietReporter:
    def note(self, message: str) -> None:
        pass

    def line(self, text: str) -> None:
        pass

    def step(self, number: int, total: int, instruction: str) -> None:
        pass


class BuildError(BadInput):
    """A failed image build (exit code 2): one line naming the failing step."""


@dataclass(frozen=True)
class StreamChunk:
    """One decoded chunk of the builder's (or a pull's) JSON stream: an error, the built image's id, a text."""

    error: str | None = None
    image_id: str | None = None
    text: str | None = None

    @classmethod
    def from_json(cls, chunk: Any) -> StreamChunk:
        if "error" in chunk or "errorDetail" in chunk:
            detail = chunk.get("errorDetail") or {}
            return cls(error=str(detail.get("message") or chunk.get("error") or "unknown error").strip())
        aux = chunk.get("aux")
        text = chunk.get("stream")
        if text is None and chunk.get("status"):
            text = f"{chunk['status']} {chunk.get('progress') or ''}".rstrip() + "\n"
        return cls(None, str(aux["ID"]) if isinstance(aux, dict) and aux.get("ID") else None, text or None)


@dataclass
class BuildStream:
    """Follows the legacy builder's JSON stream: steps, output lines, the image id, the error."""

    reporter: BuildReporter
    step: tuple[int, int, str] | None = None
    image_id: str | None = None
    error: str | None = None
    tail: list[str] = field(default_factory=list)
    _pending: str = ""

    def feed(self, chunk: StreamChunk) -> None:
        if chunk.error is not None:
            self.error = chunk.error
            return
        if chunk.image_id:
            self.image_id = chunk.image_id
        text = chunk.text
        if not text:
            return
        self._pending += text
        while "\n" in self._pending:
            line, self._pending = self._pending.split("\n", 1)
            self._line(line.rstrip("\r"))

    def _line(self, line: str) -> None:
        match = STEP_RE.match(line)
        if match:
            self.step = (int(match.group(1)), int(match.group(2)), match.group(3).strip())
            self.reporter.step(*self.step)
        found = re.match(r"^Successfully built ([0-9a-f]{12,64})$", line)
        if found and not self.image_id:
            self.image_id = found.group(1)
        self.tail = [*self.tail[-19:], line]
        self.reporter.line(line)

    def failure(self, engine: str) -> str:
        where = f" at step {self.step[0]}/{self.step[1]} ({_short(self.step[2])})" if self.step else ""
        said = next((line for line in reversed(self.tail) if "error:" in line), None)  # the step's own one-line error
        reason = f"{_short(said, 300)} ({_short(self.error or '', 120)})" if said else _short(self.error or "no image was produced", 300)
        return f"image build for '{engine}' failed{where}: {reason}"


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _skip(relative: Path) -> bool:
    return any(part in _SKIP_PARTS or part.startswith(".") for part in relative.parts) or relative.suffix in _SKIP_SUFFIXES


def build_context(meta: ImageMeta) -> bytes:
    """The images/ context as a tar: the engine library and the engine's folder, normalised
    (root-owned, fixed mtime, no caches) so unchanged sources hit the builder's cache."""
    root = meta.context
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for top in (root / ENGINE_LIBRARY, meta.folder):
            for path in sorted([top, *top.rglob("*")]):
                relative = path.relative_to(root)
                if _skip(relative.relative_to(relative.parts[0])) or path.is_symlink():
                    continue
                info = tar.gettarinfo(str(path), arcname=relative.as_posix())
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                info.mode = 0o755 if path.is_dir() or path.stat().st_mode & 0o100 else 0o644  # scripts stay executable
                if path.is_dir():
                    tar.addfile(info)
                else:
                    with open(path, "rb") as handle:
                        tar.addfile(info, handle)
        for path, arcname in vendor_files(meta):
            info = tar.gettarinfo(str(path), arcname=arcname)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            info.mode = 0o644
            with open(path, "rb") as handle:
                tar.addfile(info, handle)
    return buffer.getvalue()


def vendor_files(meta: ImageMeta) -> list[tuple[Path, str]]:
    """Files image.yaml's ``vendor`` block adds to the context: (path on disk, name in the context).

    Each file listed (column 2 of ``list``) comes from ``$<env>`` unless the engine folder already
    holds it under ``into``; BadInput names the first one found nowhere."""
    block = meta.vendor
    if not block:
        return []
    names = [line.split()[1] for line in (meta.folder / block["list"]).read_text().splitlines()
             if line.split() and not line.startswith("#") and len(line.split()) > 1]
    folder = os.environ.get(block["env"], "")
    out = []
    for name in names:
        if (meta.context / block["into"] / name).is_file():
            continue  # already in the context with the engine folder
        source = Path(folder).expanduser() / name if folder else None
        if source is None or not source.is_file():
            where = f"${block['env']}={folder}" if folder else f"${block['env']} (not set)"
            raise BadInput(f"image '{meta.engine}': source archive {name} not found in {where} nor images/{block['into']}/")
        out.append((source, f"{block['into']}/{name}"))
    return out


def source_revision(root: Path, paths: tuple[str, ...] = (".",)) -> str:
    """git HEAD of the checkout holding images/ (+ '-dirty' when ``paths`` under it have changes)."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", *paths], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def ensure_base(client: Any, ref: ImageRef, reporter: BuildReporter) -> Any:
    """The local base image; pulled (announced, with progress) only when it is not present."""
    image = find_image(client, str(ref))
    if image is not None:
        return image
    reporter.note(f"base {ref} is not present locally: pulling it (the only network a build uses)")
    import docker

    stream = BuildStream(reporter)
    try:
        for chunk in client.api.pull(ref.repository, tag=ref.digest or ref.tag or "latest", stream=True, decode=True):
            stream.feed(StreamChunk.from_json(chunk))
    except docker.errors.APIError as exc:
        stream.error = str(getattr(exc, "explanation", None) or exc)
    image = find_image(client, str(ref)) if not stream.error else None
    if image is None:
        raise BuildError(f"base {ref} is not present locally and could not be pulled: {_short(stream.error or 'not found', 200)}")
    return image


def resolve_base(meta: ImageMeta, base: str | None, pinned_only: bool) -> ImageRef:
    ref = base or meta.base
    return require_pinned(ref, "--base" if base else f"images/{meta.engine}/image.yaml: base") if pinned_only else parse_ref(ref, "--base")


@dataclass
class Built:
    entry: LockEntry
    lock: Path | None
    probe: ProbeResult


def build_engine_image(engine: str, base: str | None = None, *, pinned_only: bool = False, nocache: bool = False,
                       reporter: BuildReporter | None = None, record: bool = True, lock: Path | None = None) -> Built:
    """Build images/<engine>, run it once for its versions, and record the result in the lock."""
    reporter = reporter or QuietReporter()
    meta = get_image_meta(engine)
    ref = resolve_base(meta, base, pinned_only)
    client = connect()
    try:
        base_image = ensure_base(client, ref, reporter)
        digest = ref.digest or repo_digest(base_image, str(ref))
        revision = source_revision(meta.context, (ENGINE_LIBRARY, meta.folder.name))
        engine_version = engine_library_version(meta.context)
        buildargs = {"BASE": str(ref), "BASE_DIGEST": digest or "", "ENGINE_VERSION": engine_version, "SOURCE_REVISION": revision}
        labels = {LABEL_BASE_ID: base_image.id, LABEL_ENGINE: engine}
        reporter.note(f"building {meta.tag} from {ref}" + ("" if ref.pinned else " (base not pinned by digest)"))
        image_id = _build(client, meta, buildargs, labels, nocache, reporter)
        image = find_image(client, image_id)
        if image is None:
            raise BuildError(f"image build for '{engine}' reported {image_id} but the daemon does not have it")
        reporter.note(f"built {image.id}; reading its versions from inside")
        probe = run_probe(client, image.id, meta)
        fatal = probe.fatal()
        if fatal:
            _discard(client, image)
            raise BuildError(f"image for '{engine}' built from {ref} cannot run the engine ({'; '.join(fatal.values())[:300]}); "
                             f"{meta.tag} was left unchanged")
        # Only a build that passed the probe takes the tag the runtime uses.
        client.api.tag(image.id, meta.repository, "latest")
        server = client.version().get("Version")
    finally:
        client.close()
    entry = LockEntry(
        engine=engine, image=meta.tag, image_id=image.id, base=LockBase(str(ref), digest, base_image.id, ref.pinned),
        framework=_framework_name(engine), framework_version=probe.framework_version, cuda=probe.cuda, cudnn=probe.cudnn,
        python=probe.python, os=probe.os, engine_version=probe.engine_version or engine_version, built_at=utc_now(),
        source_revision=revision, dockerfile_sha256=hashlib.sha256(meta.dockerfile.read_bytes()).hexdigest(),
        docker_server=server, image_user=str(probe.uid) if probe.uid is not None else None,
    )
    path = lockfile.record(entry, lock) if record else None
    return Built(entry, path, probe)


def _discard(client: Any, image: Any) -> None:
    """Remove a rejected build unless something else (a tag) still uses it."""
    fresh = find_image(client, image.id)
    if fresh is not None and not fresh.tags:
        try:
            client.api.remove_image(image.id, noprune=False)
        except Exception:
            pass


def _framework_name(engine: str) -> str | None:
    from orchestrator.engines.registry import discover

    info = discover().get(engine)
    return info.framework if info else None


def _build(client: Any, meta: ImageMeta, buildargs: dict[str, str], labels: dict[str, str], nocache: bool, reporter: BuildReporter) -> str:
    import docker

    stream = BuildStream(reporter)
    try:
        chunks = client.api.build(
            fileobj=io.BytesIO(build_context(meta)), custom_context=True, dockerfile=meta.dockerfile.relative_to(meta.context).as_posix(),
            tag=None, buildargs=buildargs, labels=labels, rm=True, forcerm=True, pull=False, nocache=nocache,
            network_mode=meta.build_network, decode=True, use_config_proxy=False,
        )
        for chunk in chunks:
            stream.feed(StreamChunk.from_json(chunk))
            if stream.error:
                break
    except docker.errors.APIError as exc:
        stream.error = str(getattr(exc, "explanation", None) or exc)
    if stream.error or not stream.image_id:
        raise BuildError(stream.failure(meta.engine))
    return stream.image_id
