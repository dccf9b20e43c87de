"""Does folding BatchNorm change JAX's ResNet-50 logits beyond the precision's own rounding? (on the device at hand)

Builds bench's ResNet-50 (1000 classes) with BatchNorm statistics and affine values spread away from their identity
initial values (a fresh init folds to nothing), runs one batch through the unfolded and the folded model at each
precision the engine runs (bench_jax.prepare's policy: bf16 = bfloat16 compute, tf32 = float32 at the backend's
default precision), and compares each with the unfolded model at float32 HIGHEST, the reference. The fold passes
when its error against the reference is within ``--tolerance`` x the unfolded model's own error at that precision
(floored at 1e-3 of the logits' scale) and its top-1 agreement is no lower than the unfolded model's minus one image.
One JSON line per precision; exit 1 when a precision fails, 2 when the device cannot run one.

    python3 benchmarks/probes/jax_fold_check.py --size 224 --batch 64 --precisions bf16,tf32
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO / "images" / "common", REPO / "images" / "jax"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

from bench_engine.api import UnsupportedError  # noqa: E402
from bench_jax.folding import fold_batchnorm  # noqa: E402
from bench_jax.model import BN_EPSILON, resnet50  # noqa: E402
from bench_jax.precision import precision_policy  # noqa: E402


def spread_variables(variables: dict, seed: int) -> dict:
    """BatchNorm means in [-0.2, 0.2], variances in [0.5, 2], scales in [0.5, 1.5], shifts in [-0.1, 0.1]."""
    keys = iter(jax.random.split(jax.random.PRNGKey(seed), 4096))

    def stat(path, leaf):
        low, high = (0.5, 2.0) if path[-1].key == "var" else (-0.2, 0.2)
        return jax.random.uniform(next(keys), leaf.shape, leaf.dtype, low, high)

    def param(path, leaf):
        names = [getattr(p, "key", "") for p in path]
        if not any("bn" in name for name in names):
            return leaf
        low, high = (0.5, 1.5) if names[-1] == "scale" else (-0.1, 0.1)
        return jax.random.uniform(next(keys), leaf.shape, leaf.dtype, low, high)

    return {"params": jax.tree_util.tree_map_with_path(param, variables["params"]),
            "batch_stats": jax.tree_util.tree_map_with_path(stat, variables["batch_stats"])}


def logits(precision: str, folded: bool, variables: dict, images: jax.Array, classes: int) -> np.ndarray:
    """The model's logits at ``precision`` as the engine runs it (bench_jax.prepare: the policy's compute dtype, HIGHEST
    for fp32), float32 parameters; tf32 is refused where the device has no TF32 tensor cores."""
    devices = jax.devices()
    kind = "cuda" if devices[0].platform == "gpu" else devices[0].platform
    policy = precision_policy(precision, kind, devices)
    model = resnet50(classes, dtype=jnp.dtype(policy.compute_dtype), param_dtype=jnp.float32,
                     precision=lax.Precision.HIGHEST if policy.highest else None, fold_batchnorm=folded)
    forward = jax.jit(lambda v, x: model.apply(v, x, train=False))
    return np.asarray(forward(variables, images).astype(jnp.float32))


def compare(out: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """(max |out - reference| / max |reference|, top-1 agreement)."""
    scale = float(np.abs(reference).max())
    return float(np.abs(out - reference).max()) / scale, float(np.mean(out.argmax(-1) == reference.argmax(-1)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--precisions", default="bf16,tf32")
    parser.add_argument("--tolerance", type=float, default=2.0, help="folded error allowed, in units of the unfolded's")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fold-epsilon", type=float, default=BN_EPSILON, help="the epsilon folded (another one is a wrong fold)")
    args = parser.parse_args(argv)
    shape = (args.batch, args.size, args.size, 3)
    base = resnet50(args.classes).init(jax.random.PRNGKey(args.seed), jnp.zeros((1, args.size, args.size, 3)), train=False)
    variables = spread_variables(base, args.seed + 1)
    folded = fold_batchnorm(variables, epsilon=args.fold_epsilon)
    images = jax.random.uniform(jax.random.PRNGKey(args.seed + 2), shape, jnp.float32, -1.0, 1.0)
    reference = logits("fp32", False, variables, images, args.classes)
    failed = False
    for precision in args.precisions.split(","):
        try:
            plain_err, plain_top1 = compare(logits(precision, False, variables, images, args.classes), reference)
        except UnsupportedError as exc:  # tf32 without TF32 tensor cores, an unknown name
            print(f"error: --precisions: {exc}", file=sys.stderr)
            return 2
        fold_err, fold_top1 = compare(logits(precision, True, folded, images, args.classes), reference)
        allowed = args.tolerance * max(plain_err, 1e-3)
        ok = fold_err <= allowed and fold_top1 >= plain_top1 - 1.0 / args.batch
        failed |= not ok
        print(json.dumps({"precision": precision, "device": str(jax.devices()[0].device_kind), "size": args.size,
                          "batch": args.batch, "unfolded_rel_err": plain_err, "folded_rel_err": fold_err,
                          "allowed_rel_err": allowed, "unfolded_top1_agree": plain_top1, "folded_top1_agree": fold_top1,
                          "ok": ok}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
