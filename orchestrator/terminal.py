"""Untrusted text made safe to print on a terminal.

Engine output, failure reasons, file names, run ids and anything read from an artifact may hold
escape sequences (``\\x1b[2J`` clears the screen), a carriage return that draws a forged line over
the real one, or bidirectional overrides that reorder what is shown. Every printer of bench passes
such text through :func:`visible` (plain text) or :func:`markup` (inside Rich markup): each
character that is not printable becomes a visible escape (``\\x1b``, ``\\r``, ``\\u202e``), so
what reaches the terminal is exactly the text, one line, and never a command to the terminal.
"""

from __future__ import annotations

from rich.markup import escape


def _escaped(char: str) -> str:
    return char if char.isprintable() else repr(char)[1:-1]


def visible(text: object) -> str:
    """``text`` as one line with every non-printable character escaped (``\\n``, ``\\x1b``, ``\\u2028``...)."""
    return "".join(map(_escaped, str(text)))


def visible_lines(text: object) -> str:
    """Like :func:`visible`, keeping the line breaks (``\\n``) of a multi-line note."""
    return "\n".join(visible(line) for line in str(text).split("\n"))


def markup(text: object) -> str:
    """``text`` for a Rich markup string: control characters escaped (:func:`visible`), then Rich's own markup."""
    return escape(visible(text))


def markup_lines(text: object) -> str:
    """Like :func:`markup`, keeping the line breaks."""
    return escape(visible_lines(text))
