"""The report's tables, as plain data that the Markdown and HTML renderers share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.reports.data import ReportData


@dataclass
class Table:
    key: str
    title: str
    columns: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)


DASH = "-"


def num(value: float | None, digits: int = 1) -> str:
    return DASH if value is None else f"{value:,.{digits}f}"


def sec(value: float | None) -> str:
    return DASH if value is None else f"{value:.2f}"


def interval(ci: list[float] | None, digits: int = 1, suffix: str = "") -> str:
    return DASH if not ci else f"{ci[0]:,.{digits}f}{suffix} - {ci[1]:,.{digits}f}{suffix}"


def energy(value: float | None) -> str:
    if value is None:
        return DASH
    return f"{value:.4g}"


def pvalue(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _stat(stats: dict[str, Any] | None, key: str) -> float | None:
    return stats.get(key) if stats else None


def overview(data: ReportData) -> Table:
    s, m = data.summary, data.manifest
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(s["counts"].items())) or "no runs"
    integrity = "valid (schemas and sha256 of every file)" if not data.problems else \
        f"{len(data.problems)} problem(s): " + "; ".join(str(p) for p in data.problems[:3])
    rows = [
        ["scenario", s["scenario"]],
        ["artifact", s["artifact_id"]],
        ["source", data.source],
        ["created", m.get("created_at", DASH)],
        ["complete", "yes" if m.get("complete") else "no (interrupted or in progress)"],
        ["smoke run", "yes (throughput not representative)" if s.get("smoke") else "no"],
        ["runs", counts],
        ["integrity", integrity],
        ["bench", m.get("bench_version", DASH)],
    ]
    return Table("overview", "Overview", ["field", "value"], rows)


def runs(data: ReportData) -> Table:
    columns = ["run", "engine", "precision", "path", "batch", "devices", "repeat", "status", "samples/s", "setup s",
               "warmup s", "wall s", "J/img", "reason"]
    rows = []
    by_id = {r.run_id: r for r in data.runs}
    for row in data.summary["runs"]:
        record = by_id[row["run_id"]].record if row["run_id"] in by_id else {}
        rows.append([row["run_id"], row["engine"], row["precision"], row.get("path", DASH), str(row.get("batch_per_device", DASH)),
                     str(row.get("devices", DASH)), str(row.get("repeat", DASH)), row["status"], num(row.get("throughput")),
                     sec(row.get("setup_s")), sec(row.get("warmup_s")), sec(record.get("wall_s")),
                     energy(row.get("energy_per_sample_j")), row.get("reason") or ""])
    return Table("runs", "Runs", columns, rows, ["samples/s: steady-state throughput (warmup and setup excluded)."])


def groups(data: ReportData) -> Table:
    columns = ["engine", "precision", "path", "batch", "devices", "n", "median", "min", "max", "IQR", "interval", "J/img (median)",
               "warnings"]
    rows = []
    for g in data.summary["groups"]:
        tp = g.get("throughput")
        rows.append([g["engine"], g["precision"], g["path"], str(g["batch_per_device"]), str(g["devices"]),
                     f"{g['n']}/{g.get('n_total', g['n'])}", num(_stat(tp, "median")), num(_stat(tp, "min")), num(_stat(tp, "max")),
                     num(_stat(tp, "iqr")), labelled(tp), energy(_stat(g.get("energy_per_sample_j"), "median")),
                     "; ".join(g.get("warnings") or [])])
    notes = ["Steady-state throughput (samples/s) over the valid repeats; n = valid/total runs. "
             "interval: bootstrap (percentile) 95% CI of the median with 5+ repeats; with fewer, the range (min-max) of the repeats."]
    return Table("groups", "Throughput statistics per group", columns, rows, notes)


def ratios(data: ReportData) -> Table:
    columns = ["precision", "path", "batch", "devices", "engine", "vs", "ratio", "interval", "Mann-Whitney p", "significant"]
    rows = []
    notes_seen: list[str] = []
    for r in data.summary.get("ratios") or []:
        sig = r.get("significant")
        if r.get("note") and r["note"] not in notes_seen:
            notes_seen.append(r["note"])
        rows.append([r["precision"], r.get("path", DASH), str(r.get("batch_per_device", DASH)), str(r.get("devices", DASH)),
                     r["engine"], r["baseline_engine"], f"{r['ratio']:.2f}x",
                     f"95% CI {interval(r['ci95'], 2, 'x')}" if r.get("ci95") else (f"range {interval(r['range'], 2, 'x')}" if r.get("range") else DASH),
                     pvalue(r.get("p_value")), "n/a" if sig is None else ("yes" if sig else "no*" if r.get("note") else "no")])
    notes = [f"ratio = median throughput of 'engine' / median of 'vs', the reference engine {data.summary.get('reference_engine') or ''} "
             "(valid runs only): 1.90x means engine reaches 1.90 times vs. One ratio per pair. "
             "interval: bootstrap 95% CI with 5+ repeats a side, else the range min(engine)/max(vs) - max(engine)/min(vs); "
             "significant: two-sided Mann-Whitney U p < 0.05 over the repeats."]
    notes += [f"* {note}" for note in notes_seen]
    if not rows:
        notes.append("No cross-engine ratio: fewer than two engines with valid runs in the same cell.")
    return Table("ratios", "Cross-engine ratios", columns, rows, notes)


def scaling(data: ReportData) -> Table:
    columns = ["engine", "precision", "path", "batch/device", "devices", "global batch", "n", "samples/s (median)", "speedup",
               "95% CI", "efficiency", "note"]
    rows = []
    for r in data.summary.get("scaling") or []:
        speedup, efficiency = r.get("speedup"), r.get("efficiency")
        rows.append([r["engine"], r["precision"], r.get("path", DASH), str(r["batch_per_device"]), str(r["devices"]),
                     str(r.get("batch_global", DASH)), str(r.get("n", DASH)), num(r.get("throughput")),
                     DASH if speedup is None else f"{speedup:.2f}x", interval(r.get("speedup_ci95"), 2, "x"),
                     DASH if efficiency is None else f"{100 * efficiency:.1f}%", r.get("note") or ""])
    notes = ["speedup = median steady-state throughput on N devices / median on 1 device of the same engine, precision, path and "
             "per-device batch (data parallel: the global batch is per-device batch x N); efficiency = speedup / N. "
             "Multi-device throughput counts every device's samples over the slowest device's time. "
             "95% CI: bootstrap interval of the ratio of medians (5+ repeats a side)."]
    if not rows:
        notes.append("No strong-scaling figure: no run used more than one device.")
    return Table("scaling", "Strong scaling", columns, rows, notes)


def setup(data: ReportData) -> Table:
    columns = ["engine", "precision", "path", "batch", "devices", "setup s", "warmup s", "warmup steps", "steady steps",
               "steady s", "latency mean ms", "p50", "p90", "p95", "p99"]
    rows = []
    for g in data.summary["groups"]:
        members = [r for r in data.runs if r.result and r.record["status"] == "ok"
                   and all(r.record[k] == g[k] for k in ("engine", "precision", "path", "batch_per_device", "devices"))]
        m = members[0].result["measurements"] if members else {}
        lat = g.get("latency_ms") or {}
        steady = [r.result["measurements"]["steady"]["time_s"] for r in members]
        rows.append([g["engine"], g["precision"], g["path"], str(g["batch_per_device"]), str(g["devices"]),
                     sec(_stat(g.get("setup_s"), "median")), sec(_stat(g.get("warmup_s"), "median")),
                     str(m.get("warmup_steps", DASH)), str((m.get("steady") or {}).get("steps", DASH)),
                     sec(sorted(steady)[len(steady) // 2] if steady else None),
                     *(num(lat.get(k), 2) for k in ("mean", "p50", "p90", "p95", "p99"))])
    notes = ["Medians over the valid repeats. setup: engine start to first step (imports, model, data); "
             "warmup: the warmup steps, compilation and graph capture included; both are excluded from throughput."]
    return Table("setup", "Setup, warmup and latency", columns, rows, notes)


def telemetry(data: ReportData) -> Table:
    columns = ["run", "telemetry", "samples", "GPUs", "mean W", "max W", "mean util %", "max mem GiB", "max temp C",
               "throttling", "energy J", "J/img", "method"]
    rows = []
    samples_by_run = {row["run_id"]: row.get("samples") for row in data.summary["runs"]}
    for run in data.runs:
        gpu = run.gpu
        if not gpu:
            rows.append([run.run_id, "not recorded", *[DASH] * 11])
            continue
        if not gpu.get("available"):
            rows.append([run.run_id, f"unavailable: {gpu.get('reason')}", *[DASH] * 11])
            continue
        processed = samples_by_run.get(run.run_id)
        joules = gpu.get("energy_j")
        mem = gpu.get("mem_used_max_bytes")
        rows.append([run.run_id, "ok", str(gpu.get("samples", DASH)), ",".join(map(str, gpu.get("gpus", []))),
                     num((gpu.get("power_w") or {}).get("mean")), num((gpu.get("power_w") or {}).get("max")),
                     num((gpu.get("util_pct") or {}).get("mean")), num(mem / 2**30, 2) if mem is not None else DASH,
                     str(gpu.get("temperature_max_c") if gpu.get("temperature_max_c") is not None else DASH),
                     ", ".join(gpu.get("throttle_reasons_seen") or []) or "none",
                     num(joules), energy(joules / processed if joules is not None and processed else None),
                     gpu.get("energy_method") or DASH])
    overview = data.summary.get("telemetry") or {}
    notes = [overview.get("energy_definition") or "J/img: GPU energy of the whole engine process / samples processed."]
    notes += [f"telemetry: {reason}" for reason in overview.get("reasons", [])]
    return Table("telemetry", "GPU telemetry and energy", columns, rows, notes)


def labelled(stats: dict[str, Any] | None) -> str:
    """'95% CI a - b' (5+ repeats) or 'range min - max' (fewer) of a statistics block."""
    span = (stats or {}).get("interval")
    if not span:
        return DASH
    return f"{'95% CI' if span['kind'] == 'ci95' else 'range'} {interval([span['low'], span['high']])}"


def numerical_parity(data: ReportData) -> Table:
    columns = ["precision", "engines", "steps", "largest relative deviation", "at step", "tolerance there", "verdict"]
    rows = []
    for v in data.summary.get("numerical_parity") or []:
        dev = v.get("max_rel_dev")
        rows.append([v["precision"], " vs ".join(v["engines"]), str(v.get("steps", 0)), DASH if dev is None else f"{dev:.2e}",
                     str(v.get("at_step") or DASH), DASH if not v.get("tolerance") else f"{v['tolerance']:.1e}",
                     v["verdict"] + (f": {v['reason']}" if v.get("reason") else "")])
    notes = ["The training losses of the first steps (up to 20) of each engine pair that started from the same shared weights, "
             "step by step; tolerance grows with the step (orchestrator/trajectory.py). parity_warning: runs kept, flagged."]
    if not rows:
        notes.append("No pair of training runs with recorded losses in the same cell.")
    return Table("numerical_parity", "Numerical parity", columns, rows, notes)


def parity(data: ReportData) -> Table:
    rows = []
    for run in data.runs:
        for m in (run.record.get("parity") or {}).get("mismatches", []):
            rows.append([run.run_id, m["field"], str(m["expected"]), str(m["actual"]), m.get("against", "spec")])
    notes = [] if rows else ["Every checked run matched its spec and the other engines."]
    return Table("parity", "Parity findings", ["run", "field", "expected", "actual", "against"], rows, notes)


def environment(data: ReportData) -> list[Table]:
    host = data.summary.get("host") or {}
    nvml = host.get("nvml") or {}
    gpu_names = ", ".join(g.get("name") or "?" for g in nvml.get("gpus", [])) or f"none ({nvml.get('reason') or 'no NVML'})"
    host_rows = [["hostname", str(host.get("hostname", DASH))], ["os", str(host.get("os", DASH))],
                 ["cpus", str(host.get("cpu_count", DASH))], ["python", str(host.get("python", DASH))],
                 ["NVIDIA driver", str(nvml.get("driver") or DASH)], ["CUDA driver", str(nvml.get("cuda_driver") or DASH)],
                 ["GPUs", gpu_names]]
    tables = [Table("host", "Host", ["field", "value"], host_rows)]
    engine_rows = []
    seen: set[tuple] = set()
    for run in data.runs:
        if not run.result:
            continue
        env = run.result["environment"]
        runtime = run.record.get("runtime") or {}
        applied = ", ".join(k for k, v in sorted((run.result["work"].get("optimizations") or {}).items()) if v.get("applied")) or "none"
        row = [run.record["engine"], run.record["path"], f"{env.get('framework')} {env.get('framework_version')}",
               str(env.get("python") or DASH), str(env.get("cuda") or DASH), str(env.get("cudnn") or DASH),
               str(env.get("device_kind") or DASH), ", ".join(env.get("devices") or []) or DASH,
               runtime.get("name", DASH), runtime.get("image") or runtime.get("interpreter") or DASH, applied]
        if tuple(row) not in seen:
            seen.add(tuple(row))
            engine_rows.append(row)
    tables.append(Table("engines", "Engines", ["engine", "path", "framework", "python", "CUDA", "cuDNN", "device", "devices",
                                               "runtime", "image / interpreter", "optimizations applied"], engine_rows))
    gpu_rows = []
    seen_gpus: set[str] = set()
    for run in data.runs:
        for dev in run.gpu.get("devices") or []:
            uuid = dev.get("uuid") or str(dev.get("index"))
            if uuid in seen_gpus:
                continue
            seen_gpus.add(uuid)
            mem = dev.get("memory_total_bytes")
            gpu_rows.append([str(dev.get("index")), str(dev.get("name")), str(dev.get("uuid")),
                             num(mem / 2**30, 1) if mem else DASH, num(dev.get("power_limit_w"), 0),
                             f"{dev.get('sm_clock_max_mhz') or DASH} / {dev.get('mem_clock_max_mhz') or DASH}",
                             _flag(dev.get("persistence_mode")), _flag(dev.get("mig_mode")), _flag(dev.get("ecc_mode")),
                             str(dev.get("compute_capability") or DASH),
                             f"{run.gpu.get('driver') or DASH} / CUDA {run.gpu.get('cuda_driver') or DASH}"])
    if gpu_rows:
        tables.append(Table("gpus", "GPUs used by the runs", ["index", "name", "UUID", "memory GiB", "power limit W",
                                                              "max SM / mem clock MHz", "persistence", "MIG", "ECC",
                                                              "compute capability", "driver"], gpu_rows))
    return tables


def _flag(value: Any) -> str:
    if value is None:
        return DASH
    return "on" if value else "off"


def claims(data: ReportData) -> Table | None:
    """The scenario's published ratios (``claims``) next to the ratios bench measured, or None."""
    block = data.scenario.get("claims")
    if not block:
        return None
    measured = {(r["engine"], r["baseline_engine"], r["precision"], r.get("path")): r for r in data.summary.get("ratios") or []}
    gpus = sorted({run.gpu.get("name") for run in data.runs if run.gpu.get("name")})
    here = ", ".join(gpus) or "this machine (no GPU recorded)"
    columns = ["engine / vs", "precision", "path", f"claimed ({block['hardware']})", f"measured ({here})", "95% CI",
               "measured / claimed", "as stated"]
    rows = []
    for claim in block["ratios"]:
        path = claim.get("path", "optimized")
        found = [r for key, r in measured.items() if key[:3] == (claim["engine"], claim["vs"], claim["precision"]) and key[3] == path]
        ratio = found[0]["ratio"] if found else None
        rows.append([f"{claim['engine']} / {claim['vs']}", claim["precision"], path, f"{claim['claimed']:.2f}x",
                     DASH if ratio is None else f"{ratio:.2f}x", interval(found[0].get("ci95"), 2, "x") if found else DASH,
                     DASH if ratio is None else f"{ratio / claim['claimed']:.2f}", claim.get("as_stated", DASH)])
    notes = [f"claimed: {block['source']}.", "measured: median throughput ratio of valid runs in this artifact (summary ratios); "
             "- where either engine has no valid run in that cell (failed, invalid or not run)."]
    if block.get("note"):
        notes.append(block["note"])
    if data.summary.get("smoke"):
        notes.append("Smoke run: the measured ratios are not representative.")
    return Table("claims", "Claimed vs measured ratios", columns, rows, notes)


def all_tables(data: ReportData) -> list[Table]:
    claim_table = claims(data)
    return [overview(data), runs(data), groups(data), ratios(data), *([claim_table] if claim_table else []), scaling(data), setup(data),
            telemetry(data), parity(data), numerical_parity(data), *environment(data)]
