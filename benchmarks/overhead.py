"""Orchestration overhead: one run through ``bench scenario run`` versus the engine entrypoint directly.

Usage: python3 benchmarks/overhead.py SCENARIO ENGINE PRECISION [--device cuda] [--smoke] [--set k=v ...]

Runs the scenario once for ENGINE/PRECISION through bench (local runtime), then re-runs the very
same run spec directly with ``python -m bench_<engine>``; prints both steady-state throughputs,
their ratio, and the wall time bench spent outside the engine process (CLI start, validation,
dataset lookup, records, manifest).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario")
    parser.add_argument("engine")
    parser.add_argument("precision")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--set", dest="sets", action="append", default=[])
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    command = [sys.executable, "-m", "orchestrator", "scenario", "run", args.scenario, "--engines", args.engine,
               "--precisions", args.precision, "--runtime", "local", "--device", args.device, "--out", str(out), "--json"]
    command += ["--smoke"] if args.smoke else []
    for item in args.sets:
        command += ["--set", item]
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    bench_wall = time.perf_counter() - started
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
        return proc.returncode
    summary = json.loads(proc.stdout)
    run = summary["runs"][0]
    run_dir = Path(summary["artifact"]) / "runs" / run["run_id"]
    record = json.loads((run_dir / "run.json").read_text())
    spec_path = run_dir / "spec.json"
    direct_result = out / "direct-result.json"
    sys.path.insert(0, str(REPO))
    from orchestrator.runtimes.local import FIXED_ENV, compile_cache_env

    # the environment bench gives the engine (the same persistent compile caches), so both runs compile alike
    env = {**compile_cache_env(), **os.environ, **FIXED_ENV,
           "PYTHONPATH": os.pathsep.join([str(REPO / "images" / "common"), str(REPO / "images" / args.engine)])}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", f"bench_{args.engine}", "--spec", str(spec_path), "--result", str(direct_result)],
                   check=True, env=env, capture_output=True)
    direct_wall = time.perf_counter() - started
    direct = json.loads(direct_result.read_text())["measurements"]["steady"]["throughput"]
    through_bench = run["throughput"]
    report = {
        "engine": args.engine,
        "precision": args.precision,
        "throughput_bench": through_bench,
        "throughput_direct": direct,
        "ratio_bench_over_direct": through_bench / direct if direct else None,
        "bench_command_wall_s": bench_wall,
        "engine_process_wall_in_bench_s": record["wall_s"],
        "direct_engine_wall_s": direct_wall,
        "outside_engine_s": bench_wall - record["wall_s"],
        "artifact": summary["artifact"],
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
