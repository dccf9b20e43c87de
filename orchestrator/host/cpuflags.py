"""The CPU features that decide how fast a CPU runs a training step, read from /proc/cpuinfo.

A CPU run's throughput depends less on the model name than on its vector and matrix units: AVX-512
with BF16 and VNNI, or AMX tiles, run bf16 and int8 kernels several times faster than AVX2 alone.
:func:`speed_flags` keeps those of the first CPU's ``flags`` (x86) or ``Features`` (ARM) line, in
the order of :data:`SPEED_FLAGS`; it is None when the text has no such line (non-Linux, POWER).
"""

from __future__ import annotations

# x86: vector widths, fused multiply-add, the bf16/fp16/int8 dot-product extensions, AMX tiles
X86_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
             "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16")
# ARM: NEON and its half-precision and dot-product forms, SVE, the bf16 and int8 matrix-multiply instructions, SME
ARM_FLAGS = ("asimd", "asimdhp", "asimddp", "sve", "sve2", "bf16", "i8mm", "sme")
SPEED_FLAGS = X86_FLAGS + ARM_FLAGS
FLAG_KEYS = ("flags", "Features")  # x86, ARM


def speed_flags(cpuinfo: str) -> list[str] | None:
    """The :data:`SPEED_FLAGS` the first CPU of a /proc/cpuinfo text lists (empty: none of them; None: no flags line)."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in FLAG_KEYS:
            present = set(value.split())
            return [flag for flag in SPEED_FLAGS if flag in present]
    return None
