"""GPU telemetry of one run (nvidia-ml-py): static GPU facts plus a background sampler.

``GpuTelemetry`` is a run monitor (see ``orchestrator.run.attempt.RunMonitor``): ``start(run_dir, request)``
records the static facts of the GPUs the run uses (name, UUID, driver and CUDA driver versions,
memory, power limits, clocks, persistence/MIG/ECC modes) and starts a thread that samples every
``interval`` seconds utilisation, memory used, power, SM/memory clocks, temperature, throttle reasons
and the total-energy counter into ``<run_dir>/telemetry.csv``; ``stop()`` ends the sampler and returns
a small summary (samples, mean/max power and utilisation, energy in joules) that the executor stores in
``run.json`` under ``telemetry.gpu``.

Which GPUs (a ``host.gpus.GpuRequest``): ``visible_devices`` (indices as nvidia-smi numbers them, or GPU
UUIDs; 'all'), else for the local runtime ``CUDA_VISIBLE_DEVICES`` of the run's environment (the
runtime's ``env``) or of this process, else every GPU. Runs of the slurm runtime
execute on another node: they are not sampled. Indices are NVML (PCI bus) order; set
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so that CUDA numbers them the same way.

Energy: the difference of ``nvmlDeviceGetTotalEnergyConsumption`` (Volta and newer) between start and
stop, summed over the GPUs; where the counter is not supported, the integral of the sampled power
(trapezoids). ``energy_j`` covers the whole engine process: setup, warmup and steady state.
``steady_energy_j`` covers only the engine's timing phase: the monitor hears the engine's lines (``line``)
and notes when its phase lines enter and leave ``timing`` (orchestrator.host.phase_lines); the sampled
counter, interpolated at those instants, gives the energy in between (the power's integral without a counter).

Without nvidia-ml-py, an NVIDIA driver or a GPU (or with ``device: cpu``) nothing is sampled, no CSV is
written and ``stop()`` returns ``{'available': False, 'reason': ...}``. The monitor never raises: a
telemetry problem must not fail a benchmark run.
"""

from __future__ import annotations

import csv
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from orchestrator.host.gpu_samples import (  # noqa: F401  (re-exported: the CSV's columns and the summary types)
    CSV_COLUMNS,
    CSV_NAME,
    THROTTLE_BITS,
    GpuFactsBlock,
    GpuSummary,
    Sample,
    TelemetrySummary,
    gpu_summary,
    summarize_samples,
    throttle_names,
)
from orchestrator.host.gpus import (
    DriverFacts,
    GpuRequest,
    device_facts,
    driver_facts,
    load_nvml,
    nvml_call,
    requested_devices,
    resolve_handles,
)
from orchestrator.host.phase_lines import TimingPhases

DEFAULT_INTERVAL_S = 0.15
INTERVAL_ENV = "BENCH_TELEMETRY_INTERVAL_S"  # seconds between samples; 0: no GPU telemetry


class RunDevices(NamedTuple):
    """What the run's spec.json says of its devices: ``device`` (auto, cpu, cuda) and the device count."""

    device: str | None = None
    devices: int | None = None


def _run_devices(run_dir: Path) -> RunDevices:
    try:
        spec = json.loads((run_dir / "spec.json").read_text())
    except (OSError, ValueError):
        return RunDevices()
    if not isinstance(spec, dict):
        return RunDevices()
    used = (spec.get("parity") or {}).get("devices")
    return RunDevices(spec.get("device"), used if isinstance(used, int) and not isinstance(used, bool) else None)


class GpuTelemetry:
    """Run monitor: GPU facts and a sampler thread writing ``telemetry.csv`` (see the module doc)."""

    name = "gpu"

    def __init__(self, interval_s: float | None = None):
        self.interval_s = interval_s
        self._nvml: Any = None
        self._reason: str | None = "not started"
        self._handles: list[tuple[int, Any]] = []
        self._facts: GpuFactsBlock = GpuFactsBlock(DriverFacts(None, None), ())
        self._notes: list[str] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._rows: list[Sample] = []
        self._energy_start: dict[int, int | None] = {}
        self._t0 = 0.0
        self._last_tick = -1.0
        self._csv_path: Path | None = None
        self._error: str | None = None
        self._phases = TimingPhases()

    # -- monitor protocol -------------------------------------------------------------------
    def start(self, run_dir: Path, request: GpuRequest) -> None:
        try:
            self._start(Path(run_dir), request)
        except Exception as exc:
            self._close_nvml()
            self._reason = f"telemetry could not start ({exc.__class__.__name__}: {exc})"

    def line(self, text: str) -> None:
        """One line of the engine's output, as it arrives: its phase lines mark the steady window."""
        self._phases.line(text)

    def stop(self) -> TelemetrySummary:
        try:
            return self._stop_and_summarize()
        except Exception as exc:
            return TelemetrySummary.unavailable(f"telemetry failed ({exc.__class__.__name__}: {exc})")
        finally:
            self._close_nvml()

    # -- internals ----------------------------------------------------------------------------
    def _start(self, run_dir: Path, request: GpuRequest) -> None:
        if not request.sampled:
            self._reason = "disabled (telemetry: false)"
            return
        if request.runtime == "slurm":
            self._reason = "runtime slurm: the job runs on a cluster node whose GPUs this host cannot sample"
            return
        spec = _run_devices(run_dir)
        if spec.device == "cpu":
            self._reason = "the run uses the CPU (device: cpu); no GPU telemetry"
            return
        if self.interval_s is None and os.environ.get(INTERVAL_ENV):  # checked by bench's envvars registry
            self.interval_s = float(os.environ[INTERVAL_ENV])
            if self.interval_s == 0:
                self._reason = f"off ({INTERVAL_ENV}=0)"
                return
        self.interval_s = max(0.01, float(self.interval_s or DEFAULT_INTERVAL_S))
        nvml, why = load_nvml()
        if nvml is None:
            self._reason = why
            return
        self._nvml = nvml
        handles, self._notes = resolve_handles(nvml, requested_devices(request))
        if not handles:
            self._reason = "no GPU found" + (f" ({'; '.join(self._notes)})" if self._notes else " (NVML reports 0 devices)")
            self._close_nvml()
            return
        self._handles = handles
        used = spec.devices
        if requested_devices(request) is None and used is not None and used < len(handles):
            self._notes.append(f"sampled all {len(handles)} GPUs of the host while the run uses {used}; "
                               "set visible_devices to restrict telemetry and energy to the run's GPUs")
        self._facts = GpuFactsBlock(driver_facts(nvml), tuple(device_facts(nvml, i, h) for i, h in handles))
        energy_call = getattr(nvml, "nvmlDeviceGetTotalEnergyConsumption", None)
        self._energy_start = {i: (nvml_call(energy_call, h) if energy_call else None) for i, h in handles}
        self._csv_path = run_dir / CSV_NAME
        self._reason = None
        self._t0 = time.monotonic()
        self._last_tick = -1.0
        self._started_at = time.time()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="bench-gpu-telemetry", daemon=True)
        self._thread.start()

    def _sample(self, writer: Any) -> None:
        nvml = self._nvml
        # a tick's rows share its time, by which the summary groups them: a tick within the same millisecond as the
        # last (the sample at stop, right after a regular one) is moved 1 ms on rather than merged with it
        now = max(round(time.monotonic() - self._t0, 3), round(self._last_tick + 0.001, 3))
        self._last_tick = now
        sm, mem = getattr(nvml, "NVML_CLOCK_SM", 1), getattr(nvml, "NVML_CLOCK_MEM", 2)
        reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        energy_call = getattr(nvml, "nvmlDeviceGetTotalEnergyConsumption", None)
        for index, handle in self._handles:
            util = nvml_call(nvml.nvmlDeviceGetUtilizationRates, handle)
            memory = nvml_call(nvml.nvmlDeviceGetMemoryInfo, handle)
            power = nvml_call(nvml.nvmlDeviceGetPowerUsage, handle)
            mask = nvml_call(reasons, handle) if reasons else None
            row = Sample(
                time_s=now, gpu=index,
                util_gpu_pct=getattr(util, "gpu", None), util_mem_pct=getattr(util, "memory", None),
                mem_used_bytes=int(memory.used) if memory is not None else None,
                power_w=power / 1000.0 if power is not None else None,
                sm_clock_mhz=nvml_call(nvml.nvmlDeviceGetClockInfo, handle, sm),
                mem_clock_mhz=nvml_call(nvml.nvmlDeviceGetClockInfo, handle, mem),
                temperature_c=nvml_call(nvml.nvmlDeviceGetTemperature, handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0)),
                throttle_reasons=mask,
                energy_mj=nvml_call(energy_call, handle) if energy_call else None,
            )
            self._rows.append(row)
            writer.writerow(row.csv_row())

    def _loop(self) -> None:
        assert self._csv_path is not None
        try:
            with open(self._csv_path, "w", newline="") as handle:
                writer = csv.writer(handle)
                writer.writerow(CSV_COLUMNS)
                while True:
                    self._sample(writer)
                    handle.flush()
                    if self._stop.wait(self.interval_s):
                        self._sample(writer)  # a last sample at stop
                        break
        except Exception as exc:
            self._error = f"{exc.__class__.__name__}: {exc}"

    def _stop_and_summarize(self) -> TelemetrySummary:
        if self._thread is None:
            return TelemetrySummary.unavailable(self._reason or "not started")
        self._stop.set()
        self._thread.join(timeout=10)
        now = time.monotonic()
        duration = now - self._t0
        spans = [(start - self._t0, end - self._t0) for start, end in self._phases.spans(now)]
        energy_call = getattr(self._nvml, "nvmlDeviceGetTotalEnergyConsumption", None)
        energy_end = {i: (nvml_call(energy_call, h) if energy_call else None) for i, h in self._handles}
        return summarize_samples(self._rows, duration, self._energy_start, energy_end, self._facts, self._notes,
                                 interval_s=self.interval_s or DEFAULT_INTERVAL_S, error=self._error,
                                 csv_name=CSV_NAME if self._csv_path and self._csv_path.exists() else None, spans=spans)

    def _close_nvml(self) -> None:
        if self._nvml is not None:
            nvml_call(self._nvml.nvmlShutdown)
            self._nvml = None


def read_csv(path: Path) -> list[dict[str, Any]]:
    """A telemetry.csv as rows of floats (None where empty); the throttle names stay text."""
    with open(path, newline="") as handle:
        return parse_csv(handle)


def parse_csv(lines: Any) -> list[dict[str, Any]]:
    """Rows of telemetry CSV text (an iterable of lines); cells past the header are ignored."""
    rows = []
    for raw in csv.DictReader(lines):
        row: dict[str, Any] = {}
        for key, value in raw.items():
            if key is None or not isinstance(value, str | None):
                continue
            if key == "throttle":
                row[key] = value or ""
            elif value in ("", None):
                row[key] = None
            else:
                try:
                    row[key] = float(value)
                except ValueError:
                    row[key] = None
        rows.append(row)
    return rows
