"""What the engine sees inside its runtime: the process settings JAX needs first, its devices, versions.

:func:`configure_process` must run before JAX initialises its backends, so jax is imported
inside the functions here. On CPU, a data-parallel run sets
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` so the host shows N devices; on GPUs
the first N visible GPUs are used.
"""

from __future__ import annotations

import os
from typing import Any

from bench_engine.api import UnsupportedError
from bench_engine.contract import RunSpec
from bench_engine.hardware import cpu_name, cuda_version_text, cudnn_version_text
from bench_engine.nvidia import driver_version
from bench_engine.report import EnvironmentFacts
from bench_jax.options import command_buffer_flags, engine_options, memory_fraction, remat_flags, set_memory_fraction


def configure_process(spec: RunSpec) -> str:
    """Environment that must be set before JAX initialises its backends; the command-buffer flag it added ('' for none).

    bench's own flags (command buffers, rematerialization off) come first and the ``xla_flags`` option
    after them, so a user's flag wins (XLA keeps the last occurrence of a flag).
    """
    options = engine_options(spec)
    added = command_buffer_flags(options, spec.path, spec.device)
    for flag in (added, remat_flags(options, spec.device)):
        if flag:
            os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()
    if options.xla_flags:
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {options.xla_flags}".strip()
    devices = spec.parity.devices
    if devices > 1 and spec.device != "cuda" and "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        # N host devices for a data-parallel run on the CPU (before jax is imported; the flag only
        # shapes the host platform, so an auto run that finds GPUs is not affected)
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip()
    set_memory_fraction(memory_fraction(options, spec.device), os.environ)
    if options.preallocate is not None:
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "true" if options.preallocate else "false"
    if spec.device == "cpu":
        import jax

        jax.config.update("jax_platforms", "cpu")
    return added


def resolve_devices(kind: str) -> tuple[str, list[Any]]:
    """('cuda' | 'cpu', the JAX devices of that platform) for the spec's device request."""
    import jax

    if kind in ("auto", "cuda"):
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:
            gpus = []
        if gpus:
            return "cuda", gpus
        if kind == "cuda":
            raise UnsupportedError("device 'cuda' requested but JAX sees no GPU (CPU-only jaxlib or no device)")
    return "cpu", jax.devices("cpu")


def cuda_versions() -> tuple[str | None, str | None]:
    """(CUDA runtime, cuDNN) versions as jaxlib was loaded with, where it says."""
    try:
        from jax._src.lib import cuda_versions  # private, but what jax itself uses
    except ImportError:
        return None, None
    if cuda_versions is None:
        return None, None
    out: list[str | None] = []
    for getter, cudnn in (("cuda_runtime_get_version", False), ("cudnn_get_version", True)):
        try:
            out.append((cudnn_version_text if cudnn else cuda_version_text)(getattr(cuda_versions, getter)()))
        except Exception:
            out.append(None)
    return out[0], out[1]


def _extra(kind: str, devices: list[Any]) -> dict[str, Any]:
    """jaxlib, flax and optax versions, the platform, compute capability and XLA flags."""
    import jaxlib

    extra: dict[str, Any] = {"jaxlib": getattr(jaxlib, "__version__", None)}
    for module in ("flax", "optax"):
        try:
            extra[module] = __import__(module).__version__
        except ImportError:
            extra[module] = None
    try:
        extra["platform_version"] = devices[0].client.platform_version
    except Exception:
        pass
    if kind == "cuda":
        extra["compute_capability"] = getattr(devices[0], "compute_capability", None)
    if os.environ.get("XLA_FLAGS"):
        extra["xla_flags"] = os.environ["XLA_FLAGS"]
    return extra


def describe(kind: str, devices: list[Any]) -> EnvironmentFacts:
    """The environment block of the result."""
    import jax

    cuda, cudnn = cuda_versions() if kind == "cuda" else (None, None)
    extra = _extra(kind, devices)
    names = [d.device_kind for d in devices]
    if kind == "cpu":
        names = [cpu_name() for d in devices]
    return EnvironmentFacts(framework_version=jax.__version__, cuda=cuda, cudnn=cudnn,
                            driver=driver_version() if kind == "cuda" else None, device_kind=kind, devices=tuple(names), extra=extra)
