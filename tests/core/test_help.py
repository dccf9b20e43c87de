"""``--help`` of every command: help text on every option and argument, no ``<bool>`` type on a flag; shell completion on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import shellingham

from orchestrator.cli.app import command
from tests.core.cli_helpers import run_cli


def commands(node: object = None, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], object]]:
    """Every command and group of bench, with the words that name it."""
    node = command() if node is None else node
    yield path, node
    for name, sub in getattr(node, "commands", {}).items():
        yield from commands(sub, (*path, name))


def test_every_command_and_option_has_help() -> None:
    missing = []
    for path, node in commands():
        if path and not (getattr(node, "help", None) or getattr(node, "short_help", None)):
            missing.append(" ".join(path))
        for param in getattr(node, "params", []):
            if not (getattr(param, "help", None) or "").strip():
                missing.append(f"{' '.join(path)} {'/'.join(param.opts) or param.name}")
    assert missing == []


@pytest.mark.parametrize("path", [path for path, _ in commands()], ids=lambda path: " ".join(path) or "bench")
def test_help_shows_no_bool_type(capsys, monkeypatch, path: tuple[str, ...]) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    code, out, err = run_cli(capsys, monkeypatch, *path, "--help")
    assert code == 0, err
    assert "--help" in out and "<bool>" not in out, out


def test_completion_is_offered(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    _, out, _ = run_cli(capsys, monkeypatch, "--help")
    assert "--install-completion" in out and "--show-completion" in out
    monkeypatch.setenv("SHELL", "/bin/bash")
    # Typer finds the shell by walking the process tree: a suite started under nohup or cron has none above it
    monkeypatch.setattr(shellingham, "detect_shell", lambda *_a, **_k: ("bash", "/bin/bash"))
    code, out, _ = run_cli(capsys, monkeypatch, "--show-completion")
    assert code == 0 and "_BENCH_COMPLETE=complete_bash" in out


def test_completion_survives_a_bad_bench_variable(capsys, monkeypatch) -> None:
    """The environment check refuses a bad BENCH_* value with an error line; completing a word must not print it."""
    monkeypatch.setenv("BENCH_SLURM_POLL_S", "abc")
    code, _, err = run_cli(capsys, monkeypatch, "scenario", "list")
    assert code == 2 and "BENCH_SLURM_POLL_S" in err
    monkeypatch.setenv("_BENCH_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", "bench scenario r")
    monkeypatch.setenv("COMP_CWORD", "2")
    code, out, err = run_cli(capsys, monkeypatch)
    assert code == 0 and out.split() == ["run", "resume"] and err == ""
