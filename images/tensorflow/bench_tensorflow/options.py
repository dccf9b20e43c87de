"""The engine's switches: the spec's path and engine options resolved, and reported as {applied, detail}.

The options are validated by the JSON Schema in images/tensorflow/engine.yaml before a run; the
defaults below are that schema's ``default`` values (a test keeps the two equal). Paths:
``baseline`` is what ``Model.fit`` does by default, a ``tf.function`` train step without XLA;
``optimized`` compiles the whole step with XLA (``jit_compile=True``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bench_engine.api import UnsupportedError
from bench_engine.contract import RunSpec
from bench_engine.dispatch import DispatchChoice, choose_steps_per_dispatch
from bench_engine.report import Switch, Switches
from bench_engine.schedule import Schedule

if TYPE_CHECKING:
    from bench_engine.shards import ShardPlan

OPTION_DEFAULTS: dict[str, Any] = {"xla": "auto", "tf_function": True, "steps_per_dispatch": "auto"}
ONE_STEP = DispatchChoice(1, "one step per call")


@dataclass(frozen=True)
class StepSwitches:
    """How the step is compiled, and the steps_per_dispatch option as given."""

    xla: bool  # tf.function(jit_compile=True)
    compile_function: bool  # the step as one tf.function graph (false: eager)
    steps_per_dispatch: int | str  # auto or an integer >= 1


def resolve_switches(spec: RunSpec) -> StepSwitches:
    """The spec's engine options over their defaults; ``xla`` auto is on the optimized path only."""
    options = {**OPTION_DEFAULTS, **spec.engine_options}
    xla = spec.path == "optimized" if options["xla"] == "auto" else bool(options["xla"])
    compile_function = bool(options["tf_function"])
    if xla and not compile_function:
        raise UnsupportedError("xla needs tf_function: true")
    return StepSwitches(xla, compile_function, options["steps_per_dispatch"])


def steps_per_dispatch(value: int | str, *, train: bool, xla: bool, resident: bool, world: int, kind: str,
                       plan: Schedule, samples: int) -> DispatchChoice:
    """Training steps per call and why (bench_engine.dispatch.choose_steps_per_dispatch).

    Only the single-device whole XLA train step on device-resident data loops; any other
    configuration runs one step per call whatever the option says (reported as not applied).
    ``auto`` (the default) fits K to the harness's blocks on one GPU and stays 1 elsewhere.
    """
    return choose_steps_per_dispatch(value, blocked=_not_looping(train, xla, resident, world), kind=kind, plan=plan,
                                     samples=samples, world=world)


def _not_looping(train: bool, xla: bool, resident: bool, world: int) -> str | None:
    """Why this step cannot run several steps per call; None when it can."""
    if not train:
        return "inference: one batch per call"
    if world > 1:
        return "one step per call (several devices: the all-reduce and update run outside XLA)"
    if not xla:
        return "one step per call (looping needs the whole step under XLA: optimized path or xla: true)"
    if not resident:
        return "one step per call (looping needs device-resident data)"
    return None


def optimizations(
    compile_function: bool, xla: bool, policy: str, resident: bool, scaled: bool, weight_decay: bool,
    dispatch: DispatchChoice = ONE_STEP,
) -> Switches:
    """The switches of this run."""
    group = dispatch.steps
    looping = (f"{group} full SGD steps per XLA call ({dispatch.reason}): a tf.while_loop of constant trip count over their "
               "batch starts; a shorter queue (at a sync or before a partial batch) runs step by step")
    return {
        "tf_function": Switch(compile_function, "the whole step as one tf.function graph" if compile_function else "eager"),
        "xla": Switch(xla, "tf.function(jit_compile=True)" if xla else "jit_compile=False (TensorFlow's default)"),
        "mixed_policy": Switch(policy.startswith("mixed"), f"keras policy {policy}"),
        "device_resident_data": Switch(
            resident, "split normalised once on the device, sliced inside the step" if resident else "host numpy slices fed per step"),
        "loss_scaling": Switch(scaled, "keras LossScaleOptimizer, dynamic" if scaled else "none"),
        "coupled_l2": Switch(weight_decay, "g + wd * w before momentum, as PyTorch SGD" if weight_decay else "no weight decay"),
        "steps_per_dispatch": Switch(group > 1, looping if group > 1 else dispatch.reason),
        "data_parallel": Switch(False, "one device"),
    }


def data_parallel(world: int, kind: str | None, all_reduce: str, shards: ShardPlan, resident: bool, train: bool) -> Switch:
    """The ``data_parallel`` switch of a MirroredStrategy run."""
    return Switch(
        True,
        f"tf.distribute.MirroredStrategy over {world} {'GPUs' if kind == 'cuda' else 'logical CPU devices'} "
        f"({all_reduce}): replica r takes samples start + r*{shards.per_device} .. + "
        f"{shards.per_device} of every global batch of {shards.global_batch}"
        + (f"; each replica's shard ({shards.shard_samples} samples) resident on its device" if resident else "")
        + ("; loss / N per replica, gradients summed by all-reduce" if train else "")
        + "; BatchNorm statistics per replica",
    )


# the xla switch of a MirroredStrategy run: only the per-replica gradient is compiled
REPLICATED_XLA_DETAIL = ("per-replica forward and backward under tf.function(jit_compile=True) as a stateless "
                         "function of the replica's variables; all-reduce and SGD update outside XLA")
