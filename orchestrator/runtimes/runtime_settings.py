"""Typed runtime settings: each runtime keeps one frozen dataclass of its settings beside it
(``slurm_settings.SlurmSettings``, ``docker_settings.DockerSettings``), and each field of it says,
in one place, its type and default (the dataclass field), its check, the environment variable it
falls back to and the command-line option and help that set it (a :class:`Setting` in the field's
metadata, made with :func:`setting`).

A settings object is checked when it is made (``__post_init__`` calls :func:`check_fields`): a bad
value is refused with BadInput naming the field (``slurm.gpus: -1 is negative``), a good one is kept
normalised (``"3"`` -> ``3``). :func:`gather` makes the settings of a runtime from a block of given
values over the environment variables, each checked under the name it came by; the CLI builds its
options from :func:`flagged` (``orchestrator.cli.slurm_options``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from orchestrator.errors import BadInput

SETTING = "bench_setting"  # the key of a field's metadata that holds its Setting

S = TypeVar("S")  # a settings class
Check = Callable[[Any, str], Any]  # (value, where) -> the value normalised; BadInput "<where>: ..." when bad


@dataclass(frozen=True)
class Setting:
    """What a settings field means beyond its type and default."""

    check: Check
    env: str | None = None  # the environment variable it falls back to
    flag: str | None = None  # the command-line option that sets it (None: scenario and environment only)
    help: str = ""  # the command-line option's help
    cli_type: type = str  # the type the command-line option parses
    label: str | None = None  # the name errors give it, whatever the source (default: <prefix>.<field>, or the env variable)


def setting(default: Any, check: Check, *, env: str | None = None, flag: str | None = None, help: str = "",
            cli_type: type = str, label: str | None = None) -> Any:
    """A dataclass field declared with its check, environment variable, command-line option and help."""
    return field(default=default, metadata={SETTING: Setting(check, env, flag, help, cli_type, label)})


def declarations(cls: type) -> dict[str, Setting]:
    """Field name -> its Setting, in the order of the class."""
    return {f.name: f.metadata[SETTING] for f in fields(cls) if SETTING in f.metadata}


def flagged(cls: type) -> dict[str, Setting]:
    """The settings of ``cls`` that a command-line option sets, in the order of the class."""
    return {name: decl for name, decl in declarations(cls).items() if decl.flag}


def where(prefix: str, name: str, decl: Setting, from_env: bool) -> str:
    """The name a value is refused under: the label, the environment variable it came from, or ``<prefix>.<name>``."""
    if decl.label:
        return decl.label
    return str(decl.env) if from_env else f"{prefix}.{name}"


def check_fields(obj: Any, prefix: str) -> None:
    """For ``__post_init__``: every value set (not None, not the default) through its check, kept normalised."""
    for f in fields(obj):
        decl = f.metadata.get(SETTING)
        value = getattr(obj, f.name)
        if decl is None or value is None or (type(value) is type(f.default) and value == f.default):
            continue
        object.__setattr__(obj, f.name, decl.check(value, where(prefix, f.name, decl, False)))


def gather(cls: type[S], given: Mapping[str, Any], environ: Mapping[str, str], prefix: str, what: str | None = None) -> S:
    """A ``cls`` made of the checked values ``given`` (unset: None or '') over their environment variables.

    ``what`` (e.g. 'the slurm runtime'): refuse a given name that is no setting of ``cls``."""
    decls = declarations(cls)
    unknown = sorted(set(given) - set(decls))
    if what and unknown:
        raise BadInput(f"{prefix}.{unknown[0]}: not a setting of {what} (known: {', '.join(decls)})")
    values: dict[str, Any] = {}
    for name, decl in decls.items():
        if given.get(name) not in (None, ""):
            values[name] = decl.check(given[name], where(prefix, name, decl, False))
        elif decl.env and environ.get(decl.env, "").strip():
            values[name] = decl.check(environ[decl.env].strip(), where(prefix, name, decl, True))
    return cls(**values)
