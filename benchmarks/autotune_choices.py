"""What Inductor's max-autotune chose, read from a PyTorch run's engine log.

Usage: python3 benchmarks/autotune_choices.py ENGINE_LOG_OR_RUN_FOLDER... [--json]

With ``compile_mode: max-autotune-no-cudagraphs`` Inductor benchmarks, once per distinct operation
(shape, strides, dtype), its ATen kernel (cuDNN's convolution, cuBLAS's matrix product) against
generated Triton templates, and logs each as an ``AUTOTUNE op(shapes)`` block: one line per choice,
fastest first, then ``SingleProcess AUTOTUNE benchmarking takes S seconds ... for N choices``.
This prints one row per operation (the winner, ATen's time, the winner's, the gain) and a summary:
how many operations were tuned, how many a Triton template won, the seconds spent benchmarking,
and the sum of the winners' times against ATen's. That sum is the share of these operations' time
the autotuned choices save (each distinct operation counted once, however often the model runs it),
measured by the autotuner itself, before a single timed step: what max-autotune can move at most in
the operations it tunes, even for a run cut in its warmup.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

BLOCK = re.compile(r"^AUTOTUNE (?P<op>[A-Za-z_][\w.]*)\((?P<shapes>.*)\)\s*$")
CHOICE = re.compile(r"^\s+(?P<name>\S+) (?P<ms>\d+(?:\.\d+)?) ms\b")
TAKES = re.compile(r"AUTOTUNE benchmarking takes (?P<s>\d+(?:\.\d+)?) seconds")
TEMPLATE_PREFIX = "triton_"


@dataclass(frozen=True)
class Choice:
    """One kernel the autotuner timed for an operation."""

    name: str
    ms: float

    @property
    def is_template(self) -> bool:
        return self.name.startswith(TEMPLATE_PREFIX)


@dataclass(frozen=True)
class TunedOp:
    """One autotuned operation: its choices, fastest first."""

    op: str
    shapes: str
    choices: tuple[Choice, ...]

    def __post_init__(self) -> None:
        if not self.choices:
            raise ValueError(f"AUTOTUNE {self.op}({self.shapes}): no timed choice")

    @property
    def winner(self) -> Choice:
        return min(self.choices, key=lambda c: c.ms)

    @property
    def aten(self) -> Choice | None:
        """The fastest non-template choice (the kernel the default mode would call), if it was timed."""
        own = [c for c in self.choices if not c.is_template]
        return min(own, key=lambda c: c.ms) if own else None

    @property
    def gain_percent(self) -> float | None:
        """How much faster the winner is than ATen's kernel, in percent of ATen's time (None: ATen's not timed)."""
        aten = self.aten
        return percent_saved(aten.ms, self.winner.ms) if aten else None


def percent_saved(before_ms: float, after_ms: float) -> float:
    return 100.0 * (before_ms - after_ms) / before_ms if before_ms else 0.0


@dataclass(frozen=True)
class Summary:
    """The autotuner's work in one log."""

    log: str
    ops: int
    template_wins: int
    benchmarking_s: float
    aten_ms: float
    winners_ms: float

    @property
    def saved_percent(self) -> float:
        return percent_saved(self.aten_ms, self.winners_ms)


def parse(lines: Iterable[str]) -> tuple[list[TunedOp], float]:
    """The AUTOTUNE blocks of a log (a block cut by the log's end keeps the choices it has) and the benchmarking seconds."""
    ops: list[TunedOp] = []
    seconds = 0.0
    current: tuple[str, str, list[Choice]] | None = None

    def close() -> None:
        if current and current[2]:
            ops.append(TunedOp(current[0], current[1], tuple(current[2])))

    for line in lines:
        block = BLOCK.match(line)
        if block:
            close()
            current = (block["op"], block["shapes"], [])
            continue
        takes = TAKES.search(line)
        if takes:
            seconds += float(takes["s"])
            close()
            current = None
            continue
        choice = CHOICE.match(line)
        if current is not None and choice:
            current[2].append(Choice(choice["name"], float(choice["ms"])))
    close()
    return ops, seconds


def summarise(log: str, ops: list[TunedOp], seconds: float) -> Summary:
    """Counts and sums over the operations whose ATen kernel was timed beside the templates."""
    pairs = [(op.aten.ms, op.winner.ms) for op in ops if op.aten is not None]
    return Summary(log=log, ops=len(ops), template_wins=sum(op.winner.is_template for op in ops),
                   benchmarking_s=round(seconds, 3), aten_ms=round(sum(a for a, _ in pairs), 4),
                   winners_ms=round(sum(w for _, w in pairs), 4))


def engine_log(path: Path) -> Path:
    """A run folder's engine.log, or the file given."""
    return path / "engine.log" if path.is_dir() else path


def render(summary: Summary, ops: list[TunedOp]) -> str:
    rows = [f"{summary.log}", f"{'operation':<12} {'shapes':<44} {'winner':<20} {'ATen ms':>8} {'best ms':>8} {'gain':>6}"]
    for op in ops:
        aten, gain = op.aten, op.gain_percent
        gain_text = f"{gain:5.1f}%" if gain is not None else "     -"
        rows.append(f"{op.op:<12} {op.shapes[:44]:<44} {op.winner.name[:20]:<20} "
                    f"{(f'{aten.ms:.4f}' if aten else '-'):>8} {op.winner.ms:>8.4f} {gain_text:>6}")
    rows.append(f"{summary.ops} operations tuned, {summary.template_wins} won by a Triton template, "
                f"{summary.benchmarking_s:.1f} s benchmarking; winners {summary.winners_ms:.3f} ms against ATen's "
                f"{summary.aten_ms:.3f} ms: {summary.saved_percent:.1f}% of these operations' time")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", type=Path, help="engine.log files or run folders")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args(argv)
    reports = []
    for given in args.logs:
        path = engine_log(given)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            print(f"autotune_choices: {path}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        ops, seconds = parse(text.splitlines())
        if not ops:
            print(f"autotune_choices: {path}: no AUTOTUNE block (was the run compiled with max-autotune?)", file=sys.stderr)
            return 2
        reports.append((summarise(str(path), ops, seconds), ops))
    if args.json:
        doc = [{**asdict(s), "saved_percent": round(s.saved_percent, 2),
                "operations": [{"op": o.op, "shapes": o.shapes, "winner": o.winner.name, "winner_ms": o.winner.ms,
                                "aten_ms": o.aten.ms if o.aten else None, "choices": len(o.choices)} for o in ops]}
               for s, ops in reports]
        print(json.dumps(doc, indent=1))
    else:
        print("\n\n".join(render(s, ops) for s, ops in reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
