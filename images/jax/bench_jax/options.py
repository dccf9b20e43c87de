"""The engine's switches: the spec's path and engine options resolved, and reported as {applied, detail}.

The options are validated by the JSON Schema in images/jax/engine.yaml before a run; the
defaults below are that schema's ``default`` values (a test keeps the two equal).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from bench_engine.contract import RunSpec
from bench_engine.dispatch import DispatchChoice, choose_steps_per_dispatch
from bench_engine.report import Switch, Switches
from bench_engine.schedule import Schedule

if TYPE_CHECKING:  # jax-free at import: the step module imports jax
    from bench_engine.shards import ShardPlan
    from bench_jax.step import StepConfig

ONE_STEP = DispatchChoice(1, "one step per jitted call")


@dataclass(frozen=True)
class JaxOptions:
    """The engine options over their defaults (``xla_flags`` and ``preallocate`` have none: unset is JAX's own)."""

    donate: bool | str = "auto"
    steps_per_dispatch: int | str = "auto"
    command_buffers: bool | str = "auto"
    pack_variables: bool | str = "auto"
    fold_batchnorm: bool | str = "auto"
    rematerialization: bool | str = "auto"
    memory_fraction: float | str = "auto"
    xla_flags: str | None = None
    preallocate: bool | None = None

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> JaxOptions:
        """The options a spec gives (validated by engine.yaml's schema), over the defaults."""
        return cls(**{f.name: options[f.name] for f in fields(cls) if f.name in options})


OPTION_DEFAULTS = {f.name: f.default for f in fields(JaxOptions) if f.default is not None}


def engine_options(spec: RunSpec) -> JaxOptions:
    """The spec's engine options over their defaults."""
    return JaxOptions.of(spec.engine_options)


# Measured on an NVIDIA H200 (jaxlib 0.11, benchmarks/probes/jax_bf16_divergence.py): with the train
# state donated, a bf16 step's autotuned cuDNN convolutions wrote non-finite weight gradients into the
# 1x1 convolutions of layer1 within the first 3 steps (the loss before the update still finite), in
# every repeat; the same step without donation, with TF32 convolutions, or with XLA's autotuning off
# stayed finite for a whole epoch. So ``auto`` does not donate at bf16 on a GPU: a faster wrong step is
# not the fastest correct path. ``donate: true`` still donates (and parity then judges the run).
UNSAFE_DONATION = {("cuda", "bf16"): "not at bf16 on a GPU: with donated state XLA's autotuned bf16 cuDNN convolutions "
                                     "wrote non-finite weight gradients within 3 steps on an H200 (jaxlib 0.11; "
                                     "README 'JAX at bf16')"}


# XLA's command buffers (CUDA graphs of a compiled program's thunks): its defaults leave out the
# cuDNN convolution thunks and while loops, so a ResNet step stays a sequence of ~670 host launches
# (README "JAX command buffers"). With these types the convolutions, and a lax.scan of several steps
# whose body is all commands, are recorded into graphs: the host launches a graph, not each kernel.
COMMAND_BUFFER_TYPES = ("FUSION", "CUBLAS", "CUBLASLT", "CUSTOM_CALL", "CUDNN", "DYNAMIC_SLICE_FUSION",
                        "CONVOLUTION", "WHILE", "CONDITIONAL")
COMMAND_BUFFER_FLAG = "--xla_gpu_enable_command_buffer=" + ",".join(COMMAND_BUFFER_TYPES)


def command_buffer_flags(options: JaxOptions, path: str, device: str) -> str:
    """The XLA flag the ``command_buffers`` option adds ('' for none): auto = the optimized path where a GPU may run it."""
    value = options.command_buffers
    wanted = path == "optimized" and device != "cpu" if value == "auto" else bool(value)
    return COMMAND_BUFFER_FLAG if wanted else ""


def command_buffers_switch(added: str, xla_flags: str, kind: str) -> Switch:
    """The ``command_buffers`` entry of work.optimizations, read from the flags the process ran with."""
    if kind != "cuda":
        return Switch(False, f"XLA command buffers are a GPU feature ({kind})")
    if not added:
        return Switch(False, "XLA's default command buffer types (no convolutions or loops)")
    last = [f for f in xla_flags.split() if f.startswith("--xla_gpu_enable_command_buffer=")][-1:]
    if last != [added]:  # a later xla_flags option replaced bench's setting (XLA keeps the last)
        return Switch(False, f"replaced by the xla_flags option: {last[0] if last else 'none'}")
    return Switch(True, "XLA command buffers (CUDA graphs) over " + ",".join(COMMAND_BUFFER_TYPES) +
                  ": convolutions and scanned steps recorded as graphs, not launched kernel by kernel; cuDNN initialised "
                  "before the first capture")


# XLA's GPU compiler rematerializes (recomputes or compresses activations) whenever a program's peak memory is over
# its limit (the allocator's share of the device): a batch that does not fit then runs with work the other engines
# do not do (recomputed activations are not in the analytic GMACs), and a maximal-batch search finds a batch that
# fits only by recomputing. With the pass disabled such a program fails as out of memory, as in the other engines,
# and a program that fits compiles to the same code. (It was not what made JAX's TResNet-M compile at batch 4,096
# slow on the H200: issue 26, session 13, README "JAX rematerialization".)
REMAT_PASS = "rematerialization"
REMAT_FLAG = f"--xla_disable_hlo_passes={REMAT_PASS}"


def remat_flags(options: JaxOptions, device: str) -> str:
    """The XLA flag the ``rematerialization`` option adds ('' for none): auto = off wherever a GPU may run it."""
    value = options.rematerialization
    off = device != "cpu" if value == "auto" else not bool(value)
    return REMAT_FLAG if off else ""


def remat_switch(added: str, xla_flags: str, kind: str) -> Switch:
    """The ``rematerialization_off`` entry of work.optimizations, read from the flags the process ran with."""
    if not added:
        return Switch(False, "XLA's default: activations may be recomputed to fit the device's memory"
                      if kind == "cuda" else f"not set on the CPU ({kind})")
    last = [f for f in xla_flags.split() if f.startswith("--xla_disable_hlo_passes=")][-1:]
    if not last or REMAT_PASS not in last[0].split("=", 1)[1].split(","):  # a later xla_flags option replaced it
        return Switch(False, f"replaced by the xla_flags option: {last[0] if last else 'none'}")
    return Switch(True, "XLA's rematerialization pass disabled: a program over the device's memory fails as out of memory "
                        "instead of recomputing activations (the same work as the other engines; a maximal-batch search "
                        "finds the largest batch that fits as written)")


# JAX's allocator may hold 75% of a GPU's memory unless told otherwise (XLA_PYTHON_CLIENT_MEM_FRACTION), while
# PyTorch's caching allocator may take all of it: a maximal-batch search would find JAX's largest batch in three
# quarters of the device. On the H200 (139.8 GiB) that is 104.8 GiB, below the 119.6 GB (111.4 GiB) PyTorch's
# TResNet-M training held at its maximal batch (issue 26, session 11). ``auto`` gives XLA 95%: the rest is for the
# CUDA context, cuDNN's and cuBLAS's handles and anything else outside XLA's allocator.
GPU_MEMORY_FRACTION = 0.95
MEMORY_FRACTION_VARS = ("XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_CLIENT_MEM_FRACTION")  # jaxlib's old name, its new one


def memory_fraction(options: JaxOptions, device: str) -> float | None:
    """The share of each GPU's memory the ``memory_fraction`` option gives XLA's allocator (None: leave JAX's own
    default): auto = :data:`GPU_MEMORY_FRACTION` wherever a GPU may run, a number as given."""
    value = options.memory_fraction
    if value == "auto":
        return GPU_MEMORY_FRACTION if device != "cpu" else None
    return float(value)


def set_memory_fraction(fraction: float | None, environ: MutableMapping[str, str]) -> None:
    """Put ``fraction`` where jaxlib reads it: the old name, which every jaxlib reads (the new one, where a newer
    jaxlib reads it, is removed: jaxlib refuses both at once). None leaves the environment as it is."""
    if fraction is None:
        return
    environ.pop(MEMORY_FRACTION_VARS[1], None)
    environ[MEMORY_FRACTION_VARS[0]] = repr(fraction)


def memory_fraction_switch(environ: Mapping[str, str], kind: str, limit_bytes: int | None) -> Switch:
    """The ``memory_fraction`` entry of work.optimizations, read from the environment the process ran with and the
    allocator's limit it reports (``limit_bytes``: memory_stats' bytes_limit)."""
    if kind != "cuda":
        return Switch(False, f"no GPU allocator on the CPU ({kind})")
    given = next((environ[name] for name in MEMORY_FRACTION_VARS if environ.get(name)), None)
    limit = f"{limit_bytes / 2**30:.1f} GiB" if limit_bytes is not None else "its limit not reported"
    if given is None:
        return Switch(False, f"JAX's default share of each GPU's memory (75%): {limit}")
    return Switch(True, f"XLA's allocator may hold {given} of each GPU's memory ({limit}; JAX's default 0.75), as the "
                        "other engines' allocators may take the whole device")


def donate(options: JaxOptions, optimized: bool, mode: str, kind: str, precision: str) -> bool:
    """Buffer donation: the option (auto: on the optimized path, except where :data:`UNSAFE_DONATION` says), training only."""
    value = options.donate
    if value == "auto":
        return optimized and mode == "train" and (kind, precision) not in UNSAFE_DONATION
    return bool(value) and mode == "train"


def donation_declined(options: JaxOptions, optimized: bool, mode: str, kind: str, precision: str) -> str | None:
    """Why ``auto`` did not donate on the optimized training path (None when it did, or was not asked to)."""
    if options.donate != "auto" or not optimized or mode != "train":
        return None
    return UNSAFE_DONATION.get((kind, precision))


def steps_per_dispatch(options: JaxOptions, config: StepConfig, kind: str, plan: Schedule, samples: int) -> DispatchChoice:
    """Training steps per jitted call and why (bench_engine.dispatch.choose_steps_per_dispatch).

    Only a whole jitted train step on device-resident data can be scanned over batch starts; any
    other configuration runs one step per call whatever the option says (reported as not applied).
    ``auto`` (the default) fits K to the harness's blocks on one GPU and stays 1 elsewhere.
    """
    return choose_steps_per_dispatch(options.steps_per_dispatch, blocked=_not_looping(config), kind=kind, plan=plan,
                                     samples=samples, world=config.world)


def _not_looping(config: StepConfig) -> str | None:
    """Why this step cannot run several steps per call; None when it can."""
    if config.mode != "train":
        return "inference: one batch per jitted call"
    if not config.full_step:
        return "one step per jitted call (looping needs the whole step under one jax.jit: optimized path)"
    if not config.device_data:
        return "one step per jitted call (looping needs device-resident data)"
    return None


def optimizations(config: StepConfig, xla_flags: str, kind: str = "cpu", shards: ShardPlan | None = None,
                  dispatch: DispatchChoice = ONE_STEP, declined: str | None = None,
                  command_buffers: str = "", packed: Switch | None = None, folded: Switch | None = None,
                  remat: str = "", memory: Switch | None = None) -> Switches:
    """The switches in effect; ``declined``: why auto did not donate; ``command_buffers`` and ``remat``: the
    flags those options added to XLA_FLAGS ('' for none)."""
    infer = config.mode == "infer"
    return {
        "jit": Switch(True, _jit_detail(config)),
        "jit_full_step": Switch(config.full_step and not infer, "optimizer update fused into the jitted step"),
        "donation": Switch(config.donate, declined or _donation_detail(config)),
        "device_resident_data": Switch(config.device_data, "split on the device (uint8 copied, looked up there), batch sliced in the step (dynamic_slice)"
                                       if config.device_data else "numpy batches sliced on the host, transferred every step"),
        "nhwc_layout": Switch(True, "Flax convolutions are NHWC"),
        "xla_flags": Switch(bool(xla_flags), xla_flags or "XLA defaults"),
        "command_buffers": command_buffers_switch(command_buffers, xla_flags, kind),
        "rematerialization_off": remat_switch(remat, xla_flags, kind),
        "memory_fraction": memory or Switch(False, "not read"),
        "steps_per_dispatch": _dispatch_switch(dispatch),
        "data_parallel": data_parallel(config, kind, shards),
        "packed_variables": packed or Switch(False, "not asked"),
        "batchnorm_folded": folded or Switch(False, "not asked"),
    }


def pack_variables(options: JaxOptions, config: StepConfig, optimized: bool) -> Switch:
    """Whether inference passes its variables packed (bench_jax.packing) and why: auto on the optimized path's
    one-device inference; never for training (the step returns a new state) or several devices (replicated leaves)."""
    if config.mode != "infer":
        return Switch(False, "training: the step takes and returns the train state's leaves")
    if config.world > 1:
        return Switch(False, "several devices: the variables stay replicated leaf by leaf")
    wanted = optimized if options.pack_variables == "auto" else bool(options.pack_variables)
    why = "auto" if options.pack_variables == "auto" else "option"
    if not wanted:
        return Switch(False, f"{why}: every leaf of the variables passed to each call" + ("" if optimized or why == "option" else " (baseline)"))
    return Switch(True, f"{why}: the variables as one flat buffer per dtype, unpacked inside the compiled forward "
                        "(static slices: the same values), so a call hands over a few buffers instead of every leaf")


def _dispatch_switch(dispatch: DispatchChoice) -> Switch:
    if dispatch.steps == 1:
        return Switch(False, dispatch.reason)
    return Switch(True, f"{dispatch.steps} full SGD steps per jitted call ({dispatch.reason}): lax.scan over "
                        "their batch starts; a shorter queue at a sync runs step by step")


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


def data_parallel(config: StepConfig, kind: str, shards: ShardPlan | None) -> Switch:
    """How a several-device run splits the work (not applied on one device)."""
    if config.world == 1 or shards is None:
        return Switch(False, "one device")
    share = shards.per_device
    placement = (f"each device holds its own shard ({shards.shard_samples} samples, P('data'))" if config.device_data
                 else "each global batch transferred as (devices, share, ...) with P('data')")
    grads = "; gradients all-reduced by XLA" if config.mode == "train" else ""
    return Switch(True, f"jit over a 1-D Mesh of {config.world} {kind} devices (axis 'data'): device r takes samples start + r*{share} "
                      f".. + {share} of every global batch of {shards.global_batch}; {placement}; parameters and optimizer state "
                        f"replicated (P()); step vmapped over the device axis (BatchNorm statistics per device){grads}")
