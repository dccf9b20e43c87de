"""Terminal safety: escape sequences in engine output, failure messages, paths and names are printed
escaped (``\\x1b``, ``\\r``), never raw, so no line can be cleared or forged on the user's terminal."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orchestrator.terminal import markup, visible
from tests.reliability.hostile_support import FAKE_SCENARIO, call, fake_engines

__all__ = ["fake_engines"]

RAW = ("\x1b", "\r", "\x07", "\u202e")


def raw_controls(text: str) -> list[str]:
    return [repr(c) for c in RAW if c in text]


def test_visible_escapes_every_control_character_and_keeps_plain_text() -> None:
    assert visible("plain text [bold] ok") == "plain text [bold] ok"
    assert visible("a\x1b[2Jb\rc\nd\x07\u202e\x9b") == "a\\x1b[2Jb\\rc\\nd\\x07\\u202e\\x9b"
    assert markup("[red]x\x1b") == "\\[red]x\\x1b"


@pytest.mark.parametrize("verbose", [False, True], ids=["progress", "verbose"])
def test_engine_output_and_failure_message_are_printed_escaped(verbose: bool, tmp_path: Path, capsys, monkeypatch,
                                                               fake_engines) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(FAKE_SCENARIO.read_text() + "engines:\n  fake: {options: {behaviour: escapes}}\n")
    code, out, err = call(capsys, monkeypatch, "scenario", "run", str(scenario), "--runtime", "local", "--engines", "fake",
                          "--precisions", "fp32", "--out", str(tmp_path / "out"), *(["-v"] if verbose else []))
    assert code == 1, err
    assert not raw_controls(out + err), (out + err)[-2000:]
    assert "\\x1b[2J" in err  # the failure message (and, verbose, the engine's lines) shown, escaped
    if verbose:  # the relayed line: its carriage return starts a line of its own (universal newlines), escapes shown
        assert "\\x1b[32mvalid: everything\\x1b[0m" in err


def test_a_clean_run_prints_no_escapes(tmp_path: Path, capsys, monkeypatch, fake_engines) -> None:
    code, out, err = call(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--engines", "fake",
                          "--precisions", "fp32", "--out", str(tmp_path / "out"))
    assert code == 0, err
    assert "\\x" not in err and not raw_controls(out + err)


def test_a_path_with_escapes_is_printed_escaped(tmp_path: Path, capsys, monkeypatch, fake_engines) -> None:
    hostile = tmp_path / "a\x1b[2J\rvalid: everything.yaml"
    shutil.copy(FAKE_SCENARIO, hostile)
    code, out, err = call(capsys, monkeypatch, "scenario", "validate", str(hostile))
    assert code == 0 and "\\x1b[2J\\rvalid: everything.yaml" in out
    assert not raw_controls(out + err)
    code, out, err = call(capsys, monkeypatch, "results", "validate", str(tmp_path / "run\x1b]0;owned\x07id"))
    assert code == 2 and not raw_controls(out + err), err
