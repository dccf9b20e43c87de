"""The engine's switches: the spec's path and engine options resolved, and reported as {applied, detail}.

The options are validated by the JSON Schema in images/jax/engine.yaml before a run; the
defaults below are that schema's ``default`` values (a test keeps the two equal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # jax-free at import: the step module imports jax
    from bench_jax.step import StepConfig

OPTION_DEFAULTS: dict[str, Any] = {"donate": "auto", "steps_per_dispatch": 1}


def engine_options(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec's engine options over their defaults (``xla_flags`` and ``preallocate`` have none: unset is JAX's own)."""
    return {**OPTION_DEFAULTS, **(spec.get("engine_options") or {})}


def donate(options: dict[str, Any], optimized: bool, mode: str) -> bool:
    """Buffer donation: the option (auto: on the optimized path), training only."""
    value = options["donate"]
    return bool(optimized if value == "auto" else value) and mode == "train"


def steps_per_dispatch(options: dict[str, Any], config: StepConfig) -> int:
    """Training steps per jitted call: the option (default 1; it never follows the timing window).

    Only a whole jitted train step on device-resident data can be scanned over batch starts; any
    other configuration runs one step per call whatever the option says (reported as not applied).
    A group longer than the timing window never fills (every window ends with a sync that runs a
    short queue step by step), so choose a divisor of measurement.window_steps.
    """
    value = options["steps_per_dispatch"]
    if not (config.mode == "train" and config.full_step and config.device_data):
        return 1
    return 1 if value == "auto" else max(1, int(value))


def optimizations(config: StepConfig, xla_flags: str, kind: str = "cpu", shards: Any = None,
                  group: int = 1) -> dict[str, dict[str, Any]]:
    """The switches in effect, as {name: {applied, detail}}."""
    infer = config.mode == "infer"
    return {
        "jit": {"applied": True, "detail": _jit_detail(config)},
        "jit_full_step": {"applied": config.full_step and not infer, "detail": "optimizer update fused into the jitted step"},
        "donation": {"applied": config.donate, "detail": _donation_detail(config)},
        "device_resident_data": {"applied": config.device_data,
                                 "detail": "normalised split on the device, batch sliced in the step (lax.dynamic_slice)"
                                 if config.device_data else "numpy batches sliced on the host, transferred every step"},
        "nhwc_layout": {"applied": True, "detail": "Flax convolutions are NHWC"},
        "xla_flags": {"applied": bool(xla_flags), "detail": xla_flags or "XLA defaults"},
        "steps_per_dispatch": {"applied": group > 1,
                               "detail": f"{group} full SGD steps per jitted call (lax.scan over their batch starts; "
                                         "a shorter queue at a sync runs step by step)" if group > 1
                               else "one step per jitted call"},
        "data_parallel": data_parallel(config, kind, shards),
    }


def _jit_detail(config: StepConfig) -> str:
    if config.mode == "infer":
        return "forward pass (running batch-norm statistics) under jax.jit"
    if config.full_step:
        return "whole train step under one jax.jit: forward, backward, optax update, batch-norm statistics"
    return "forward+backward (value_and_grad) under jax.jit; optax update applied eagerly outside"


def _donation_detail(config: StepConfig) -> str:
    if not config.donate:
        return "no buffer donation"
    if config.full_step:
        return "params, batch stats and optimizer state donated to the step (donate_argnums)"
    return "batch stats donated to the jitted forward/backward (donate_argnums)"


def data_parallel(config: StepConfig, kind: str, shards: Any) -> dict[str, Any]:
    """How a several-device run splits the work (not applied on one device)."""
    if config.world == 1 or shards is None:
        return {"applied": False, "detail": "one device"}
    share = shards.per_device
    placement = (f"each device holds its own shard ({shards.shard_samples} samples, P('data'))" if config.device_data
                 else "each global batch transferred as (devices, share, ...) with P('data')")
    grads = "; gradients all-reduced by XLA" if config.mode == "train" else ""
    return {"applied": True,
            "detail": f"jit over a 1-D Mesh of {config.world} {kind} devices (axis 'data'): device r takes samples start + r*{share} "
                      f".. + {share} of every global batch of {shards.global_batch}; {placement}; parameters and optimizer state "
                      f"replicated (P()); step vmapped over the device axis (BatchNorm statistics per device){grads}"}
