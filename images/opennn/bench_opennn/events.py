"""Parse the driver's events file (format: images/opennn/driver/events.h); a cut-off file parses too."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class DriverEvents:
    applied: dict[str, str] = field(default_factory=dict)
    setup_done: float | None = None          # CLOCK_MONOTONIC seconds
    blocks: list[dict] = field(default_factory=list)
    epochs: list[dict] = field(default_factory=list)
    done: bool = False
    final_loss: float | None = None
    error_kind: str | None = None
    error_message: str | None = None
    layout: list[tuple[str, str, int, int, tuple[int, ...]]] = field(default_factory=list)  # kind, layer, index, offset, shape


def _loss(text: str) -> float | None:
    value = float(text)
    return None if math.isnan(value) or math.isinf(value) else value


def parse_events(path: Path) -> DriverEvents:
    out = DriverEvents()
    if not path.is_file():
        return out
    for line in path.read_text(errors="replace").splitlines():
        read_event(out, line)
    return out


def read_event(out: DriverEvents, line: str) -> None:
    """Add one line of the events file to ``out`` (a line cut off by a crash or a kill adds nothing)."""
    kind, _, rest = line.partition(" ")
    fields = rest.split()
    try:
        if kind == "applied":
            key, _, value = rest.partition(" ")
            out.applied[key] = value
        elif kind == "setup_done":
            out.setup_done = float(fields[0])
        elif kind == "block":
            out.blocks.append({"epoch": int(fields[0]), "warmup": fields[1] == "1", "steps": int(fields[2]),
                               "samples": int(fields[3]), "seconds": float(fields[4]), "loss": _loss(fields[5])})
        elif kind == "epoch":
            out.epochs.append({"epoch": int(fields[0]), "steps": int(fields[1]), "samples": int(fields[2]), "time_s": float(fields[3])})
        elif kind == "done":
            out.done, out.final_loss = True, _loss(fields[0])
        elif kind == "layout":
            out.layout.append((fields[0], fields[1], int(fields[2]), int(fields[3]), tuple(int(d) for d in fields[4].split(",") if d)))
        elif kind == "error":
            out.error_kind, _, out.error_message = rest.partition(" ")
    except (IndexError, ValueError):
        pass
