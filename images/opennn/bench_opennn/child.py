"""Running the C++ driver as a child: its environment, its life, and how a signal stops it."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from bench_engine.contract import RunSpec

GRACE_S = 10.0
EXIT_UNSUPPORTED = 3  # the driver's "cannot do what the plan asks"


class Interrupted(Exception):
    """SIGINT or SIGTERM reached the adapter."""


def child_env(spec: RunSpec, cuda: bool, info: dict[str, str]) -> dict[str, str]:
    """The driver's environment: the adapter's, the build's library path, strict fp32 on CUDA."""
    env = dict(os.environ)
    extra = info.get("ld_library_path", "-")
    if extra not in ("", "-"):
        env["LD_LIBRARY_PATH"] = extra + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    if cuda and spec.parity.precision == "fp32":
        # strict fp32: OpenNN asks cuBLAS for TF32 and cuDNN computes FLOAT graphs on TF32 tensor
        # cores; NVIDIA's libraries honour this switch (the driver reads it back).
        env["NVIDIA_TF32_OVERRIDE"] = "0"
    return env


def _die_with_parent() -> None:
    """Child side of fork: the driver gets SIGKILL if the adapter dies (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


def run_driver(driver: Path, plan: Path, env: dict[str, str], on_tick: Callable[[], None] | None = None,
               tick_s: float = 0.2) -> int:
    """Run the driver to its end; SIGINT/SIGTERM stop it (TERM, then KILL after a grace period). ``on_tick`` is
    called every ``tick_s`` seconds while it runs and once after it ended (the events' phases, bench_opennn.phases)."""
    child = subprocess.Popen([str(driver), str(plan)], env=env, preexec_fn=_die_with_parent)
    stop: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while True:
            try:
                code = child.wait(timeout=tick_s)
                break
            except subprocess.TimeoutExpired:
                if on_tick is not None:
                    on_tick()
                if stop:
                    child.terminate()
                    try:
                        child.wait(timeout=GRACE_S)
                    except subprocess.TimeoutExpired:
                        child.kill()
                        child.wait()
                    raise Interrupted() from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stop:
        raise Interrupted()
    if on_tick is not None:
        on_tick()
    return code
