"""Errors the CLI turns into one-line messages and exit codes."""

from __future__ import annotations


class BadInput(Exception):
    """Bad input from the user (scenario, flags, files, environment): one line, exit code 2."""


class Interrupted(Exception):
    """The user interrupted the command (exit code 130)."""
