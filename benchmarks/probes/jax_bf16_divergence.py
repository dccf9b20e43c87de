"""Where does JAX bf16 training at the seed protocol go non-finite, and which variant keeps it finite?

Diagnostic probe (not a benchmark): reads a run folder's ``spec.json`` (made by ``bench scenario
run``; its dataset and ``init.safetensors`` are used as they are), builds bench's own JAX workload
for it and steps one training step per call, synchronised, checking the loss after every step.
Variants change one thing each, given as ``--variant`` (repeatable):

  product        the workload exactly as the engine builds it
  two_pass_var   BatchNorm variance as mean((x - mean)^2) (Flax ``use_fast_variance=False``)
  bn_fp32        BatchNorm computed in float32 (output cast back to the compute dtype)
  conv_fp32      convolutions computed in float32 (TF32), the rest at the compute dtype
  no_donation    the state is not donated to the step

Run with XLA_FLAGS set to test a compiler setting (e.g. ``--xla_gpu_autotune_level=0``).

Prints one line per variant: steps run, the first non-finite step, the last finite losses and,
at the first non-finite step, which parameter leaves went non-finite.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from run_folder import build_jax_workload, read_spec, with_options

from bench_engine.contract import RunSpec


class _Linen:
    """flax.linen as bench_jax.model sees it, with some layers replaced (Flax itself is left alone)."""

    def __init__(self, **replaced: Any) -> None:
        import flax.linen as nn

        self._nn, self._replaced = nn, replaced

    def __getattr__(self, name: str) -> Any:
        return self._replaced.get(name) or getattr(self._nn, name)


def _patch(variant: str) -> None:
    import flax.linen as nn
    import jax.numpy as jnp

    from bench_jax import model as models

    def with_args(layer: Any, **fixed: Any) -> Any:
        return lambda *args, **kwargs: layer(*args, **{**kwargs, **fixed})

    replaced = {
        "two_pass_var": {"BatchNorm": with_args(nn.BatchNorm, use_fast_variance=False)},
        "bn_fp32": {"BatchNorm": with_args(nn.BatchNorm, dtype=jnp.float32)},
        "conv_fp32": {"Conv": with_args(nn.Conv, dtype=jnp.float32)},
    }.get(variant, {})
    models.nn = _Linen(**replaced)  # type: ignore[assignment]


def _nonfinite_leaves(tree: Any) -> list[str]:
    import jax
    import numpy as np

    bad = []
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        if not np.all(np.isfinite(np.asarray(leaf, dtype=np.float32))):
            bad.append(jax.tree_util.keystr(path))
    return bad


def probe(spec: RunSpec, variant: str, steps: int) -> dict[str, Any]:
    import jax
    import numpy as np

    from bench_engine.api import StepBatch

    spec = with_options(replace(spec, engine_options={}), {"steps_per_dispatch": 1, **({"donate": False} if variant == "no_donation" else {})})
    _patch(variant)
    workload, _, _, setup = build_jax_workload(spec)
    batch = spec.parity.batch.global_
    per_epoch = spec.parity.steps_per_epoch
    losses: list[float] = []
    first_bad = None
    bad_leaves: list[str] = []
    diagnosis: dict[str, Any] = {}
    for step in range(steps):
        index = step % per_epoch
        before = jax.tree.map(lambda x: x.copy(), workload.state)  # the step donates the state
        workload.step(StepBatch(epoch=step // per_epoch, index=index, start=index * batch, size=batch))
        workload.sync()
        loss = workload.loss()
        losses.append(loss)
        if loss is None or not np.isfinite(loss):
            first_bad = step
            bad_leaves = _nonfinite_leaves(workload.state.params)
            diagnosis = _diagnose(workload, before, index * batch, batch)
            break
    return {"variant": variant, "xla_flags": os.environ.get("XLA_FLAGS", ""), "setup_s": round(setup, 1),
            "steps_run": len(losses), "first_nonfinite_step": first_bad,
            "last_losses": [round(v, 4) if v is not None else None for v in losses[-6:]],
            "loss_every_20": [round(v, 4) for v in losses[::20] if v is not None and np.isfinite(v)],
            "nonfinite_params_after": bad_leaves[:12], "nonfinite_param_count": len(bad_leaves), **diagnosis}


def _diagnose(workload: Any, state: Any, start: int, size: int) -> dict[str, Any]:
    """Replay the failing step from the state before it: which forward outputs, gradients and updates are non-finite."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    images = workload.data[0][start:start + size]
    labels = workload.data[1][start:start + size]
    model = workload.model

    def forward(params: Any, batch_stats: Any) -> Any:
        logits, found = model.apply({"params": params, "batch_stats": batch_stats}, images, train=True,
                                    mutable=["batch_stats", "intermediates"], capture_intermediates=True)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels).mean()
        return loss, found

    (loss, found), grads = jax.jit(jax.value_and_grad(forward, has_aux=True))(state.params, state.batch_stats)
    updates, _ = jax.jit(workload.tx.update)(grads, state.opt_state, state.params)

    def named(tree: Any) -> list[tuple[str, Any]]:
        return [(jax.tree_util.keystr(p), np.asarray(v, dtype=np.float32)) for p, v in jax.tree_util.tree_leaves_with_path(tree)]

    def top(tree: Any, k: int = 5) -> list[tuple[str, float]]:
        return sorted(((n, float(np.max(np.abs(v)))) for n, v in named(tree) if np.all(np.isfinite(v))),
                      key=lambda item: -item[1])[:k]

    bad = lambda tree: [n for n, v in named(tree) if not np.all(np.isfinite(v))]  # noqa: E731
    return {"replay_loss": float(loss), "nonfinite_intermediates": bad(found["intermediates"])[:20],
            "nonfinite_intermediate_count": len(bad(found["intermediates"])),
            "largest_intermediates": top(found["intermediates"]),
            "nonfinite_batch_stats": bad(found["batch_stats"])[:12], "nonfinite_grads": bad(grads)[:20],
            "nonfinite_updates": bad(updates)[:12], "nonfinite_state_before": bad(state)[:12],
            "largest_grads": top(grads), "largest_updates": top(updates), "largest_params_before": top(state.params, 3),
            "grad_norm": float(optax.global_norm(grads))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", type=Path, help="a run folder's spec.json")
    parser.add_argument("--variant", action="append", default=None,
                        choices=["product", "two_pass_var", "bn_fp32", "conv_fp32", "no_donation"])
    parser.add_argument("--steps", type=int, default=390)
    args = parser.parse_args(argv)
    spec = read_spec(args.spec)
    for variant in args.variant or ["product"]:
        print(json.dumps(probe(spec, variant, args.steps)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
