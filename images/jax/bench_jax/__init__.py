"""bench's JAX engine (Flax + Optax): ``python -m bench_jax --spec S --result R``."""

from bench_jax.engine import JaxEngine

__all__ = ["JaxEngine"]
