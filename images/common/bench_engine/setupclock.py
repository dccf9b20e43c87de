"""Where an engine's ``prepare`` spends its time: named parts, said in one engine-log line."""

from __future__ import annotations

import time

from bench_engine.result import log


class SetupClock:
    """``mark(name)`` closes the part since the previous mark; ``say()`` logs them all in order."""

    def __init__(self) -> None:
        self._last = time.perf_counter()
        self.parts: dict[str, float] = {}

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.parts[name] = self.parts.get(name, 0.0) + now - self._last
        self._last = now

    def line(self) -> str:
        return "prepare: " + ", ".join(f"{name} {seconds:.2f}s" for name, seconds in self.parts.items())

    def say(self) -> None:
        log(self.line())
