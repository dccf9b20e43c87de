"""What is known about each engine image: its metadata, its lock entry, and the local image."""

from __future__ import annotations

from typing import Any

from orchestrator.docker_client import connect, find_image
from orchestrator.errors import BadInput
from orchestrator.imagebuild import lock as lockfile
from orchestrator.imagebuild.metadata import ImageMeta, dockerfile_default_base, get_image_meta, image_engines


def _client() -> tuple[Any | None, str | None]:
    try:
        return connect(), None
    except BadInput as exc:
        return None, str(exc)


def local_image(client: Any, meta: ImageMeta) -> dict[str, Any] | None:
    image = find_image(client, meta.tag)
    if image is None:
        return None
    attrs = image.attrs
    config = attrs.get("Config") or {}
    env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    return {
        "id": image.id,
        "tags": image.tags,
        "created": attrs.get("Created"),
        "size_bytes": attrs.get("Size"),
        "user": config.get("User"),
        "entrypoint": config.get("Entrypoint"),
        "pythonpath": env.get("PYTHONPATH"),
        "labels": config.get("Labels") or {},
    }


def _status(local: dict[str, Any] | None, entry: dict[str, Any] | None, daemon_error: str | None) -> str:
    if daemon_error:
        return "unknown (daemon unreachable)"
    if local is None:
        return "not built"
    if entry is None:
        return "built, not in lock"
    return "built" if entry["image_id"] == local["id"] else "built, differs from lock"


def image_rows() -> list[dict[str, Any]]:
    """One row per engine image: base, local and locked image ids, versions, status."""
    client, error = _client()
    lock = lockfile.read_lock()["images"]
    rows = []
    try:
        for name, meta in sorted(image_engines().items()):
            entry = lock.get(name)
            local = local_image(client, meta) if client else None
            rows.append({
                "engine": name,
                "image": meta.tag,
                "default_base": meta.base,
                "default_base_pinned": meta.base_ref.pinned,
                "local_image_id": local["id"] if local else None,
                "locked_image_id": entry["image_id"] if entry else None,
                "built_from": entry["base"]["ref"] if entry else None,
                "framework_version": entry.get("framework_version") if entry else None,
                "cuda": entry.get("cuda") if entry else None,
                "cudnn": entry.get("cudnn") if entry else None,
                "built_at": entry.get("built_at") if entry else None,
                "status": _status(local, entry, error),
            })
    finally:
        if client:
            client.close()
    return rows


def inspect_image(engine: str) -> dict[str, Any]:
    meta = get_image_meta(engine)
    client, error = _client()
    try:
        local = local_image(client, meta) if client else None
    finally:
        if client:
            client.close()
    entry = lockfile.locked(engine)
    arg_default = dockerfile_default_base(meta)
    return {
        "engine": engine,
        "image": meta.tag,
        "dockerfile": str(meta.dockerfile),
        "default_base": meta.base,
        "default_base_pinned": meta.base_ref.pinned,
        "dockerfile_arg_base": arg_default,
        "metadata_consistent": arg_default == meta.base,
        "base_note": meta.base_note,
        "provides": meta.provides,
        "lock_file": str(lockfile.lock_path()),
        "lock": entry,
        "local": local,
        "status": _status(local, entry, error),
        **({"daemon": error} if error else {}),
    }
