"""Wall-clock time stamps as bench writes them (UTC, milliseconds, ``Z``)."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
