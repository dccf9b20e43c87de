"""tests/toolchains.py: an optional tool's absence skips with the reason, or fails under BENCH_REQUIRE_*."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.toolchains import path_without, require_tools, unavailable


def tool(folder: Path, name: str) -> Path:
    """An executable ``name`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_an_absent_tool_skips_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in (None, "0", ""):
        if value is None:
            monkeypatch.delenv("BENCH_REQUIRE_OPENNN", raising=False)
        else:
            monkeypatch.setenv("BENCH_REQUIRE_OPENNN", value)
        with pytest.raises(pytest.skip.Exception, match="cmake is missing"):
            unavailable("OPENNN", "cmake is missing")


def test_an_absent_tool_fails_where_ci_requires_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_REQUIRE_OPENNN", "1")
    with pytest.raises(pytest.fail.Exception, match="BENCH_REQUIRE_OPENNN=1 but cmake is missing"):
        unavailable("OPENNN", "cmake is missing")
    monkeypatch.setenv("BENCH_REQUIRE_DOCKER", "1")  # another requirement's variable does not make OpenNN's fail
    monkeypatch.delenv("BENCH_REQUIRE_OPENNN")
    with pytest.raises(pytest.skip.Exception):
        unavailable("OPENNN", "cmake is missing")


def test_require_tools_finds_them_or_names_the_missing_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCH_REQUIRE_OPENNN", raising=False)
    cmake = tool(tmp_path / "bin", "cmake")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert require_tools("OPENNN", ["cmake"], "apt-get install cmake") == {"cmake": str(cmake)}
    with pytest.raises(pytest.skip.Exception, match=r"^g\+\+, ninja not found on PATH \(apt-get install g\+\+ ninja-build\)$"):
        require_tools("OPENNN", ["cmake", "g++", "ninja"], "apt-get install g++ ninja-build")
    monkeypatch.setenv("BENCH_REQUIRE_OPENNN", "1")
    with pytest.raises(pytest.fail.Exception, match=r"BENCH_REQUIRE_OPENNN=1 but ninja not found"):
        require_tools("OPENNN", ["ninja"], "apt-get install ninja-build")


def test_path_without_hides_the_toolchain_and_keeps_the_rest(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for name in ("g++", "g++-12", "cc", "cmake", "ninja", "ccache", "tar", "sha256sum"):
        tool(second, name)
    own_tar = tool(first, "tar")
    (first / "notes.txt").write_text("not a command")
    stock = path_without(tmp_path / "stock", path=os.pathsep.join([str(first), str(second), str(tmp_path / "nowhere")]))
    assert sorted(p.name for p in Path(stock).iterdir()) == ["sha256sum", "tar"]
    assert Path(stock, "tar").resolve() == own_tar.resolve()  # the first PATH folder wins, as in a lookup
    assert shutil.which("cmake", path=stock) is None and shutil.which("sha256sum", path=stock)
