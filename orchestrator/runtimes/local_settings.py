"""The settings of the local runtime, as one typed class: :class:`LocalSettings`.

``interpreter``: the engine's Python, set by ``--python`` (an option of ``bench scenario run`` and
``bench scenario resume`` alike, built from this one declaration: ``orchestrator.cli.local_options``)
or by the scenario's ``engines.<name>.interpreter``; without either, the environment ``bench env
create ENGINE`` made, else the interpreter bench runs in (:func:`orchestrator.runtimes.local.resolve_interpreter`).
Slurm's local mode runs the same interpreter. ``env``: variables added to the engine's environment
(bench's internal ones are refused by the runtime's check and never passed on). ``visible_devices``:
the GPUs the engine may see (indices or UUIDs; empty: what bench sees), set by ``--visible-devices``
of ``scenario run``, a setting of every runtime.

The runtime reads them from its settings (the top-level keys of the settings dict the CLI and the
scenario fill) with :func:`local_settings`; a bad value is refused naming the field (``local.interpreter: ...``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import BadInput
from orchestrator.host.gpus import visible_ids
from orchestrator.runtimes.runtime_settings import check_fields, declarations, gather, setting

CONTROL = re.compile(r"[\x00-\x1f\x7f]")
PYTHON_HELP = "Interpreter for the local runtime and slurm's local mode (default: the engine's bench env, else bench's own)."


def _interpreter(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or CONTROL.search(value):
        raise BadInput(f"{where}: {str(value)[:80]!r} is not an interpreter (a command or path, without control characters)")
    return value


def _env(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    if isinstance(value, tuple) and all(isinstance(item, tuple) and len(item) == 2 for item in value):
        value = dict(value)
    if not isinstance(value, Mapping):
        raise BadInput(f"{where}: give a mapping of variable names to values")
    return tuple((str(key), str(val)) for key, val in value.items())


def _visible(value: Any, where: str) -> tuple[str, ...]:
    ids = visible_ids(value)
    bad = next((item for item in ids if CONTROL.search(item) or "," in item), None)
    if bad is not None:
        raise BadInput(f"{where}: {bad[:80]!r} is not a GPU index or UUID")
    return ids


@dataclass(frozen=True)
class LocalSettings:
    """The local runtime's settings, checked when made (BadInput ``local.<field>: ...`` for a bad value)."""

    interpreter: str | None = setting(None, _interpreter, flag="--python", help=PYTHON_HELP)
    env: tuple[tuple[str, str], ...] = setting((), _env)  # (name, value) pairs added to the engine's environment
    visible_devices: tuple[str, ...] | None = setting(None, _visible)  # GPU indices or UUIDs; (): 'all'; None: not given

    def __post_init__(self) -> None:
        check_fields(self, "local")

    def environment(self) -> dict[str, str]:
        """``env`` as a mapping."""
        return dict(self.env)


KEYS = tuple(declarations(LocalSettings))


def local_settings(settings: Mapping[str, Any]) -> LocalSettings:
    """The local runtime's settings from the runtime settings (their top-level ``interpreter``, ``env``, ``visible_devices``)."""
    return gather(LocalSettings, {key: settings.get(key) for key in KEYS}, {}, "local")


def settings_from_cli(**given: Any) -> dict[str, Any]:
    """The runtime settings the local runtime's command-line options give (``--python``: ``interpreter``; unset ones left out)."""
    unknown = sorted(set(given) - set(KEYS))
    if unknown:
        raise TypeError(f"settings_from_cli: {unknown[0]} is not a local setting")
    block = {key: value for key, value in given.items() if value not in (None, "")}
    LocalSettings(**block)  # a bad value is refused before anything runs
    return block
