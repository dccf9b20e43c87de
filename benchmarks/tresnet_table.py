"""The TResNet paper's table on this GPU: TResNet-M against ResNet-50 from bench artifacts.

Usage: python3 benchmarks/tresnet_table.py ARTIFACT_OR_FOLDER... [--json] [--repeats N]

Reads every artifact given (or found under a folder: each one holding a summary.json; for one
arch, mode and batch choice, the newest wins), made by ``benchmarks/tresnet_table.sh`` from
``scenarios/tresnet_m.yaml``. One row per arch x mode x batch choice (90% of the searched maximal
batch, or the common batch) x engine: the maximal batch searched (a searched cell's own; a
common-batch cell shows its arch, mode and engine's), the batch used, the trainable parameters the
runs reported (result.json, not the spec), GMACs per sample beside the paper's GFLOPs, img/s median
[min-max] over the ok repeats, TFLOP/s, and the paper's V100 figures (``reference/tresnet_paper_v100.json``);
then TResNet-M / ResNet-50 here against the paper. A row is flagged when fewer than N (default 5)
repeats are ok, a run is not ok or has a parity warning, or its search failed or was capped.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from orchestrator.judge.maxbatch_limits import LIMIT_SPREAD_PERCENT, SearchLimit, limits_apart, unknown_limits

REFERENCE = Path(__file__).with_name("reference") / "tresnet_paper_v100.json"
ARCHS = ("tresnet_m", "resnet50_v1.5")
MODES = ("train", "infer")
CHOICES = ("max", "common")
CHOICE_TEXT = {"max": "90% of max", "common": "common"}
WANT_REPEATS = 5


@dataclass(frozen=True)
class Paper:
    """One model's row of the paper's table (V100, mixed precision); None where the source gives none."""

    name: str
    train_img_s: float | None
    infer_img_s: float | None
    max_train_batch: int | None
    top1: float | None
    flops_g: float | None

    def img_s(self, mode: str) -> float | None:
        return self.train_img_s if mode == "train" else self.infer_img_s


@dataclass(frozen=True)
class Reference:
    """The paper's figures and where they were read."""

    source: str
    models: dict[str, Paper]


@dataclass(frozen=True)
class Search:
    """A maximal batch search of the artifact (search.json): the batch found, why it stopped, its probes."""

    max_batch: int | None
    chosen: int | None
    capped_by: str | None
    probes: int
    error: str | None
    memory_limit_bytes: int | None = None  # the allocator limit its probes ran under (None: not reported)


@dataclass(frozen=True)
class Row:
    """One arch, mode, batch choice and engine: its runs summarised, the paper's figures beside them."""

    arch: str
    mode: str
    choice: str
    engine: str
    precision: str
    artifact: str
    search: Search | None
    batch: int | None
    parameters: int | None
    gmacs: float | None
    ok: int
    runs: int
    median: float | None
    low: float | None
    high: float | None
    tflops: float | None
    paper_img_s: float | None
    paper_max_batch: int | None
    paper_gflops: float | None
    flags: tuple[str, ...]


@dataclass(frozen=True)
class Ratio:
    """TResNet-M / ResNet-50 for one mode, batch choice and engine, here and in the paper."""

    mode: str
    choice: str
    engine: str
    img_s: float | None
    paper_img_s: float | None
    max_batch: float | None
    paper_max_batch: float | None


def load_reference(path: Path = REFERENCE) -> Reference:
    """The paper's figures; a reference without its source (url, repo, path, commit) is refused."""
    doc = json.loads(path.read_text())
    source = doc.get("source") or {}
    missing = [key for key in ("url", "repo", "path", "commit") if not source.get(key)]
    if missing:
        raise ValueError(f"{path}: source: missing {', '.join(missing)} (where were the figures read?)")
    models = {arch: Paper(**row) for arch, row in doc["models"].items()}
    return Reference(f"{source['repo']} {source['path']} @ {source['commit'][:12]}", models)


def find_artifacts(paths: Iterable[Path]) -> list[Path]:
    """Every artifact folder given or under a folder given (one with summary.json and scenario.yaml)."""
    found: set[Path] = set()
    for path in paths:
        if (path / "summary.json").is_file():
            found.add(path)
        elif path.is_dir():
            found |= {s.parent for s in path.rglob("summary.json") if (s.parent / "scenario.yaml").is_file()}
    return sorted(found, key=lambda p: p.name)


def machine_name(summary: dict[str, Any]) -> str:
    """The GPU the artifact ran on ("NVIDIA H200" -> "H200"), or the CPU."""
    gpus = ((summary.get("host") or {}).get("nvml") or {}).get("gpus") or []
    return gpus[0]["name"].removeprefix("NVIDIA ") if gpus else "CPU"


def _searches(summary: dict[str, Any]) -> dict[tuple[str, str], Search]:
    return {(s["engine"], s["precision"]): Search(s.get("max_batch"), s.get("chosen_batch"), s.get("capped_by"),
                                                   len(s.get("probes") or []), s.get("error"), s.get("memory_limit_bytes"))
            for s in summary.get("max_batch") or []}


def _parameters(artifact: Path, runs: list[dict[str, Any]]) -> set[int]:
    """The trainable parameters each ok run's engine reported (its result.json)."""
    counts = set()
    for run in runs:
        result = artifact / "runs" / run["run_id"] / "result.json"
        if run["status"] == "ok" and result.is_file():
            value = (json.loads(result.read_text()).get("work") or {}).get("trainable_parameters")
            if value is not None:
                counts.add(int(value))
    return counts


def _flags(runs: list[dict[str, Any]], ok: int, want: int, search: Search | None, searched: bool, parameters: set[int]) -> tuple[str, ...]:
    flags = []
    if ok < want:
        flags.append(f"{ok} of {want} repeats ok")
    bad: dict[str, int] = {}
    for run in runs:
        if run["status"] != "ok":
            bad[run["status"]] = bad.get(run["status"], 0) + 1
    flags += [f"{count} {status}" for status, count in sorted(bad.items())]
    if any(run.get("parity_warning") for run in runs):
        flags.append("parity warning")
    if search is None and searched:
        flags.append("search not finished")
    elif search is not None and search.error:
        flags.append(f"search failed: {search.error}")
    elif search is not None and search.capped_by:
        flags.append(f"max capped by the {search.capped_by}")
    if len(parameters) > 1:
        flags.append("parameter counts differ")
    return tuple(flags)


def read_artifact(artifact: Path, reference: Reference, want: int) -> list[Row]:
    """The rows of one artifact (one arch, mode and batch choice; one row per engine and precision)."""
    summary = json.loads((artifact / "summary.json").read_text())
    workload = yaml.safe_load((artifact / "scenario.yaml").read_text())["workload"]
    arch, mode = workload["model"]["arch"], workload["mode"]
    searches = _searches(summary)
    choice = "max" if (workload["batch"].get("max_search") or searches) else "common"
    paper = reference.models.get(arch)
    groups = {(g["engine"], g["precision"]): g for g in summary["groups"] if g["devices"] == 1}
    keys = sorted({(r["engine"], r["precision"]) for r in summary["runs"]} | set(searches))
    rows = []
    for engine, precision in keys:
        runs = [r for r in summary["runs"] if (r["engine"], r["precision"]) == (engine, precision)]
        group, search = groups.get((engine, precision)) or {}, searches.get((engine, precision))
        stats = group.get("throughput") or {}
        parameters = _parameters(artifact, runs)
        ok = sum(r["status"] == "ok" for r in runs)
        batch = next((r.get("batch_per_device") for r in runs if r["status"] == "ok"), None)  # none run: none known
        rows.append(Row(arch, mode, choice, engine, precision, artifact.as_posix(), search, batch,
                        min(parameters) if parameters else None, group.get("gmacs_per_sample"), ok, len(runs),
                        stats.get("median"), stats.get("min"), stats.get("max"), group.get("achieved_tflops"),
                        paper.img_s(mode) if paper else None, paper.max_train_batch if paper and mode == "train" else None,
                        paper.flops_g if paper else None, _flags(runs, ok, want, search, choice == "max", parameters)))
    return rows


def collect(artifacts: Iterable[Path], reference: Reference, want: int = WANT_REPEATS) -> list[Row]:
    """The rows of every artifact, the newest artifact winning for one arch, mode, choice and engine, in table order."""
    rows: dict[tuple[str, str, str, str, str], Row] = {}
    for artifact in sorted(artifacts, key=lambda p: p.name):
        for row in read_artifact(artifact, reference, want):
            rows[(row.arch, row.mode, row.choice, row.engine, row.precision)] = row
    searched = {(r.arch, r.mode, r.engine, r.precision): r.search for r in rows.values() if r.choice == "max"}
    out = [row if row.choice == "max" else _with_search(row, searched.get((row.arch, row.mode, row.engine, row.precision)))
           for row in rows.values()]
    return sorted(_flag_unlike_limits(out), key=_order)


def _flag_unlike_limits(rows: list[Row]) -> list[Row]:
    """Flag the searched rows of an arch and mode whose engines searched within allocator limits more than
    LIMIT_SPREAD_PERCENT apart (orchestrator.judge.maxbatch_limits): their maximal batches do not compare; and, beside
    another engine's search, a row whose limit was not recorded: whether they compare is unknown."""
    flagged = []
    for row in rows:
        alike = [r for r in rows if (r.arch, r.mode, r.choice) == (row.arch, row.mode, "max") and r.search is not None]
        limits = [SearchLimit(r.engine, f"{r.engine} {r.precision}", r.search.memory_limit_bytes) for r in alike if r.search]
        if row.choice == "max" and row.search is not None:
            if row.search.memory_limit_bytes is not None and limits_apart(limits):
                row = replace(row, flags=(*row.flags, f"memory limits more than {LIMIT_SPREAD_PERCENT}% apart"))
            elif row.search.memory_limit_bytes is None and unknown_limits(limits):
                row = replace(row, flags=(*row.flags, "memory limit not recorded"))
        flagged.append(row)
    return flagged


def _with_search(row: Row, search: Search | None) -> Row:
    return replace(row, search=search) if search else row


def _order(row: Row) -> tuple[int, int, int, str, str]:
    def index(values: tuple[str, ...], value: str) -> int:
        return values.index(value) if value in values else len(values)

    return index(MODES, row.mode), index(CHOICES, row.choice), index(ARCHS, row.arch), row.engine, row.precision


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return top / bottom if top and bottom else None


def ratios(rows: list[Row], reference: Reference) -> list[Ratio]:
    """TResNet-M / ResNet-50 for each mode, choice and engine where both rows exist."""
    by_key = {(r.arch, r.mode, r.choice, r.engine, r.precision): r for r in rows}
    tres, base = reference.models.get("tresnet_m"), reference.models.get("resnet50_v1.5")
    out = []
    for row in rows:
        other = by_key.get(("resnet50_v1.5", row.mode, row.choice, row.engine, row.precision))
        if row.arch != "tresnet_m" or other is None:
            continue
        here_max = _ratio(row.search.max_batch if row.search else None, other.search.max_batch if other.search else None)
        paper_img = _ratio(tres.img_s(row.mode), base.img_s(row.mode)) if tres and base else None
        paper_max = _ratio(tres.max_train_batch, base.max_train_batch) if tres and base and row.mode == "train" else None
        out.append(Ratio(row.mode, row.choice, row.engine, _ratio(row.median, other.median), paper_img, here_max, paper_max))
    return out


def _n(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _sig(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _max_cell(search: Search | None) -> str:
    if search is None or search.max_batch is None:
        return "failed" if search is not None else "-"
    limit = f" ({search.memory_limit_bytes / 2**30:.1f} GiB)" if search.memory_limit_bytes is not None else ""
    return f"{'>=' if search.capped_by else ''}{search.max_batch:,}{limit}"


def markdown(rows: list[Row], table_ratios: list[Ratio], reference: Reference, machine: str) -> str:
    """The table and the ratios as Markdown."""
    head = ["arch", "mode", "batch", "engine", "max batch", "batch used", "trainable params", "GMACs (paper GFLOPs)",
            f"{machine} img/s median [min-max], ok/runs", "TFLOP/s", "V100 img/s", "V100 max train batch", "flags"]
    lines = [f"### TResNet-M against ResNet-50: {machine} beside the paper's V100", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        spread = f"{_n(r.median)} [{_n(r.low)}-{_n(r.high)}], {r.ok}/{r.runs}" if r.median is not None else f"-, {r.ok}/{r.runs}"
        cells = [r.arch, r.mode, CHOICE_TEXT.get(r.choice, r.choice), f"{r.engine} {r.precision}", _max_cell(r.search),
                 _n(r.batch), _n(r.parameters), f"{_n(r.gmacs, 2)} ({_n(r.paper_gflops, 1)})", spread, _sig(r.tflops),
                 _n(r.paper_img_s), _n(r.paper_max_batch), "; ".join(r.flags)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"V100 figures: {reference.source}.", "", "### TResNet-M / ResNet-50", "",
              f"| mode | batch | engine | img/s, {machine} | img/s, paper V100 | max batch, {machine} | max train batch, paper V100 |",
              "|---|---|---|---|---|---|---|"]
    for q in table_ratios:
        lines.append(f"| {q.mode} | {CHOICE_TEXT.get(q.choice, q.choice)} | {q.engine} | {_n(q.img_s, 2)} | {_n(q.paper_img_s, 2)} "
                     f"| {_n(q.max_batch, 2)} | {_n(q.paper_max_batch, 2)} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", type=Path, nargs="+", help="artifacts, or folders holding them")
    parser.add_argument("--json", action="store_true", help="print the rows and ratios as JSON")
    parser.add_argument("--repeats", type=int, default=WANT_REPEATS, help="ok repeats a row needs to go unflagged")
    args = parser.parse_args()
    artifacts = find_artifacts(args.paths)
    if not artifacts:
        print(f"error: no bench artifact (summary.json) in {', '.join(map(str, args.paths))}", file=sys.stderr)
        return 2
    machines = {a: machine_name(json.loads((a / "summary.json").read_text())) for a in artifacts}
    if len(set(machines.values())) > 1:  # one table, one GPU: rows of two models would compare the hardware
        parts = "; ".join(f"{m}: {', '.join(a.name for a in artifacts if machines[a] == m)}" for m in sorted(set(machines.values())))
        print(f"error: the artifacts ran on different machines ({parts}); a table holds one machine's", file=sys.stderr)
        return 2
    reference = load_reference()
    rows = collect(artifacts, reference, args.repeats)
    table_ratios = ratios(rows, reference)
    machine = machines[artifacts[-1]]
    if args.json:
        print(json.dumps({"machine": machine, "reference": reference.source, "rows": [asdict(r) for r in rows],
                          "ratios": [asdict(q) for q in table_ratios]}, indent=1))
    else:
        print(markdown(rows, table_ratios, reference, machine), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
