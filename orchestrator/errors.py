"""Errors the CLI turns into one-line messages and exit codes."""

from __future__ import annotations


class BadInput(Exception):
    """Bad input from the user (scenario, flags, files, environment): one line, exit code 2."""


class Interrupted(Exception):
    """The user interrupted the command (exit code 130)."""


def one_line(text: str) -> str:
    """``text`` with every character that is not printable escaped (``\\n``, ``\\x1e``, ``\\u2028``...).

    A message quotes the user's input (a field name, a value); whatever that holds, the message stays
    one line on the terminal and for ``str.splitlines`` (orchestrator.terminal.visible).
    """
    from orchestrator.terminal import visible

    return visible(text)
