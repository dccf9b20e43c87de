"""NVIDIA's ResNet-50 inference table from a bench artifact, beside the reference's V100 rows.

Usage: python3 benchmarks/inference_table.py ARTIFACT [ARTIFACT...] [--goals]

Reads each ARTIFACT/summary.json (runs of ``scenarios/imagenet_resnet50_inference.yaml``; several
artifacts when the engines ran apart, e.g. one per engine: a cell held by two is refused, so no
repeats are silently mixed, and so is a second GPU model) and prints,
per precision, one Markdown table with the reference's columns (throughput avg, latency avg,
95%, 99%) for the V100 row (tf32 beside the reference's FP32 table, bf16 beside its Mixed
Precision table) and each engine: throughput is the median over the valid repeats with their
range, each latency statistic the median over repeats of that run's statistic. ``--goals``
checks issue 26's inference goals (p99 below 1.5 ms at batch 1, 25,000 img/s or more at batch 256)
and exits 1 when one is missed.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

REFERENCE = Path(__file__).with_name("reference") / "nvidia_resnet50_v100_inference.json"
REFERENCE_TABLE = {"tf32": "FP32", "fp32": "FP32", "bf16": "Mixed Precision", "fp16": "Mixed Precision"}
P99_GOAL_MS, THROUGHPUT_GOAL = 1.5, 25_000.0
GOAL_PRECISION = "bf16"  # issue 26 sets its inference goals on the bf16 rows; tf32 rows are published, not goals


@dataclass(frozen=True)
class Cell:
    """One engine at one precision and batch: throughput over repeats, latency medians."""

    engine: str
    precision: str
    batch: int
    n: int
    n_total: int
    throughput: float
    low: float
    high: float
    latency_mean: float
    latency_p95: float
    latency_p99: float


def machine_name(summary: dict) -> str:
    """The GPU the artifact ran on ("NVIDIA H200" -> "H200"), or the CPU."""
    gpus = ((summary.get("host") or {}).get("nvml") or {}).get("gpus") or []
    return gpus[0]["name"].removeprefix("NVIDIA ") if gpus else "CPU"


def read_cells(summary: dict) -> list[Cell]:
    cells = []
    for group in summary["groups"]:
        stats, latency = group.get("throughput"), group.get("latency_ms")
        if not stats or not latency or group["devices"] != 1:
            continue
        cells.append(Cell(group["engine"], group["precision"], group["batch_per_device"], group["n"], group["n_total"],
                          stats["median"], stats["min"], stats["max"], latency["mean"], latency["p95"], latency["p99"]))
    return cells


def markdown(cells: list[Cell], reference: dict[str, list[list[float]]], machine: str) -> str:
    lines = []
    for precision in sorted({c.precision for c in cells}, key=["fp32", "tf32", "bf16", "fp16"].index):
        mine = [c for c in cells if c.precision == precision]
        engines = sorted({c.engine for c in mine})
        table = REFERENCE_TABLE[precision]
        rows = {int(row[0]): row for row in reference.get(table, [])}
        lines += [f"### {precision} (V100: the reference's {table} table)", ""]
        head = ["batch", "V100 img/s", "V100 avg / p95 / p99 ms"]
        for engine in engines:
            head += [f"{machine} {engine} img/s [range], n", f"{engine} avg / p95 / p99 ms"]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for batch in sorted({c.batch for c in mine}):
            ref = rows.get(batch)
            row = [str(batch), f"{ref[1]:,.0f}" if ref else "-", f"{ref[2]:.2f} / {ref[3]:.2f} / {ref[4]:.2f}" if ref else "-"]
            for engine in engines:
                cell = next((c for c in mine if c.engine == engine and c.batch == batch), None)
                row += ["-", "-"] if cell is None else [
                    f"{cell.throughput:,.0f} [{cell.low:,.0f}-{cell.high:,.0f}], {cell.n}/{cell.n_total}",
                    f"{cell.latency_mean:.3f} / {cell.latency_p95:.3f} / {cell.latency_p99:.3f}"]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    return "\n".join(lines)


def missed_goals(cells: list[Cell]) -> list[str]:
    missed = []
    for cell in (c for c in cells if c.precision == GOAL_PRECISION):
        if cell.batch == 1 and cell.latency_p99 >= P99_GOAL_MS:
            missed.append(f"{cell.engine} {cell.precision} b1: p99 {cell.latency_p99:.3f} ms (goal < {P99_GOAL_MS} ms)")
        if cell.batch == 256 and cell.throughput < THROUGHPUT_GOAL:
            missed.append(f"{cell.engine} {cell.precision} b256: {cell.throughput:,.0f} img/s (goal >= {THROUGHPUT_GOAL:,.0f})")
    return missed


def gather(artifacts: list[Path]) -> tuple[list[Cell], str]:
    """Every artifact's cells and the GPU they ran on; ValueError when an artifact is missing, a cell is held
    twice or the artifacts ran on different machines."""
    cells: list[Cell] = []
    machines = set()
    for artifact in artifacts:
        if not (artifact / "summary.json").is_file():
            raise ValueError(f"{artifact}: no summary.json (not a bench artifact)")
        summary = json.loads((artifact / "summary.json").read_text())
        machines.add(machine_name(summary))
        for cell in read_cells(summary):
            if any((c.engine, c.precision, c.batch) == (cell.engine, cell.precision, cell.batch) for c in cells):
                raise ValueError(f"{artifact}: {cell.engine} {cell.precision} b{cell.batch} is already in another artifact")
            cells.append(cell)
    if len(machines) > 1:
        raise ValueError(f"the artifacts ran on different machines ({', '.join(sorted(machines))})")
    return cells, machines.pop() if machines else "CPU"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifacts", type=Path, nargs="+", metavar="ARTIFACT")
    parser.add_argument("--goals", action="store_true", help="check the inference goals; exit 1 when one is missed")
    args = parser.parse_args()
    try:
        cells, machine = gather(args.artifacts)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(markdown(cells, json.loads(REFERENCE.read_text())["tables"], machine))
    if args.goals:
        missed = missed_goals(cells)
        for line in missed:
            print(f"goal missed: {line}")
        print("inference goals: " + ("missed" if missed else "met"))
        return 1 if missed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
