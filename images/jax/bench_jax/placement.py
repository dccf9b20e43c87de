"""The normalised split on one device: the uint8 images copied there chunk by chunk and looked up in
bench_engine.data's table (the host normalisation's bits, without an 18 GB float32 copy on the host)."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bench_engine.data import NORMALIZED

CHUNK_BYTES = 64 << 20  # uint8 images per copy and lookup: bounded temporaries on the device


@partial(jax.jit, donate_argnums=0)
def _write_chunk(out: jax.Array, table: jax.Array, chunk: jax.Array, start: jax.Array) -> jax.Array:
    """``out`` with ``table[chunk]`` written at image ``start`` (in place: ``out`` is donated)."""
    values = jnp.take(table, chunk.astype(jnp.int32), axis=0)
    return lax.dynamic_update_slice(out, values, (start,) + (0,) * (out.ndim - 1))


def normalized_on(images_uint8: np.ndarray, device: Any) -> jax.Array:
    """The split as float32 NHWC on ``device``: each value ``NORMALIZED[value]``, bit for bit the host's."""
    table = jax.device_put(NORMALIZED, device)
    out = jax.device_put(jnp.zeros(images_uint8.shape, jnp.float32, device=device), device)
    per_image = max(1, int(np.prod(images_uint8.shape[1:])))
    step = max(1, CHUNK_BYTES // per_image)
    for start in range(0, images_uint8.shape[0], step):
        chunk = jax.device_put(np.ascontiguousarray(images_uint8[start : start + step]), device)
        out = _write_chunk(out, table, chunk, jnp.int32(start))
    return out
