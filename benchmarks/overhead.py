"""Orchestration overhead: runs through ``bench scenario run`` against the same run specs run by the engine directly.

Usage: python3 benchmarks/overhead.py SCENARIO ENGINE PRECISION [--pairs N] [--warmup W] [--device cuda] [--smoke]
       [--telemetry-off] [--set k=v ...] [--json-out FILE]

First ``--warmup`` uncounted runs through bench fill the persistent compile caches (the first run
of a machine compiles; later ones load). Then each of N pairs runs the scenario once for
ENGINE/PRECISION through bench (local runtime) and the very same run spec directly with
``python -m bench_<engine>`` (in a folder of its own, with the environment bench's local runtime gives an engine:
``orchestrator.runtimes.local.engine_env``); odd pairs run bench first, even pairs the engine first (on the spec of
the bench run before), so that drift of the machine falls on both sides alike. Prints every pair, then the medians with their ranges: both
steady-state throughputs, the ratio bench/direct, the wall time of the bench command beyond its run
record (CLI start, validation, dataset lookup, summary, manifest), and ``extra_wall_vs_direct_s``:
the bench command's wall time less the direct engine process's (everything bench adds, the run's
shared weights, telemetry and checks included), with each side's engine phases (setup, warmup,
timed) from its result.json and the parts of its ``prepare:`` log line (model and weights, on the device,
steps built, ...), so a difference inside the engine shows where it is. ``--json-out`` is rewritten after
every pair (``complete`` false until the last), so a cut-off campaign keeps what it measured.

``--check REPORT...`` judges saved reports against issue 26's goal, "at most 1% of throughput and 2 s of wall time
outside the engine": the median ratio bench/direct at least 0.99, every pair's time outside the engine process at
most 2 s, the campaign complete with at least 5 pairs; it prints one verdict line per report and exits 1 when one
misses. ``extra_wall_vs_direct_s`` (two whole runs' difference, the engine's compile spread included) is printed
beside, not judged.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # bench's own modules, imported where used


@dataclass(frozen=True)
class Pair:
    """One run through bench and the same spec run by the engine entrypoint directly."""

    throughput_bench: float
    throughput_direct: float
    bench_command_wall_s: float
    engine_process_wall_in_bench_s: float
    direct_engine_wall_s: float
    artifact: str
    phases_bench: dict[str, float]  # the engine's own setup/warmup/timed seconds, as its result reports them
    phases_direct: dict[str, float]
    prepare_bench: dict[str, float]  # the engine's ``prepare:`` parts (model and weights, steps built, ...) per side
    prepare_direct: dict[str, float]

    @property
    def ratio(self) -> float:
        return self.throughput_bench / self.throughput_direct

    @property
    def outside_engine_s(self) -> float:
        return self.bench_command_wall_s - self.engine_process_wall_in_bench_s

    @property
    def extra_wall_s(self) -> float:
        """What the user waits more than for the engine run directly: the whole bench command against the
        direct process (the run's shared weights, telemetry start/stop and checks counted too)."""
        return self.bench_command_wall_s - self.direct_engine_wall_s


def phases(result: dict) -> dict[str, float]:
    """The engine's setup, warmup and timed seconds from its result.json."""
    m = result.get("measurements") or {}
    timed = sum(e.get("time_s", 0.0) for e in m.get("epochs") or [])
    parts = {f"setup.{name}": value for name, value in (m.get("setup_parts") or {}).items()}
    return {"setup_s": m.get("setup_s") or 0.0, **parts, "warmup_s": m.get("warmup_s") or 0.0, "epochs_s": timed}


def bench_command(args: argparse.Namespace, out: Path) -> list[str]:
    command = [sys.executable, "-m", "orchestrator", "scenario", "run", args.scenario, "--engines", args.engine,
               "--precisions", args.precision, "--runtime", "local", "--device", args.device, "--out", str(out),
               "--repeats", "1", "--json"]
    command += ["--smoke"] if args.smoke else []
    for item in args.sets:
        command += ["--set", item]
    return command


def engine_env(engine: str) -> dict[str, str]:
    """The environment bench's local runtime gives the engine (``orchestrator.runtimes.local.engine_env``: the same
    persistent compile caches, PYTHONPATH and fixed variables), so both sides differ only by bench itself."""
    from orchestrator.engines.registry import get_engine
    from orchestrator.runtimes.local import engine_env as bench_engine_env
    from orchestrator.runtimes.local_settings import LocalSettings

    return bench_engine_env(get_engine(engine), LocalSettings())


PREPARE_LINE = re.compile(r"\[bench-engine\] prepare: (.*)$", re.MULTILINE)
PREPARE_PART = re.compile(r"^(.*?)(?: (-?\d+(?:\.\d+)?)s)?$")


def prepare_parts(log_text: str) -> dict[str, float]:
    """The engine's ``prepare:`` line (bench_engine.setupclock) as {part: seconds}; {} when the log has none.
    A part logged without seconds (a mark the engine reached but did not time) is left out."""
    found = PREPARE_LINE.findall(log_text)
    if not found:
        return {}
    parts: dict[str, float] = {}
    for item in found[-1].split(", "):
        match = PREPARE_PART.match(item.strip())
        if match and match.group(2) is not None:
            parts[match.group(1)] = float(match.group(2))
    return parts


def run_bench(args: argparse.Namespace, out: Path) -> tuple[float, float, float, Path, str, dict[str, float], dict[str, float]]:
    """(throughput, command wall s, run record wall s, spec path, artifact, engine phases, prepare parts) of one run
    through bench."""
    started = time.perf_counter()
    env = {**os.environ, "BENCH_TELEMETRY_INTERVAL_S": "0"} if args.telemetry_off else None
    proc = subprocess.run(bench_command(args, out), capture_output=True, text=True, cwd=REPO, env=env)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, "bench scenario run", proc.stdout, proc.stderr)
    summary = json.loads(proc.stdout)
    run = summary["runs"][0]
    run_dir = Path(summary["artifact"]) / "runs" / run["run_id"]
    record = json.loads((run_dir / "run.json").read_text())
    result = json.loads((run_dir / "result.json").read_text())
    log = run_dir / "engine.log"
    parts = prepare_parts(log.read_text(errors="replace")) if log.is_file() else {}
    return run["throughput"], wall, record["wall_s"], run_dir / "spec.json", summary["artifact"], phases(result), parts


def run_direct(engine: str, spec: Path, out: Path) -> tuple[float, float, dict[str, float], dict[str, float]]:
    """(throughput, wall s, engine phases, prepare parts) of the engine entrypoint run directly on ``spec``, in a
    folder of its own as bench's run folder is, with bench's engine environment."""
    work = Path(tempfile.mkdtemp(prefix="direct-", dir=out))
    result = work / "direct-result.json"
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", f"bench_{engine}", "--spec", str(spec), "--result", str(result)],
                          env=engine_env(engine), cwd=work, capture_output=True, text=True)
    wall = time.perf_counter() - started
    (work / "engine.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, f"python -m bench_{engine}", proc.stdout, proc.stderr)
    doc = json.loads(result.read_text())
    return doc["measurements"]["steady"]["throughput"], wall, phases(doc), prepare_parts(proc.stdout + proc.stderr)


def run_pair(args: argparse.Namespace, out: Path, direct_first: Path | None) -> tuple[Pair, Path]:
    """One bench run and one direct run (on ``direct_first``'s spec, before the bench run, when given);
    returns the pair and the bench run's spec. Raises CalledProcessError when either fails."""
    direct = run_direct(args.engine, direct_first, out) if direct_first else None
    throughput, wall, engine_wall, spec, artifact, bench_phases, bench_parts = run_bench(args, out)
    direct = direct or run_direct(args.engine, spec, out)
    return Pair(throughput, direct[0], wall, engine_wall, direct[1], artifact, bench_phases, direct[2],
                bench_parts, direct[3]), spec


def median_and_range(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def report(args: argparse.Namespace, pairs: list[Pair]) -> dict[str, object]:
    """The medians and ranges over ``pairs`` and every pair; ``complete`` is false while fewer than --pairs are done."""
    return {
        "engine": args.engine, "precision": args.precision, "scenario": args.scenario, "pairs": len(pairs),
        "pairs_planned": args.pairs, "complete": len(pairs) == args.pairs, "warmup_runs": args.warmup, "telemetry": not args.telemetry_off,
        "ratio_bench_over_direct": median_and_range([p.ratio for p in pairs]),
        "throughput_bench": median_and_range([p.throughput_bench for p in pairs]),
        "throughput_direct": median_and_range([p.throughput_direct for p in pairs]),
        "outside_engine_s": median_and_range([p.outside_engine_s for p in pairs]),
        "extra_wall_vs_direct_s": median_and_range([p.extra_wall_s for p in pairs]),
        "runs": [{**asdict(p), "ratio": p.ratio, "outside_engine_s": p.outside_engine_s, "extra_wall_s": p.extra_wall_s}
                 for p in pairs],
    }


GOAL_RATIO_MIN = 0.99  # at most 1% of throughput
GOAL_OUTSIDE_MAX_S = 2.0  # at most 2 s of wall time outside the engine, in every pair
GOAL_PAIRS = 5


def goal_misses(doc: dict) -> list[str]:
    """What a saved report misses of the overhead goal (empty: met)."""
    misses = []
    complete = bool(doc.get("complete", "pairs_planned" not in doc))  # before session 8 a report was written only at the end
    pairs, ratio, outside = int(doc["pairs"]), float(doc["ratio_bench_over_direct"]["median"]), float(doc["outside_engine_s"]["max"])
    if not complete or pairs < GOAL_PAIRS:
        misses.append(f"{pairs} of {doc.get('pairs_planned', pairs)} pairs planned done (goal: {GOAL_PAIRS} or more, all done)")
    if ratio < GOAL_RATIO_MIN:
        misses.append(f"median ratio bench/direct {ratio:.3f} < {GOAL_RATIO_MIN}")
    if outside > GOAL_OUTSIDE_MAX_S:
        misses.append(f"outside the engine process up to {outside:.2f} s > {GOAL_OUTSIDE_MAX_S:g} s")
    return misses


def check_reports(paths: list[Path]) -> int:
    """One verdict line per saved report (``--check``); 1 when one misses the goal or cannot be read, else 0."""
    code = 0
    for path in paths:
        try:
            doc = json.loads(path.read_text())
            misses = goal_misses(doc)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"{path}: not an overhead report ({type(exc).__name__}: {exc})")
            code = 1
            continue
        ratio, outside, extra = (doc[k] for k in ("ratio_bench_over_direct", "outside_engine_s", "extra_wall_vs_direct_s"))
        print(f"{path}: {doc.get('engine')} {doc.get('precision')}, {doc['pairs']} pairs: ratio {ratio['median']:.3f} "
              f"[{ratio['min']:.3f}-{ratio['max']:.3f}], outside the engine {outside['median']:.2f} s "
              f"[{outside['min']:.2f}-{outside['max']:.2f}], beyond the direct run {extra['median']:.2f} s "
              f"[{extra['min']:.2f}-{extra['max']:.2f}] (not judged): " + ("met" if not misses else "NOT met: " + "; ".join(misses)))
        code = code or (1 if misses else 0)
    return code


def write_report(path: Path | None, doc: dict[str, object]) -> None:
    """Replace ``path`` with ``doc`` atomically (``orchestrator.jsonio.write_json``): a kill mid-write leaves the last
    whole report."""
    from orchestrator.jsonio import write_json

    if path is not None:
        write_json(path, doc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?")
    parser.add_argument("engine", nargs="?")
    parser.add_argument("precision", nargs="?")
    parser.add_argument("--check", type=Path, nargs="+", metavar="REPORT", help="judge saved reports against the goal and exit")
    parser.add_argument("--pairs", type=int, default=3, help="bench/direct pairs, alternating (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="uncounted bench runs first, to fill the compile caches (default 1)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--telemetry-off", action="store_true",
                        help="run bench with BENCH_TELEMETRY_INTERVAL_S=0 (no GPU sampler beside the engine)")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--set", dest="sets", action="append", default=[])
    parser.add_argument("--json-out", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    if args.check:
        return check_reports(args.check)
    if not (args.scenario and args.engine and args.precision):
        parser.error("SCENARIO ENGINE PRECISION are required (or --check REPORT...)")
    if args.pairs < 1 or args.warmup < 0:
        parser.error("--pairs must be at least 1 and --warmup at least 0")
    pairs: list[Pair] = []
    spec: Path | None = None
    try:
        for _ in range(args.warmup):
            spec = run_bench(args, Path(tempfile.mkdtemp(prefix="bench-overhead-")))[3]
        for index in range(args.pairs):
            pair, latest = run_pair(args, Path(tempfile.mkdtemp(prefix="bench-overhead-")), spec if index % 2 else None)
            spec = latest
            pairs.append(pair)
            write_report(args.json_out, report(args, pairs))  # a cut-off campaign keeps every pair already measured
            print(f"pair {index + 1}/{args.pairs} ({'engine' if index % 2 else 'bench'} first): bench "
                  f"{pair.throughput_bench:,.0f}/s, direct {pair.throughput_direct:,.0f}/s, ratio {pair.ratio:.4f}, "
                  f"outside the run record {pair.outside_engine_s:.2f} s, more than direct {pair.extra_wall_s:.2f} s, "
                  f"engine prepare {pair.phases_bench.get('setup.prepare_s', 0.0):.2f} s / "
                  f"{pair.phases_direct.get('setup.prepare_s', 0.0):.2f} s", file=sys.stderr)
    except subprocess.CalledProcessError as exc:
        print(f"{exc.cmd} failed ({exc.returncode}): {(exc.stderr or '')[-2000:]}", file=sys.stderr)
        return 1
    doc = report(args, pairs)
    print(json.dumps(doc, indent=2))
    write_report(args.json_out, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
