"""The runtime settings of a scenario, checked when it is validated (``scenario validate``, ``show``,
``run --dry-run``) with the same functions the runtimes use when they submit, so a value the real
submission would refuse (a Slurm partition holding a newline, say) is refused before anything runs."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from orchestrator.errors import BadInput
from orchestrator.scenario.scenario import Scenario

CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_slurm_block(block: Mapping[str, Any], origin: str, environ: Mapping[str, str] | None = None) -> None:
    """``runtime.slurm`` (scenario over command line, as the run merges them) through the Slurm runtime's checks.

    ``environ``: the ``BENCH_SLURM_*`` variables to take into account (none unless given)."""
    from orchestrator.runtimes.slurm_job import slurm_settings

    try:
        slurm_settings({"slurm": dict(block)}, environ={} if environ is None else environ)
    except BadInput as exc:
        text = str(exc)
        raise BadInput(f"{origin}: {'runtime.' + text if text.startswith('slurm.') else text}") from None


def check_engine_runtime(scenario: Scenario) -> None:
    """``engines.<name>.image`` and ``.interpreter``: no control character (they reach a command line or a job script)."""
    for engine, block in scenario.engines.items():
        for key, value in block.runtime_settings().items():
            if CONTROL.search(value) or not value.strip():
                raise BadInput(f"{scenario.source}: engines.{engine}.{key}: {value[:80]!r} is empty or holds a control character")


def check_runtime_blocks(scenario: Scenario, cli: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Every runtime setting of ``scenario`` (and ``cli``, the ``--slurm-*`` options) as the runtimes check them."""
    slurm = {**scenario.runtime.get("slurm", {}), **(cli or {})}
    if slurm or environ:
        check_slurm_block(slurm, str(scenario.source), environ)
    check_engine_runtime(scenario)
