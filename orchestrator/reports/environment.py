"""The report's environment tables: the host (summary.json ``host`` and every run.json ``host`` block), the engines
(one row per engine, precision, path and environment) and the GPUs the runs used."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from orchestrator.reports.data import ReportData, RunData
from orchestrator.reports.formats import DASH, RATE, flag, number
from orchestrator.reports.model import Column, Table, columns

# summary.json host: the artifact-wide facts (orchestrator/host/hostinfo.py), in the order shown
SUMMARY_FACTS = (("hostname", "hostname"), ("os", "os"), ("machine", "machine"), ("cpu_count", "cpus"), ("python", "python"),
                 ("bench_version", "bench"))
# run.json host: the host state before each run (orchestrator/host/provenance.py), in the order shown
LOAD = "load_avg"
RUN_FACTS = (("cpu_model", "CPU model"), ("cpu_affinity", "CPU affinity"), ("governors", "CPU frequency governor"),
             ("scaling_driver", "CPU scaling driver"), ("boost", "CPU boost / turbo"), (LOAD, "load average 1, 5, 15 min"),
             ("cpu_flags", "CPU flags"))
SHOWN_WITH = {"cpu_affinity_count": "cpu_affinity", "boost_source": "boost"}  # companions read into another fact's cell
ARTIFACT_WIDE = {key for key, _ in SUMMARY_FACTS} | {"nvml"}
UNKNOWN = "unknown (not readable on the host)"


def _plain(value: Any) -> str | None:
    """Any recorded fact as text: lists joined by spaces, mappings as 'key: value; ...', booleans on/off."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_plain(v)}" for k, v in value.items()) or None
    if isinstance(value, list | tuple):
        return " ".join(str(_plain(v)) for v in value) or None
    return str(value)


def run_fact(host: Mapping[str, Any], key: str) -> str | None:
    """One fact of a run.json ``host`` block as text (None when the host could not read it)."""
    value = host.get(key)
    if key == "cpu_affinity" and value is not None and host.get("cpu_affinity_count") is not None:
        return f"{value} ({host['cpu_affinity_count']} CPUs)"
    if key == "boost" and value is not None and host.get("boost_source"):
        return f"{_plain(value)} ({host['boost_source']})"
    return _plain(value)


def _across_runs(values: list[str | None]) -> str:
    """The one value of every run, or each distinct value with its number of runs."""
    counts = Counter(UNKNOWN if v is None else v for v in values)
    if len(counts) == 1:
        return next(iter(counts))
    return "; ".join(f"{value} ({n} run{'s' if n > 1 else ''})" for value, n in counts.items())


def _load(hosts: list[Mapping[str, Any]]) -> str:
    """The 1, 5 and 15 minute load averages before the runs: the values of a single run, else lowest-highest."""
    loads = [h[LOAD] for h in hosts if h.get(LOAD)]
    if not loads:
        return UNKNOWN
    if len(loads) == 1:
        return ", ".join(f"{v:.2f}" for v in loads[0])
    spans = [(min(column), max(column)) for column in zip(*loads, strict=True)]
    return ", ".join(f"{low:.2f}-{high:.2f}" for low, high in spans) + f" (lowest-highest before {len(loads)} runs)"


def host(data: ReportData) -> Table:
    """Field/value rows: the summary's host facts, then the CPU facts of the runs' records (any key they hold), then the GPUs."""
    summary_host = data.summary.host or {}
    labels = dict(SUMMARY_FACTS) | dict(RUN_FACTS)
    cells: list[list[Any]] = [[label, _plain(summary_host.get(key))] for key, label in SUMMARY_FACTS if key in summary_host]
    cells += [[labels.get(key, key), _plain(value)] for key, value in summary_host.items() if key not in ARTIFACT_WIDE]
    hosts = [run.record.host for run in data.runs if run.record.host is not None]
    known = [key for key, _ in RUN_FACTS]
    extra = [key for key in dict.fromkeys(k for h in hosts for k in h) if key not in known and key not in SHOWN_WITH]
    for key in [*known, *extra]:
        if not any(key in h for h in hosts):
            continue
        cells.append([labels.get(key, key), _load(hosts) if key == LOAD else _across_runs([run_fact(h, key) for h in hosts])])
    nvml = summary_host.get("nvml") or {}
    gpu_names = ", ".join(g.get("name") or "?" for g in nvml.get("gpus", [])) or f"none ({nvml.get('reason') or 'no NVML'})"
    cells += [["NVIDIA driver", nvml.get("driver") or None], ["CUDA driver", nvml.get("cuda_driver") or None], ["GPUs", gpu_names]]
    if hosts:
        notes = [f"CPU facts and load: the host state each run recorded (run.json host) just before it started, {len(hosts)} of "
                 f"{len(data.runs)} runs; a fact that differs between runs lists each value with its number of runs."]
    else:
        notes = ["No run recorded its host state (run.json host: records written before bench read it)."]
    return Table("host", "Host", columns("field", "value"), cells, notes)


def _ranges(numbers: Iterable[int]) -> str:
    """{1, 2, 3, 5} -> '1-3,5'."""
    spans: list[list[int]] = []
    for n in sorted(set(numbers)):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _engine_environment(run: RunData) -> tuple[Any, ...]:
    """What the Engines table shows of a run's environment (result.json environment, run.json runtime, optimizations)."""
    assert run.result is not None
    env = run.result.environment
    runtime = run.record.runtime
    work = run.result.work  # a failed engine's result has none
    applied = None if work is None else ", ".join(k for k, v in sorted((work.get("optimizations") or {}).items()) if v.get("applied")) or "none"
    return (f"{env.get('framework')} {env.get('framework_version')}", env.get("python") or None, env.get("cuda") or None,
            env.get("cudnn") or None, env.get("device_kind") or None, ", ".join(env.get("devices") or []) or None, runtime.get("name"),
            runtime.get("image") or runtime.get("interpreter") or None, applied)


def engines(data: ReportData) -> Table:
    """One row per engine, precision, path and distinct environment, with the runs it covers."""
    rows: dict[tuple[Any, ...], dict[tuple[int, int], list[int]]] = {}
    for run in data.runs:
        if not run.result:
            continue
        r = run.record
        key = (r.engine, r.precision, r.path, *_engine_environment(run))
        rows.setdefault(key, {}).setdefault((r.batch_per_device, r.devices), []).append(r.repeat)
    cells = []
    for key, runs in rows.items():
        covered = "; ".join(f"b{batch} x{devices} r{_ranges(repeats)}" for (batch, devices), repeats in runs.items())
        cells.append([*key[:3], covered, *key[3:]])
    notes = ["One row per engine, precision and path (and per environment, where runs of one differ); runs: per-device batch, "
             "devices and repeats of the runs with that environment (those that reported one)."]
    return Table("engines", "Engines", columns("engine", "precision", "path", "runs", "framework", "python", "CUDA", "cuDNN", "device",
                                               "devices", "runtime", "image / interpreter", "optimizations applied"), cells, notes)


def gpus(data: ReportData) -> Table | None:
    """Every GPU the runs used (by UUID), with its facts; None when no run recorded one."""
    cells = []
    seen: set[str] = set()
    for run in data.runs:
        for dev in run.gpu.get("devices") or []:
            uuid = dev.get("uuid") or str(dev.get("index"))
            if uuid in seen:
                continue
            seen.add(uuid)
            mem = dev.get("memory_total_bytes")
            cells.append([str(dev.get("index")), str(dev.get("name")), str(dev.get("uuid")), mem / 2**30 if mem else None,
                          dev.get("power_limit_w"), f"{dev.get('sm_clock_max_mhz') or DASH} / {dev.get('mem_clock_max_mhz') or DASH}",
                          dev.get("persistence_mode"), dev.get("mig_mode"), dev.get("ecc_mode"), dev.get("compute_capability") or None,
                          f"{run.gpu.get('driver') or DASH} / CUDA {run.gpu.get('cuda_driver') or DASH}"])
    if not cells:
        return None
    gpu_columns = [*columns("index", "name", "UUID"), Column("memory GiB", RATE), Column("power limit W", number(",.0f")),
                   Column("max SM / mem clock MHz"), Column("persistence", flag), Column("MIG", flag), Column("ECC", flag),
                   *columns("compute capability", "driver")]
    return Table("gpus", "GPUs used by the runs", gpu_columns, cells)


def environment(data: ReportData) -> list[Table]:
    """The Host, Engines and (when recorded) GPUs tables."""
    return [table for table in (host(data), engines(data), gpus(data)) if table is not None]
