"""cuDNN made ready before XLA records a convolution into a command buffer (a CUDA graph).

XLA creates its cuDNN handle lazily, on the first convolution it runs. A freshly compiled program
has run convolutions while autotuning; one loaded from the persistent compilation cache has not,
so its first convolution is recorded inside a stream capture, where creating the handle fails
(seen on an H200, jaxlib 0.11.2: ``Could not create cudnn handle: 4004`` then ``No DNN support for
stream``, in every run after the first). One small convolution, compiled without command buffers
and run on each device before anything else, creates the handle outside any capture.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax


def initialise_dnn(devices: list[Any]) -> None:
    """Run one 3x3 convolution on every device, outside command buffers, and wait for it."""
    images = jnp.zeros((1, 8, 8, 8), jnp.float32)
    kernel = jnp.zeros((3, 3, 8, 8), jnp.float32)  # 3x3: XLA would rewrite a 1x1 convolution as a GEMM

    def conv(x: Any, w: Any) -> Any:
        return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    for device in devices:
        x, w = jax.device_put((images, kernel), device)
        lowered = jax.jit(conv).lower(x, w)
        try:
            compiled = lowered.compile(compiler_options={"xla_gpu_enable_command_buffer": ""})
        except Exception:  # an XLA that does not take the option: one convolution is below the graph size anyway
            compiled = lowered.compile()
        jax.block_until_ready(compiled(x, w))
