"""What torch.compile spent in this process, for engine.log: Dynamo's tracing, AOT (freezing's constant folding runs
there), Inductor, and whether its caches hit. Said once, after the warmup, where the first call compiled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# (torch._dynamo.utils.compilation_time_metrics key, what the line calls it); the first is the whole compile
PHASES = (("_compile.compile_inner", "in all"), ("bytecode_tracing", "tracing"),
          ("create_aot_dispatcher_function", "AOT and freezing"), ("compile_fx_inner", "Inductor"))
# (counter group, counter prefix, what the line calls the cache)
CACHES = (("inductor", "fxgraph_cache", "FX graph cache"), ("aot_autograd", "autograd_cache", "AOT autograd cache"))


def describe(times: Mapping[str, Sequence[float]], counters: Mapping[str, Mapping[str, int]]) -> str | None:
    """The line for these metrics (None when nothing compiled)."""
    total = sum(times.get(PHASES[0][0], ()))
    if total <= 0:
        return None
    parts = ", ".join(f"{label} {sum(times.get(key, ())):.1f}s" for key, label in PHASES[1:] if key in times)
    caches = "; ".join(
        f"{label} " + " ".join(f"{kind} {counters.get(group, {}).get(f'{prefix}_{kind}', 0)}" for kind in ("hit", "miss", "bypass"))
        for group, prefix, label in CACHES)
    return f"torch.compile: {total:.1f}s in all ({parts}); {caches}"


def compile_summary() -> str | None:
    """The line for what this process compiled so far (None when nothing did or torch keeps no such metrics)."""
    try:
        from torch._dynamo.utils import compilation_time_metrics, counters
    except ImportError:  # a torch without these internals: nothing to say
        return None
    return describe(compilation_time_metrics, counters)
