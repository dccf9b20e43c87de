"""The ``--slurm-*`` options of ``bench scenario run`` and ``bench scenario resume``, built from the one
declaration of the slurm runtime's settings (:class:`orchestrator.runtimes.slurm_settings.SlurmSettings`).

A command declares one parameter ``slurm: dict[str, Any] | None = None`` and is decorated with
:func:`slurm_flags`: Typer then sees, in its place, one option per field of ``SlurmSettings`` that has a
flag (its name, type and help from the field), and the command gets the options given as the
``settings['slurm']`` block (``settings_from_cli``; an option left out falls back to ``BENCH_SLURM_<KEY>``
when the runtime reads its settings). A field given a flag is an option of both commands at once.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import typer

from orchestrator.runtimes.runtime_settings import flagged


def settings_flags(settings_cls: type, param: str, to_block: Callable[..., dict[str, Any]]) -> Callable[[Callable], Callable]:
    """A decorator: the command's parameter ``param`` becomes one Typer option per flagged field of ``settings_cls``
    (parameters ``<param>_<field>``); the command gets ``to_block(**{field: value})`` as ``param``."""
    options = flagged(settings_cls)

    def decorate(command: Callable) -> Callable:
        signature = inspect.signature(command, eval_str=True)
        if param not in signature.parameters:
            raise TypeError(f"{command.__name__}: no parameter {param!r} to put the {settings_cls.__name__} options in")
        params: list[inspect.Parameter] = []
        for current in signature.parameters.values():
            if current.name != param:
                params.append(current)
                continue
            params += [inspect.Parameter(f"{param}_{name}", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                         default=typer.Option(None, decl.flag, help=decl.help), annotation=decl.cli_type | None)
                       for name, decl in options.items()]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {name: kwargs.pop(f"{param}_{name}", None) for name in options}
            return command(*args, **kwargs, **{param: to_block(**given)})

        wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        return wrapper

    return decorate


def slurm_flags(command: Callable) -> Callable:
    """The ``--slurm-*`` options in place of the command's ``slurm`` parameter (see the module's docstring)."""
    from orchestrator.runtimes.slurm_settings import SlurmSettings, settings_from_cli

    return settings_flags(SlurmSettings, "slurm", settings_from_cli)(command)
