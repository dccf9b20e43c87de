"""What is known about each engine image: its metadata, its lock entry, and the local image."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.docker_client import connect, find_image
from orchestrator.errors import BadInput
from orchestrator.imagebuild import lock as lockfile
from orchestrator.imagebuild.lock import LockEntry
from orchestrator.imagebuild.metadata import ImageMeta, dockerfile_default_base, get_image_meta, image_engines


@dataclass(frozen=True)
class LocalImage:
    """The local image of an engine's tag, as the daemon describes it."""

    id: str
    tags: tuple[str, ...]
    created: str | None
    size_bytes: int | None
    user: str | None
    entrypoint: tuple[str, ...] | None
    pythonpath: str | None
    labels: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "tags": list(self.tags), "created": self.created, "size_bytes": self.size_bytes, "user": self.user,
                "entrypoint": list(self.entrypoint) if self.entrypoint is not None else None, "pythonpath": self.pythonpath,
                "labels": dict(self.labels)}


@dataclass(frozen=True)
class ImageRow:
    """One engine image in ``bench image list``: base, local and locked image ids, versions, status."""

    engine: str
    image: str
    default_base: str
    default_base_pinned: bool
    local_image_id: str | None
    locked_image_id: str | None
    built_from: str | None
    framework_version: str | None
    cuda: str | None
    cudnn: str | None
    built_at: str | None
    status: str

    def to_json(self) -> dict[str, str | bool | None]:
        return {"engine": self.engine, "image": self.image, "default_base": self.default_base, "default_base_pinned": self.default_base_pinned,
                "local_image_id": self.local_image_id, "locked_image_id": self.locked_image_id, "built_from": self.built_from,
                "framework_version": self.framework_version, "cuda": self.cuda, "cudnn": self.cudnn, "built_at": self.built_at,
                "status": self.status}


@dataclass(frozen=True)
class ImageInspection:
    """Everything known about one engine's image (``bench image inspect``). ``daemon``: why the daemon was not asked."""

    meta: ImageMeta
    dockerfile_arg_base: str | None
    lock_file: str
    lock: LockEntry | None
    local: LocalImage | None
    status: str
    daemon: str | None = None

    @property
    def metadata_consistent(self) -> bool:
        return self.dockerfile_arg_base == self.meta.base

    def to_json(self) -> dict[str, Any]:
        meta = self.meta
        return {"engine": meta.engine, "image": meta.tag, "dockerfile": str(meta.dockerfile), "default_base": meta.base,
                "default_base_pinned": meta.base_ref.pinned, "dockerfile_arg_base": self.dockerfile_arg_base,
                "metadata_consistent": self.metadata_consistent, "base_note": meta.base_note, "provides": meta.provides,
                "lock_file": self.lock_file, "lock": self.lock.to_json() if self.lock else None,
                "local": self.local.to_json() if self.local else None, "status": self.status,
                **({"daemon": self.daemon} if self.daemon else {})}


def _client() -> tuple[Any | None, str | None]:
    try:
        return connect(), None
    except BadInput as exc:
        return None, str(exc)


def local_image(client: Any, meta: ImageMeta) -> LocalImage | None:
    image = find_image(client, meta.tag)
    if image is None:
        return None
    attrs = image.attrs
    config = attrs.get("Config") or {}
    env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    entrypoint = config.get("Entrypoint")
    return LocalImage(image.id, tuple(image.tags), attrs.get("Created"), attrs.get("Size"), config.get("User"),
                      tuple(entrypoint) if entrypoint is not None else None, env.get("PYTHONPATH"), dict(config.get("Labels") or {}))


def _status(local: LocalImage | None, entry: LockEntry | None, daemon_error: str | None) -> str:
    if daemon_error:
        return "unknown (daemon unreachable)"
    if local is None:
        return "not built"
    if entry is None:
        return "built, not in lock"
    return "built" if entry.image_id == local.id else "built, differs from lock"


def image_rows() -> list[ImageRow]:
    """One row per engine image: base, local and locked image ids, versions, status."""
    client, error = _client()
    lock = lockfile.entries()
    rows = []
    try:
        for name, meta in sorted(image_engines().items()):
            entry = lock.get(name)
            local = local_image(client, meta) if client else None
            rows.append(ImageRow(
                name, meta.tag, meta.base, meta.base_ref.pinned, local.id if local else None,
                entry.image_id if entry else None, entry.base.ref if entry else None, entry.framework_version if entry else None,
                entry.cuda if entry else None, entry.cudnn if entry else None, entry.built_at if entry else None,
                _status(local, entry, error)))
    finally:
        if client:
            client.close()
    return rows


def inspect_image(engine: str) -> ImageInspection:
    meta = get_image_meta(engine)
    client, error = _client()
    try:
        local = local_image(client, meta) if client else None
    finally:
        if client:
            client.close()
    entry = lockfile.locked(engine)
    return ImageInspection(meta, dockerfile_default_base(meta), str(lockfile.lock_path()), entry, local, _status(local, entry, error), error)
