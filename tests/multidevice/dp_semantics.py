"""Does a data-parallel step compute the right update? Run as ``python dp_semantics.py jax|tensorflow``.

Each check builds the engine's own several-device step around a tiny model (conv, BatchNorm,
dense) on 2 CPU devices, runs one SGD step on a global batch, and compares the parameters with
a reference computed by hand on one device: every device's share through the model with its own
BatchNorm statistics, the gradients averaged, one SGD step. Prints a JSON report.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORLD, SHARE, STEPS, LR = 2, 4, 3, 0.1


def _data():
    import numpy as np

    rng = np.random.default_rng(0)
    samples = WORLD * SHARE * STEPS
    return rng.normal(size=(samples, 8, 8, 3)).astype("float32"), rng.integers(0, 3, size=(samples,)).astype("int32")


def _spec():
    """The example run spec over WORLD devices, SHARE samples each, STEPS steps an epoch."""
    from bench_engine.contract import RunSpec

    doc = json.loads((REPO / "tests" / "fixtures" / "example-run-spec.json").read_text())
    doc["parity"]["batch"].update(per_device=SHARE, drop_last=True)
    doc["parity"].update(devices=WORLD, steps_per_epoch=STEPS)
    return RunSpec.from_json(doc)


def check_jax() -> dict:
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={WORLD}"
    sys.path[:0] = [str(REPO / "images" / "common"), str(REPO / "images" / "jax")]
    import jax

    jax.config.update("jax_enable_x64", True)  # exact comparison: no float32 reduction-order noise
    import flax.linen as nn
    import jax.numpy as jnp
    import numpy as np
    import optax
    from jax.sharding import Mesh

    from bench_engine.api import StepBatch
    from bench_engine.shards import plan_shards, stacked_shards
    from bench_jax.step import StepConfig, TrainState, build_step, replicated, sharded

    class Tiny(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool = True):
            x = nn.Conv(4, (3, 3), dtype=jnp.float64, param_dtype=jnp.float64)(x)
            x = nn.BatchNorm(use_running_average=not train, momentum=0.9, dtype=jnp.float64, param_dtype=jnp.float64)(x)
            return nn.Dense(3, dtype=jnp.float64, param_dtype=jnp.float64)(nn.relu(x).mean(axis=(1, 2)))

    images, labels = _data()
    images = images.astype(np.float64)
    model, tx = Tiny(), optax.sgd(LR, momentum=0.9)
    variables = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 8, 8, 3), jnp.float64), train=False)
    mesh = Mesh(np.array(jax.devices()[:WORLD]), ("data",))
    plan = plan_shards(_spec(), len(labels))
    data = jax.device_put((stacked_shards(images, plan), stacked_shards(labels, plan)), sharded(mesh))
    batch = StepBatch(epoch=1, index=1, start=WORLD * SHARE, size=WORLD * SHARE)  # the 2nd global batch
    where = jax.device_put(np.int32(plan.local(batch).start), replicated(mesh))
    report: dict = {"devices": len(jax.devices())}

    def reference():
        def device_loss(p, x, y):
            logits, updates = model.apply({"params": p, "batch_stats": variables["batch_stats"]}, x, train=True, mutable=["batch_stats"])
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), updates["batch_stats"]

        grads, stats = [], []
        for rank in range(WORLD):
            start, size = plan.slice_of(batch, rank)
            (_, s), g = jax.value_and_grad(device_loss, has_aux=True)(variables["params"], images[start : start + size],
                                                                        labels[start : start + size])
            grads.append(g)
            stats.append(s)
        mean = jax.tree.map(lambda *g: sum(g) / WORLD, *grads)
        updates, _ = tx.update(mean, tx.init(variables["params"]), variables["params"])
        return optax.apply_updates(variables["params"], updates), jax.tree.map(lambda *s: sum(s) / WORLD, *stats)

    expected_params, expected_stats = reference()
    for full_step in (True, False):
        state = jax.device_put(TrainState(variables["params"], variables["batch_stats"], tx.init(variables["params"])), replicated(mesh))
        config = StepConfig(mode="train", full_step=full_step, donate=False, device_data=True, size=SHARE, world=WORLD)
        step = build_step(model, tx, config, mesh)
        new, _loss = step(state, data, where)
        name = "optimized" if full_step else "baseline"
        report[name] = {
            "params_diff": max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree.leaves(new.params), jax.tree.leaves(expected_params), strict=True)),
            "stats_diff": max(float(jnp.max(jnp.abs(a - b)))
                              for a, b in zip(jax.tree.leaves(new.batch_stats), jax.tree.leaves(expected_stats), strict=True)),
            "replicated": all(leaf.sharding.is_fully_replicated for leaf in jax.tree.leaves(new)),
            "moved": max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree.leaves(new.params), jax.tree.leaves(variables["params"]), strict=True)),
        }
        if full_step:
            hlo = step.lower(state, data, where).compile().as_text()
            report[name]["all_reduce"] = hlo.count("all-reduce(") + hlo.count("all-reduce-start(")
    return report


def check_tensorflow() -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path[:0] = [str(REPO / "images" / "common"), str(REPO / "images" / "tensorflow")]
    import keras
    import numpy as np
    import tensorflow as tf

    from bench_engine.api import StepBatch
    from bench_engine.shards import plan_shards
    from bench_tensorflow.distributed import all_reduce, build_replicated_step
    from bench_tensorflow.environment import configure_devices
    from bench_tensorflow.optimizer import make_sgd

    devices = configure_devices(tf, "cpu", WORLD)
    images, labels = _data()
    plan = plan_shards(_spec(), len(labels))
    batch = StepBatch(epoch=1, index=1, start=WORLD * SHARE, size=WORLD * SHARE)

    def tiny():
        inputs = keras.Input((8, 8, 3))
        x = keras.layers.Conv2D(4, 3, padding="same")(inputs)
        x = keras.layers.BatchNormalization(momentum=0.9)(x)
        x = keras.layers.GlobalAveragePooling2D()(keras.layers.ReLU()(x))
        return keras.Model(inputs, keras.layers.Dense(3)(x))

    keras.utils.set_random_seed(0)
    reference_model = tiny()
    initial = reference_model.get_weights()
    grads = []
    for rank in range(WORLD):
        start, size = plan.slice_of(batch, rank)
        model_r = tiny()
        model_r.set_weights(initial)
        with tf.GradientTape() as tape:
            logits = model_r(images[start : start + size], training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels[start : start + size], logits=logits))
        grads.append([g.numpy() for g in tape.gradient(loss, model_r.trainable_variables)])
    # get_weights() holds every weight (BatchNorm statistics too): find the trainable ones in it
    trainable_ids = [id(v) for v in reference_model.trainable_variables]
    order = [i for i, v in enumerate(reference_model.weights) if id(v) in trainable_ids]
    expected = [initial[i] - LR * sum(g[k] for g in grads) / WORLD for k, i in enumerate(order)]

    report: dict = {"devices": devices}
    for xla in (False, True):
        strategy = tf.distribute.MirroredStrategy(devices=devices, cross_device_ops=all_reduce(tf, "cpu", devices))
        with strategy.scope():
            model = tiny()
            model.set_weights(initial)
            optimizer = make_sgd(keras, LR, 0.9, False, 0.0)
            optimizer.build(model.trainable_variables)

        def on_device(ctx, model=model):
            rank = ctx.replica_id_in_sync_group
            index = plan.rank_indices(rank)
            with tf.device(devices[rank]):
                return tf.identity(tf.constant(images[index])), tf.identity(tf.constant(labels[index]))

        placed = strategy.experimental_distribute_values_from_function(on_device)
        step = build_replicated_step(tf, model, optimizer, strategy, world=WORLD, train=True, compile_function=True,
                                     jit_compile=xla, resident=placed, shape=(8, 8, 3))
        local = plan.local(batch)
        step(tf.constant(local.start, tf.int32), local.size)
        copies = [v.value.values for v in model.trainable_variables]  # every replica's copy of each variable
        report["xla" if xla else "graph"] = {
            "params_diff": max(float(np.max(np.abs(v.value.values[0].numpy() - e))) for v, e in zip(model.trainable_variables, expected, strict=True)),
            "replicas_diff": max(float(np.max(np.abs(c[0].numpy() - other.numpy()))) for c in copies for other in c[1:]),
            "moved": max(float(np.max(np.abs(v.value.values[0].numpy() - initial[i])))
                         for v, i in zip(model.trainable_variables, order, strict=True)),
        }
    return report


if __name__ == "__main__":
    print(json.dumps(check_jax() if sys.argv[1] == "jax" else check_tensorflow()))
