"""Read an engine's ``result.json`` as evidence, never trusting it.

Only a regular file is read, opened with ``O_NOFOLLOW`` (a link is never followed: it is removed,
as is a FIFO, socket, device or folder an engine left in its place), at most ``MAX_RESULT_BYTES``,
parsed strictly (:mod:`orchestrator.strictjson`: bounded depth, no NaN/Infinity, every number
finite and in range) and checked against the engine-result schema. A regular file that fails is
kept as ``result.rejected.json`` (no schema applies to that name).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from bench_engine.contract import EngineResult
from orchestrator.artifacts.walk import read_bytes_no_follow
from orchestrator.schemas import SchemaError, validate
from orchestrator.strictjson import StrictJsonError, loads_strict

REJECTED_RESULT = "result.rejected.json"
MAX_RESULT_BYTES = 64 << 20  # engine results are a few KB (windows are capped); past this, refused unread


def _remove(path: Path, mode: int) -> None:
    """Remove what the engine left at ``path`` without following it (a folder is removed whole, links in it unfollowed)."""
    if stat.S_ISDIR(mode):
        shutil.rmtree(path)
    else:
        path.unlink()


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    return "socket or device"


def _unlink_run_folder(folder: Path) -> bool:
    """Replace a run folder an engine swapped for a link by an empty real one (bench writes its record there,
    never through the link); whether it was a link."""
    if not folder.is_symlink():
        return False
    folder.unlink()
    folder.mkdir()
    return True


def read_result(path: Path) -> tuple[EngineResult | None, str | None]:
    """(result, None) for a valid result; (None, None) when there is none; (None, reason) when refused."""
    if _unlink_run_folder(path.parent):
        return None, f"the run folder {path.parent.name} was replaced by a symbolic link (never followed; removed)"
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None, None
    if not stat.S_ISREG(mode):
        _remove(path, mode)
        return None, f"engine result {path.name} is a {_kind(mode)}, not a regular file (never followed; removed)"
    try:
        data = read_bytes_no_follow(path.parent, path.name, MAX_RESULT_BYTES + 1)
        if len(data) > MAX_RESULT_BYTES:
            raise StrictJsonError(f"larger than {MAX_RESULT_BYTES >> 20} MiB")
        document = loads_strict(data)
        validate(document, "engine-result")
    except (StrictJsonError, SchemaError, OSError) as exc:
        path.replace(path.with_name(REJECTED_RESULT))  # kept as evidence, under a name no schema applies to
        if isinstance(exc, SchemaError):
            why = f"does not match its schema: {exc}"
        elif isinstance(exc, StrictJsonError):
            why = f"is not strict JSON: {exc}"
        else:
            why = f"cannot be read ({exc.strerror or exc})"
        return None, f"engine result {why} (kept as {REJECTED_RESULT})"
    return EngineResult.from_json(document), None
