"""What ``--runtime auto`` chose for each engine, said in one line.

'runtime auto -> local for jax, pytorch (docker: Docker daemon unreachable at ...; start it)': engines that got the
same runtime for the same reason share one part; a reason never suggests the runtime that was chosen; an image
docker runs that is not the one in images/images.lock.json (built here by someone, or rebuilt) says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.runtimes import Runtime, RuntimeSettings

PLACEHOLDER = "ENGINE"  # an engine's name in a reason shared by several engines


@dataclass(frozen=True)
class RuntimeChoice:
    """The runtime ``--runtime auto`` chose for one engine, and why."""

    engine: str
    runtime: str
    why: str


@dataclass(frozen=True)
class ChosenRuntime:
    """The runtime an engine runs on and its checked settings (what the runtime's ``check`` found included)."""

    runtime: Runtime
    settings: RuntimeSettings  # handed to the runtime as they are, with what its check found


def without_suggestion(text: str, runtime: str) -> str:
    """``text`` without its advice to use ``runtime`` ('..., or use --runtime local'), when that is what was chosen."""
    cleaned = re.sub(rf"[,;]?\s*(or )?use --runtime {re.escape(runtime)}\b", "", text)
    return re.sub(r"\(\s*\)", "", cleaned).strip()


def lock_note(engine: str, image_id: str | None) -> str:
    """', not in images.lock.json' or ', not the image of images.lock.json' for a docker image; '' when it is the locked one."""
    from orchestrator.errors import BadInput
    from orchestrator.imagebuild.lock import read_lock

    try:
        entry = read_lock()["images"].get(engine)
    except BadInput:
        return ""
    if entry is None:
        return ", not in images.lock.json"
    return "" if not image_id or entry.get("image_id") == image_id else ", not the image of images.lock.json"


def _reason(choice: RuntimeChoice) -> str:
    """The reason with the engine's name as a placeholder (so that engines with the same reason share it)."""
    why = without_suggestion(choice.why, choice.runtime).replace(f"engine '{choice.engine}': ", "")
    return re.sub(rf"\b{re.escape(choice.engine)}\b", PLACEHOLDER, why)


def choice_line(choices: list[RuntimeChoice]) -> str:
    """The one line of ``--runtime auto``'s choice for every engine."""
    groups: dict[tuple[str, str], list[str]] = {}
    for choice in choices:
        groups.setdefault((choice.runtime, _reason(choice)), []).append(choice.engine)
    parts = []
    for (runtime, reason), engines in groups.items():
        if len(engines) == 1:
            reason = reason.replace(PLACEHOLDER, engines[0])
        parts.append(f"{runtime} for {', '.join(engines)}" + (f" ({reason})" if reason else ""))
    return "runtime auto -> " + "; ".join(parts)
