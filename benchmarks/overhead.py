"""Orchestration overhead: runs through ``bench scenario run`` against the same run specs run by the engine directly.

Usage: python3 benchmarks/overhead.py SCENARIO ENGINE PRECISION [--pairs N] [--device cuda] [--smoke]
       [--set k=v ...] [--json-out FILE]

Each of N pairs runs the scenario once for ENGINE/PRECISION through bench (local runtime), then
the very same run spec directly with ``python -m bench_<engine>``, alternating so that drift of the
machine falls on both sides alike. Prints every pair, then the medians with their ranges: both
steady-state throughputs, the ratio bench/direct, and the wall time bench spent outside the engine
process (CLI start, validation, dataset lookup, telemetry, records, manifest). The goals the
README states: the median ratio within 1% of 1 and at most 2 s outside the engine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Pair:
    """One run through bench and the same spec run by the engine entrypoint directly."""

    throughput_bench: float
    throughput_direct: float
    bench_command_wall_s: float
    engine_process_wall_in_bench_s: float
    direct_engine_wall_s: float
    artifact: str

    @property
    def ratio(self) -> float:
        return self.throughput_bench / self.throughput_direct

    @property
    def outside_engine_s(self) -> float:
        return self.bench_command_wall_s - self.engine_process_wall_in_bench_s


def bench_command(args: argparse.Namespace, out: Path) -> list[str]:
    command = [sys.executable, "-m", "orchestrator", "scenario", "run", args.scenario, "--engines", args.engine,
               "--precisions", args.precision, "--runtime", "local", "--device", args.device, "--out", str(out),
               "--repeats", "1", "--json"]
    command += ["--smoke"] if args.smoke else []
    for item in args.sets:
        command += ["--set", item]
    return command


def engine_env(engine: str) -> dict[str, str]:
    """The environment bench gives the engine (the same persistent compile caches), so both runs compile alike."""
    sys.path.insert(0, str(REPO))
    from orchestrator.runtimes.local import FIXED_ENV, compile_cache_env

    return {**compile_cache_env(), **os.environ, **FIXED_ENV,
            "PYTHONPATH": os.pathsep.join([str(REPO / "images" / "common"), str(REPO / "images" / engine)])}


def run_pair(args: argparse.Namespace, out: Path) -> Pair:
    """One bench run, then its spec run directly; raises CalledProcessError when either fails."""
    started = time.perf_counter()
    proc = subprocess.run(bench_command(args, out), capture_output=True, text=True, cwd=REPO)
    bench_wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, "bench scenario run", proc.stdout, proc.stderr)
    summary = json.loads(proc.stdout)
    run = summary["runs"][0]
    run_dir = Path(summary["artifact"]) / "runs" / run["run_id"]
    record = json.loads((run_dir / "run.json").read_text())
    direct_result = out / "direct-result.json"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", f"bench_{args.engine}", "--spec", str(run_dir / "spec.json"),
                    "--result", str(direct_result)], check=True, env=engine_env(args.engine), capture_output=True)
    direct_wall = time.perf_counter() - started
    direct = json.loads(direct_result.read_text())["measurements"]["steady"]["throughput"]
    return Pair(run["throughput"], direct, bench_wall, record["wall_s"], direct_wall, summary["artifact"])


def median_and_range(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def report(args: argparse.Namespace, pairs: list[Pair]) -> dict[str, object]:
    return {
        "engine": args.engine, "precision": args.precision, "scenario": args.scenario, "pairs": len(pairs),
        "ratio_bench_over_direct": median_and_range([p.ratio for p in pairs]),
        "throughput_bench": median_and_range([p.throughput_bench for p in pairs]),
        "throughput_direct": median_and_range([p.throughput_direct for p in pairs]),
        "outside_engine_s": median_and_range([p.outside_engine_s for p in pairs]),
        "runs": [{**asdict(p), "ratio": p.ratio, "outside_engine_s": p.outside_engine_s} for p in pairs],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario")
    parser.add_argument("engine")
    parser.add_argument("precision")
    parser.add_argument("--pairs", type=int, default=3, help="bench/direct pairs, alternating (default 3)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--set", dest="sets", action="append", default=[])
    parser.add_argument("--json-out", type=Path, help="also write the report here")
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    pairs = []
    for index in range(args.pairs):
        try:
            pair = run_pair(args, Path(tempfile.mkdtemp(prefix="bench-overhead-")))
        except subprocess.CalledProcessError as exc:
            print(f"pair {index + 1}: {exc.cmd} failed ({exc.returncode}): {(exc.stderr or '')[-2000:]}", file=sys.stderr)
            return 1
        pairs.append(pair)
        print(f"pair {index + 1}/{args.pairs}: bench {pair.throughput_bench:,.0f}/s, direct {pair.throughput_direct:,.0f}/s, "
              f"ratio {pair.ratio:.4f}, outside the engine {pair.outside_engine_s:.2f} s", file=sys.stderr)
    doc = report(args, pairs)
    text = json.dumps(doc, indent=2)
    print(text)
    if args.json_out:
        args.json_out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
