"""The local runtime's options of ``bench scenario run`` and ``bench scenario resume`` (``--python``), built from
the one declaration of its settings (:class:`orchestrator.runtimes.local_settings.LocalSettings`), as the
``--slurm-*`` options are from ``SlurmSettings`` (:mod:`orchestrator.cli.slurm_options`).

A command declares one parameter ``local: dict[str, Any] | None = None`` and is decorated with
:func:`local_flags`: it gets the options given as runtime settings (``{"interpreter": ...}``), each
value checked by ``LocalSettings`` before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.cli.slurm_options import settings_flags


def local_flags(command: Callable) -> Callable:
    """The local runtime's options in place of the command's ``local`` parameter."""
    from orchestrator.runtimes.local_settings import LocalSettings, settings_from_cli

    return settings_flags(LocalSettings, "local", settings_from_cli)(command)
