"""Hostile scenario files: alias bombs, deep nesting, huge files, recursive aliases, odd YAML types.
Each is refused with one line and exit 2 within the example bound, before anything is expanded."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from orchestrator.scenario import safe_yaml
from orchestrator.scenario.yaml_lines import parse
from tests.reliability.hostile_support import FAKE_SCENARIO, call, fake_engines, save_figures, timed

__all__ = ["fake_engines"]
pytestmark = pytest.mark.usefixtures("fake_engines")
_WARM: list[int] = []


@pytest.fixture(scope="module", autouse=True)
def _figures() -> Iterator[None]:
    yield
    save_figures()


def _bomb(levels: int = 9, width: int = 9) -> str:
    lines = ["a0: &a0 [" + ",".join(['"lol"'] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


HOSTILE = {
    "alias-bomb": (_bomb(), "values (aliases expanded)"),
    "alias-bomb-in-scenario": (FAKE_SCENARIO.read_text() + "smoke:\n  workload.x: " + "".join(f"&b{i} " for i in range(1)) + "[1]\n"
                               + _bomb().replace("a", "z"), "values (aliases expanded)"),
    "many-aliases": ("a: &a 1\nb: [" + ",".join(["*a"] * 150) + "]\n", "more than 100 aliases"),
    "deep-flow-5000": ("x: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than"),
    "deep-block-5000": ("".join("  " * i + f"k{i}:\n" for i in range(5000)), "refused"),
    "deep-mapping-flow": ("x: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n", "nested deeper than"),
    "deep-through-aliases": ("a: &a [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\nb: &b [[[[[[[[[[[[[[[*a]]]]]]]]]]]]]]]\n",
                             "deeper than"),
    "recursive-alias": ("a: &a [*a]\n", "recursive alias"),
    "recursive-merge": ("a: &a {b: 1, <<: *a}\n", "recursive alias"),
    "wide-list": ("l: [" + ",".join("1" for _ in range(20000)) + "]\n", "refused"),
    "binary": ("name: !!binary aGVsbG8=\n", "not allowed"),
    "set": ("name: !!set {a, b}\n", "not allowed"),
    "python-object": ("name: !!python/object/apply:os.system ['touch /tmp/bench-pwned']\n", "malformed YAML"),
    "huge-int": ("schema_version: " + "9" * 5000 + "\n", "refused"),
    "bad-date": ("name: 2024-13-45\n", "is required"),
    "non-string-key": ("1: x\n", "not a string"),
    "duplicate-key": ("name: a\nname: b\n", "duplicate key"),
    "not-utf8": (b"name: \xff\xfe\n", "cannot read"),
    "nul-bytes": ("name: a\x00b\n", "malformed YAML"),
    "many-documents": ("---\nname: a\n---\nname: b\n", "malformed YAML"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_scenario_is_refused_fast(case: str, tmp_path: Path, capsys, monkeypatch) -> None:
    text, needle = HOSTILE[case]
    if not _WARM:  # the first CLI call imports bench's modules: not part of an example's time
        _WARM.append(call(capsys, monkeypatch, "scenario", "validate", str(FAKE_SCENARIO))[0])
    path = tmp_path / "s.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with timed("yaml: hostile scenario files"):
        code, _, err = call(capsys, monkeypatch, "scenario", "validate", str(path))
    assert code == 2 and needle in err, err
    assert not Path("/tmp/bench-pwned").exists()


def test_oversized_file_is_refused_before_reading(tmp_path: Path, capsys, monkeypatch) -> None:
    """70 MB (sparse, so the test costs no disk): refused from its size, nothing read."""
    path = tmp_path / "big.yaml"
    with open(path, "wb") as handle:
        handle.truncate(70 << 20)
    with timed("yaml: hostile scenario files"):
        code, _, err = call(capsys, monkeypatch, "scenario", "validate", str(path))
    assert code == 2 and "more than the" in err and str(70 << 20) in err


def test_special_files_are_refused_without_blocking(tmp_path: Path, capsys, monkeypatch) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with timed("yaml: hostile scenario files"):
            code, _, err = call(capsys, monkeypatch, "scenario", "validate", str(path))
        assert code == 2 and "not a regular file" in err


def test_line_walker_never_expands_aliases() -> None:
    """The line map of a bomb just under the expanded bound holds the written keys, not the expansion."""
    text = "a: &a [1, 2, 3]\nb: [*a, *a, *a]\nc: {x: *a}\n"
    document, lines = parse(text)
    assert document["b"] == [[1, 2, 3]] * 3
    assert ("b", "0") in lines and ("b", "0", "0") not in lines  # the alias is not walked again
    assert ("a", "0") in lines and lines[("c", "x")] == 3


def test_bounds_are_what_the_errors_say() -> None:
    """Just inside each bound loads; one step past it is refused (so the bounds are real, not accidental)."""
    inside = "x: " + "[" * (safe_yaml.MAX_DEPTH - 1) + "]" * (safe_yaml.MAX_DEPTH - 1) + "\n"
    assert safe_yaml.load_bounded(inside) is not None
    with pytest.raises(safe_yaml.YAMLLimitError, match="deeper"):
        safe_yaml.load_bounded("x: " + "[" * safe_yaml.MAX_DEPTH + "]" * safe_yaml.MAX_DEPTH + "\n")
    aliases = "a: &a 1\nb: [" + ",".join(["*a"] * safe_yaml.MAX_ALIASES) + "]\n"
    assert len(safe_yaml.load_bounded(aliases)["b"]) == safe_yaml.MAX_ALIASES
    with pytest.raises(safe_yaml.YAMLLimitError, match="aliases"):
        safe_yaml.load_bounded(aliases.replace("[*a,", "[*a,*a,"))
    with pytest.raises(yaml.YAMLError):
        safe_yaml.load_bounded("a: " + "x" * (safe_yaml.MAX_BYTES + 1))
    assert safe_yaml.load_bounded("when: 2024-01-02") == {"when": "2024-01-02"}  # dates stay text (JSON-safe)
