"""Who a run's container runs as, and its write access to the run folder and the cache volume."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from orchestrator.docker_client import RUN_LABEL
from orchestrator.runtimes.docker_options import CACHE_VOLUME

NOBODY = "65534:65534"


def image_user(image: Any) -> str:
    """The image's ``USER`` as uid:gid, never root (65534:65534 when it has none, names root, or is not numeric)."""
    user = str(((getattr(image, "attrs", None) or {}).get("Config") or {}).get("User") or "")
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or int(uid) == 0 or (gid and (not gid.isdigit() or int(gid) == 0)):
        return NOBODY
    return f"{uid}:{gid or uid}"


def cache_volume(client: Any, user: str) -> str | None:
    """The compile-cache volume, its root owned by ``user`` (created when missing). None when its
    folder on the host cannot be reached from here (a remote or rootless daemon): caches then stay in /tmp."""
    try:
        try:
            volume = client.volumes.get(CACHE_VOLUME)
        except Exception:
            volume = client.volumes.create(CACHE_VOLUME, labels={RUN_LABEL: "compile-cache"})
        mountpoint = Path(volume.attrs["Mountpoint"])
        uid, gid = (int(part) for part in user.split(":"))
        stat = mountpoint.stat()
        if (stat.st_uid, stat.st_gid) != (uid, gid):
            os.chown(mountpoint, uid, gid)
        return CACHE_VOLUME
    except Exception:
        return None


class RunFolderAccess:
    """The container's user and its write access to the run folder, for the duration of a run.

    bench as root: the image's non-root user, the run folder (and what is in it) handed to that
    uid for the run and back to bench's afterwards, the dataset split made readable to all (it is
    mounted read-only; its files hold nothing secret). Otherwise the invoking uid:gid (not root),
    which owns the folder already; its compilation caches then stay in the container's tmpfs.
    """

    def __init__(self, run_dir: Path, user: str, dataset: Path | None = None) -> None:
        self.run_dir, self.dataset = run_dir, dataset
        self.image_user = os.getuid() == 0
        self.user = user if self.image_user else f"{os.getuid()}:{os.getgid()}"
        self.note: str | None = None

    def _chown(self, uid: int, gid: int) -> None:
        for path in (self.run_dir, *self.run_dir.rglob("*")):
            if not path.is_symlink():
                os.chown(path, uid, gid)

    def __enter__(self) -> RunFolderAccess:
        if self.image_user and self.dataset is not None and self.dataset.is_dir():  # the split: readable by the container's user
            for path in (self.dataset, *self.dataset.iterdir()):
                if not path.is_symlink():
                    path.chmod(path.stat().st_mode | (0o055 if path.is_dir() else 0o044))
        if self.image_user:
            uid, gid = (int(part) for part in self.user.split(":"))
            try:
                self._chown(uid, gid)
            except OSError as exc:  # e.g. root squashed on NFS: let the folder be written by anyone for the run
                self.run_dir.chmod(0o1777)
                self.note = f"run folder not handed to uid {uid} ({exc.strerror or exc}); made writable for the run instead"
        return self

    def __exit__(self, *exc: object) -> None:
        if self.image_user:
            try:
                self._chown(os.getuid(), os.getgid())
            except OSError:
                pass
            self.run_dir.chmod(0o755)
