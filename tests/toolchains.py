"""Optional tools of the tests (a C++ toolchain, OpenNN's archives or build): a test that needs one
skips naming what is missing, and fails instead where CI sets BENCH_REQUIRE_<NAME>=1 (.ci/run)."""

from __future__ import annotations

import fnmatch
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[1]
# build.sh's compilers and build tools (CXX, g++, c++; cmake, ninja; ccache; nvcc), hidden by path_without
TOOLCHAIN = ("g++*", "c++*", "gcc*", "cc", "clang*", "*-linux-gnu-g*", "cmake*", "ninja*", "ccache", "nvcc")


def unavailable(requirement: str, reason: str) -> NoReturn:
    """Skip with ``reason``; fail instead when BENCH_REQUIRE_<REQUIREMENT>=1 says it must be there."""
    variable = f"BENCH_REQUIRE_{requirement}"
    if os.environ.get(variable) == "1":
        pytest.fail(f"{variable}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def require_tools(requirement: str, tools: Iterable[str], install: str) -> dict[str, str]:
    """Each of ``tools`` -> its path on PATH; unavailable() naming the missing ones and ``install``."""
    found = {tool: shutil.which(tool) for tool in tools}
    missing = [tool for tool, path in found.items() if path is None]
    if missing:
        unavailable(requirement, f"{', '.join(missing)} not found on PATH ({install})")
    return {tool: path for tool, path in found.items() if path}


def opennn_vendor() -> Path:
    """The folder of OpenNN's pinned archives (BENCH_OPENNN_VENDOR, else ../shared/vendor)."""
    folder = Path(os.environ.get("BENCH_OPENNN_VENDOR") or REPO.parent / "shared" / "vendor")
    if not folder.is_dir():
        unavailable("OPENNN", f"no pinned OpenNN archives at {folder} (set BENCH_OPENNN_VENDOR; README \"OpenNN\")")
    return folder


def path_without(folder: Path, hidden: Iterable[str] = TOOLCHAIN, path: str | None = None) -> str:
    """A PATH of one new ``folder`` linking every command of ``path`` (default $PATH) but those
    whose names match a pattern of ``hidden``: a stock machine's PATH, minus the toolchain."""
    patterns = list(hidden)
    folder.mkdir(parents=True, exist_ok=True)
    for directory in (path if path is not None else os.environ.get("PATH", "")).split(os.pathsep):
        if not directory or not Path(directory).is_dir():
            continue
        for entry in sorted(Path(directory).iterdir()):
            link = folder / entry.name
            if any(fnmatch.fnmatchcase(entry.name, p) for p in patterns) or link.exists() or link.is_symlink():
                continue  # hidden, or an earlier PATH folder has it (first one wins, as in a lookup)
            if entry.is_file() and os.access(entry, os.X_OK):
                link.symlink_to(entry)
    return str(folder)
