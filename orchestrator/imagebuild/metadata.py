"""Image metadata: images/<engine>/image.yaml next to the engine's Dockerfile.

image.yaml names the engine, the local repository bench tags its image into, the pinned
default base (``base``, also the Dockerfile's ``ARG BASE`` default), what that base provides,
and how to read the framework/CUDA/cuDNN versions inside a built image (``probe``).
Adding a framework = a new images/<name>/ folder with these files; nothing here changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from orchestrator.errors import BadInput
from orchestrator.imagebuild.refs import ImageRef, parse_ref
from orchestrator.paths import images_dir

META_FILE = "image.yaml"
ENGINE_LIBRARY = "common/bench_engine"
_BASE_ARG = re.compile(r"^ARG BASE=.*$", re.M)
_DIGEST_ARG = re.compile(r"^ARG BASE_DIGEST=.*$", re.M)
_UNPINNED_NOTE = re.compile(r"^# NOT pinned by digest yet:.*\n(?:# .*\n)?(?=ARG BASE=)", re.M)


@dataclass(frozen=True)
class ImageMeta:
    """What bench knows about one engine image from its image.yaml."""

    engine: str
    folder: Path
    repository: str
    dockerfile: Path
    base: str
    base_note: str
    provides: dict[str, Any] = field(default_factory=dict)
    probe: dict[str, str] = field(default_factory=dict)
    module: str = ""
    build_network: str = "none"  # docker build network mode ("default" for images that apt-install their build tools)
    vendor: dict[str, str] = field(default_factory=dict)  # {env, list, into}: files added to the context (build_context)

    @property
    def tag(self) -> str:
        """The local tag the runtime runs (bench never pulls or pushes it)."""
        return f"{self.repository}:latest"

    @property
    def base_ref(self) -> ImageRef:
        return parse_ref(self.base, f"images/{self.engine}/{META_FILE}: base")

    @property
    def context(self) -> Path:
        """The build context: the images/ folder, so common/ is reachable."""
        return self.folder.parent


def _load(meta_file: Path) -> ImageMeta:
    try:
        doc = yaml.safe_load(meta_file.read_text()) or {}
    except yaml.YAMLError as exc:
        raise BadInput(f"{meta_file}: not valid YAML ({exc.__class__.__name__})") from None
    folder = meta_file.parent
    for key in ("engine", "repository", "base"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise BadInput(f"{meta_file}: '{key}' is missing")
    dockerfile = folder / doc.get("dockerfile", "Dockerfile")
    return ImageMeta(
        engine=doc["engine"],
        folder=folder,
        repository=doc["repository"],
        dockerfile=dockerfile,
        base=doc["base"],
        base_note=str(doc.get("base_note") or ""),
        provides=dict(doc.get("provides") or {}),
        probe={str(k): str(v) for k, v in (doc.get("probe") or {}).items()},
        module=str(doc.get("module") or f"bench_{doc['engine']}"),
        build_network=str(doc.get("build_network") or "none"),
        vendor={str(k): str(v) for k, v in (doc.get("vendor") or {}).items()},
    )


@cache
def _discover(root: Path) -> dict[str, ImageMeta]:
    found: dict[str, ImageMeta] = {}
    for meta_file in sorted(root.glob(f"*/{META_FILE}")):
        meta = _load(meta_file)
        if meta.dockerfile.is_file():
            found[meta.engine] = meta
    return found


def image_engines() -> dict[str, ImageMeta]:
    """Every engine that has an image (images/<engine>/image.yaml + Dockerfile)."""
    return dict(_discover(images_dir()))


def get_image_meta(engine: str) -> ImageMeta:
    metas = image_engines()
    if engine not in metas:
        known = ", ".join(sorted(metas)) or "none"
        raise BadInput(f"engine '{engine}' has no image (images/{engine}/{META_FILE} and Dockerfile; engines with images: {known})")
    return metas[engine]


def dockerfile_default_base(meta: ImageMeta) -> str | None:
    """The Dockerfile's ``ARG BASE=`` default (kept equal to image.yaml's base)."""
    match = _BASE_ARG.search(meta.dockerfile.read_text())
    return match.group(0).split("=", 1)[1].strip() if match else None


def engine_library_version(root: Path | None = None) -> str:
    """ENGINE_LIB_VERSION of images/common/bench_engine (read from its result module, not imported)."""
    init = (root or images_dir()) / ENGINE_LIBRARY / "result.py"
    match = re.search(r"^ENGINE_LIB_VERSION\s*=\s*['\"]([^'\"]+)['\"]", init.read_text(), re.M)
    return match.group(1) if match else "unknown"


def _replace_line(text: str, key: str, value: str) -> str:
    pattern = re.compile(rf"^{re.escape(key)}:.*$", re.M)
    line = f"{key}: {value}"
    return pattern.sub(lambda _: line, text, count=1) if pattern.search(text) else text.rstrip("\n") + "\n" + line + "\n"


def set_default_base(meta: ImageMeta, base: ImageRef, note: str, provides: dict[str, str | bool | None] | None = None) -> dict[Path, str]:
    """Point image.yaml's ``base`` and the Dockerfile's ARG defaults at ``base``.

    Returns the previous contents of both files (to restore them if the rebuild fails).
    Comments and the rest of both files are kept: only those lines are rewritten.
    """
    meta_file = meta.folder / META_FILE
    previous = {meta_file: meta_file.read_text(), meta.dockerfile: meta.dockerfile.read_text()}
    text = _replace_line(previous[meta_file], "base", str(base))
    text = _replace_line(text, "base_note", yaml.safe_dump(note, default_style='"', width=10_000).strip())
    if provides is not None:
        flow = yaml.safe_dump(provides, default_flow_style=True, sort_keys=False, width=10_000).strip()
        text = _replace_line(text, "provides", flow)
    yaml.safe_load(text)  # still valid
    docker_text = previous[meta.dockerfile]
    if not _BASE_ARG.search(docker_text):
        raise BadInput(f"{meta.dockerfile}: no 'ARG BASE=' line to update")
    docker_text = _BASE_ARG.sub(lambda _: f"ARG BASE={base}", docker_text, count=1)
    docker_text = _DIGEST_ARG.sub(lambda _: f"ARG BASE_DIGEST={base.digest or ''}", docker_text, count=1)
    if base.pinned:
        docker_text = _UNPINNED_NOTE.sub("", docker_text, count=1)
    meta_file.write_text(text)
    meta.dockerfile.write_text(docker_text)
    _discover.cache_clear()
    return previous


def restore(previous: dict[Path, str]) -> None:
    for path, text in previous.items():
        path.write_text(text)
    _discover.cache_clear()
