"""What differs between the environments two artifacts were measured in (``bench results compare``).

Facts are read per artifact (summary ``host``: bench version, Python, OS, NVIDIA driver, GPUs) and per
engine over its runs that started (``result.json`` ``environment``: framework and versions, CUDA/cuDNN,
driver, devices; ``run.json`` ``runtime``: image, image id, base digest; ``telemetry.gpu``: GPU name,
clocks, power limit; ``host``: CPU model, governor, boost, affinity), and the engine's optimizations as it
reported them (``result.json`` ``work.optimizations``: applied or not, and why, which names a compile mode or an
engine option), so a comparison of two options or modes says what it compares. A fact with several values
across one engine's runs reads as them all, joined. Only engines present in both artifacts are compared.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.artifacts.layout import RUNS
from orchestrator.artifacts.validate import MAX_DOCUMENT_BYTES
from orchestrator.artifacts.walk import read_bytes_no_follow
from orchestrator.judge.summary_model import Summary

ENVIRONMENT_KEYS = ("framework", "framework_version", "engine_version", "python", "cuda", "cudnn", "driver", "devices")
RUNTIME_KEYS = ("name", "image", "image_id", "base", "base_digest", "engine_version", "source_revision")
GPU_KEYS = ("driver", "cuda_driver")
GPU_DEVICE_KEYS = ("name", "sm_clock_max_mhz", "mem_clock_max_mhz", "sm_clock_applications_mhz", "power_limit_w",
                   "enforced_power_limit_w", "persistence_mode", "ecc_mode", "mig_mode")
HOST_KEYS = ("cpu_model", "cpu_affinity", "governors", "scaling_driver", "boost")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_text(v)}" for k, v in sorted(value.items())) or None
    if isinstance(value, list | tuple):
        return ", ".join(t for t in (_text(v) for v in value) if t) or None
    return str(value)


def _document(root: Path, rel: str) -> dict[str, Any]:  # the file boundary: a document of the artifact, or {}
    try:
        document = json.loads(read_bytes_no_follow(root, rel, MAX_DOCUMENT_BYTES))
    except (OSError, ValueError, RecursionError):
        return {}
    return document if isinstance(document, dict) else {}


Facts = dict[str, str | None]  # ``section.key`` -> text


def run_facts(record: Mapping[str, Any], result: Mapping[str, Any]) -> Facts:
    """The provenance of one run as flat ``section.key`` -> text (from its run.json and result.json documents)."""
    facts: Facts = {}
    environment = result.get("environment") or {}
    facts.update({f"environment.{k}": _text(environment.get(k)) for k in ENVIRONMENT_KEYS})
    runtime = record.get("runtime") or {}
    facts.update({f"runtime.{k}": _text(runtime.get(k)) for k in RUNTIME_KEYS})
    gpu = (record.get("telemetry") or {}).get("gpu") or {}
    facts.update({f"gpu.{k}": _text(gpu.get(k)) for k in GPU_KEYS})
    devices = gpu.get("devices") or []
    facts.update({f"gpu.{k}": _text([d.get(k) for d in devices if isinstance(d, dict)]) for k in GPU_DEVICE_KEYS})
    host = record.get("host") or {}
    facts.update({f"host.{k}": _text(host.get(k)) for k in HOST_KEYS})
    work = result.get("work")
    optimizations = work.get("optimizations") if isinstance(work, dict) else None
    if isinstance(optimizations, dict):
        facts.update({f"optimizations.{name}": _switch_text(switch) for name, switch in optimizations.items()})
    return facts


def _switch_text(switch: Any) -> str | None:
    """An engine's reported switch as ``on: detail`` / ``off: detail``."""
    if not isinstance(switch, dict):
        return _text(switch)
    state = "on" if switch.get("applied") else "off"
    return f"{state}: {switch['detail']}" if switch.get("detail") else state


def _merge(runs: list[Facts]) -> Facts:
    keys = sorted({k for run in runs for k in run})
    merged = {}
    for key in keys:
        values = sorted({run[key] for run in runs if run.get(key) is not None})
        merged[key] = " | ".join(values) if values else None
    return merged


def artifact_facts(summary: Summary) -> Facts:
    """Facts of the whole artifact, from the summary's host block (the bench process's host)."""
    host = summary.host or {}
    nvml = host.get("nvml") or {}
    facts = {f"host.{k}": _text(host.get(k)) for k in ("hostname", "os", "machine", "cpu_count", "python", "bench_version")}
    facts["nvml.driver"] = _text(nvml.get("driver"))
    facts["nvml.cuda_driver"] = _text(nvml.get("cuda_driver"))
    facts["nvml.gpus"] = _text([g.get("name") for g in nvml.get("gpus") or [] if isinstance(g, dict)])
    return facts


@dataclass(frozen=True)
class Environment:
    """The facts of one artifact: its own (host, driver) and each engine's, merged over its runs that started."""

    artifact: Facts
    engines: Mapping[str, Facts]


def environment(root: Path, summary: Summary) -> Environment:
    """The environment of a (validated) artifact."""
    per_engine: dict[str, list[Facts]] = {}
    for row in summary.runs:
        if row.status == "skipped":
            continue
        folder = f"{RUNS}/{row.run_id}"
        facts = run_facts(_document(root, f"{folder}/run.json"), _document(root, f"{folder}/result.json"))
        per_engine.setdefault(row.engine, []).append(facts)
    return Environment(artifact_facts(summary), {engine: _merge(runs) for engine, runs in per_engine.items()})


@dataclass(frozen=True)
class Difference:
    """One fact that differs between A and B: its scope (artifact, or an engine), key and both values."""

    scope: str
    key: str
    a: str | None
    b: str | None

    def __post_init__(self) -> None:
        if self.a == self.b:
            raise ValueError(f"{self.scope} {self.key}: no difference")

    def to_json(self) -> dict[str, str | None]:
        return {"scope": self.scope, "key": self.key, "a": self.a, "b": self.b}


@dataclass(frozen=True)
class EnvironmentDiff:
    """What differs between two artifacts' environments (``same``: nothing), over the engines both have."""

    engines: tuple[str, ...]
    differences: tuple[Difference, ...]

    @property
    def same(self) -> bool:
        return not self.differences

    def to_json(self) -> dict[str, Any]:
        return {"same": self.same, "engines": list(self.engines), "differences": [d.to_json() for d in self.differences]}


def _differing(scope: str, a: Facts, b: Facts) -> list[Difference]:
    return [Difference(scope, key, a.get(key), b.get(key)) for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]


def environment_diff(env_a: Environment, env_b: Environment) -> EnvironmentDiff:
    """Only what differs: artifact facts, then per engine present in both artifacts."""
    differences = _differing("artifact", env_a.artifact, env_b.artifact)
    engines = [e for e in env_a.engines if e in env_b.engines]
    for engine in engines:
        differences += _differing(engine, env_a.engines[engine], env_b.engines[engine])
    return EnvironmentDiff(tuple(engines), tuple(differences))
