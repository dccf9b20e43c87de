"""Seals: the hash of every file, taken when bench first lists it in the manifest, never re-taken.

A run's files are listed (sealed) by the manifest written as soon as the run ends. Engines have write
access to the artifact, so every later manifest write compares each sealed file with its seal: a file
changed (or gone) since is *tampered*: the manifest keeps its sealed hash (so ``bench results validate``
reports it modified) and the run it belongs to is made ``invalid`` (:func:`tampered_run`, orchestrator/run/finish.py). A change
is accepted only when bench wrote the new bytes itself (:mod:`orchestrator.written`). A file that
appears outside the folders the previous manifest declared in flight, and that bench did not write,
is never adopted: it stays unlisted (validation fails on it) and the run that was in flight, the only
writer then, is made invalid for writing outside its folder.

Seals live in this process (what an engine could rewrite on disk, the manifest included, cannot move
them). A new process starts from the manifest on disk (:func:`start`), which ``bench scenario resume``
checks against the files first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from orchestrator.artifacts.layout import MANIFEST, RUNS
from orchestrator.artifacts.walk import read_bytes_no_follow
from orchestrator.written import wrote


@dataclass
class SealState:
    sealed: dict[str, tuple[int, str]]  # rel -> (bytes, sha256) as first listed
    open: list[str]  # folders the last manifest declared in flight: their new files are adopted next
    seeded: bool = True  # False: a new artifact, everything present is bench's (adopted at the first write)
    tampered: dict[str, str] = field(default_factory=dict)  # run folder (rel) -> why it is tampered


_STATES: dict[str, SealState] = {}


def _key(root: Path) -> str:
    return str(Path(root).absolute())


def _from_disk(root: Path) -> SealState:
    try:
        manifest = json.loads(read_bytes_no_follow(root, MANIFEST, 256 << 20))
        files = {item["path"]: (int(item["bytes"]), str(item["sha256"])) for item in manifest["files"]}
        return SealState(files, list(manifest.get("in_flight") or []))
    except (OSError, ValueError, KeyError, TypeError):
        return SealState({}, [], seeded=False)


def start(root: Path, trust_current: bool = False) -> None:
    """Begin sealing ``root`` in this process: from its manifest on disk, or (``trust_current``: a
    resume forced over integrity problems, recorded in integrity.json) from the files as they are now."""
    state = _from_disk(root)
    if trust_current:
        state = SealState({}, state.open, seeded=False)
    _STATES[_key(root)] = state


def state(root: Path) -> SealState:
    """The seals of ``root`` (started from its manifest on disk the first time this process sees it)."""
    key = _key(root)
    if key not in _STATES:
        _STATES[key] = _from_disk(root)
    return _STATES[key]


def moved(root: Path, old: str, new: str) -> None:
    """Bench moved ``old`` (a file or folder, relative) to ``new``: its seals move with it."""
    seals = state(root).sealed
    for rel in [r for r in seals if r == old or r.startswith(old.rstrip("/") + "/")]:
        seals[new + rel[len(old):]] = seals.pop(rel)


def _inside(rel: str, folders: list[str]) -> bool:
    return any(rel == f or rel.startswith(f.rstrip("/") + "/") for f in folders)


def run_folder(rel: str) -> str | None:
    """``runs/<id>`` of a path inside a run folder, else None."""
    parts = rel.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 and parts[0] == RUNS else None


def _flag(st: SealState, folder: str | None, why: str) -> None:
    if folder is not None:
        st.tampered.setdefault(folder, why)


class FileEntry(NamedTuple):
    """One file of the manifest's ``files``: its path in the artifact, its sealed sha256 and size."""

    path: str
    sha256: str
    bytes: int

    def to_json(self) -> dict[str, str | int]:
        return {"path": self.path, "sha256": self.sha256, "bytes": self.bytes}


def seal_listing(root: Path, current: list[tuple[str, int, str]], flying: list[str]) -> list[FileEntry]:
    """The manifest's ``files`` from ``current`` (rel, bytes, sha256 of every regular file, in-flight
    ones excluded), checked against the seals; seals what is new and adoptable."""
    st = state(root)
    files: list[FileEntry] = []
    present = set()
    for rel, size, digest in current:
        present.add(rel)
        seal = st.sealed.get(rel)
        if seal is not None and seal != (size, digest) and not wrote(root / rel, digest):
            _flag(st, run_folder(rel), f"{rel.split('/', 2)[-1]} changed after the run was sealed")
            for folder in st.open:  # the engine in flight was the only writer
                _flag(st, run_folder(folder + "/x"), f"{rel} changed while its engine ran")
            files.append(FileEntry(rel, seal[1], seal[0]))  # never re-hashed: validate reports it
            continue
        if seal is None and st.seeded and not _inside(rel, st.open) and not wrote(root / rel, digest):
            for folder in st.open:  # the engine in flight was the only writer
                _flag(st, run_folder(folder + "/x"), f"its engine wrote outside its run folder ({rel})")
            continue  # never adopted: stays unlisted
        st.sealed[rel] = (size, digest)
        files.append(FileEntry(rel, digest, size))
    for rel, seal in list(st.sealed.items()):
        if rel not in present and not _inside(rel, flying):
            _flag(st, run_folder(rel), f"{rel.split('/', 2)[-1]} removed after the run was sealed")
            files.append(FileEntry(rel, seal[1], seal[0]))  # validate reports it missing
    st.open, st.seeded = list(flying), True
    return sorted(files, key=lambda f: f.path)


def tampered_run(root: Path, run_id: str) -> str | None:
    """Why the folder of run ``run_id`` is tampered with (its files changed after they were sealed), or None."""
    return state(root).tampered.get(f"{RUNS}/{run_id}")
