"""The settings of the docker runtime, as one typed class: :class:`DockerSettings`.

The scenario's ``runtime.docker`` block (limits of every run's container), each field declared with
its type, default, check and, for ``shm_size``, its environment variable ``BENCH_DOCKER_SHM_SIZE``
(:mod:`orchestrator.runtimes.runtime_settings`). The command line sets none of them (its
``--visible-devices`` and ``--python`` are settings of every runtime). :func:`docker_settings` reads
them from the runtime settings; ``docker_limits`` turns them into the container's limits.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import BadInput
from orchestrator.runtimes.runtime_settings import check_fields, gather, setting

DEFAULT_SHM_SIZE = "8g"
SHM_ENV = "BENCH_DOCKER_SHM_SIZE"
DEFAULT_PIDS_LIMIT = 8192
DEFAULT_TMP_SIZE = "8g"
SIZE = re.compile(r"[1-9][0-9]*[bkmgBKMG]?")


def _pids(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 64:
        raise BadInput(f"{where}: '{value}' is not a whole number >= 64")
    return value


def _memory(value: Any, where: str) -> str:
    if value != "none" and not SIZE.fullmatch(str(value)):
        raise BadInput(f"{where}: '{value}' is not a size like 64g or 'none'")
    return str(value)


def _cpus(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise BadInput(f"{where}: '{value}' is not a positive number")
    return float(value)


def _size(example: str, strip: bool = False):
    def check(value: Any, where: str) -> str:
        text = str(value).strip() if strip else str(value)
        if not SIZE.fullmatch(text):
            raise BadInput(f"{where}: '{text}' is not a size like {example}")
        return text

    return check


@dataclass(frozen=True)
class DockerSettings:
    """The docker runtime's settings, checked when made (BadInput ``runtime.docker.<field>: ...`` for a bad value)."""

    pids_limit: int = setting(DEFAULT_PIDS_LIMIT, _pids)  # most processes and threads in the container
    mem_limit: str | None = setting(None, _memory)  # None: 90% of the host's memory; 'none': no limit
    cpus: float | None = setting(None, _cpus)  # None: all the host's CPUs
    tmp_size: str = setting(DEFAULT_TMP_SIZE, _size("8g"))  # the tmpfs at /tmp
    shm_size: str = setting(DEFAULT_SHM_SIZE, _size("8g or 16384m", strip=True), env=SHM_ENV, label="docker.shm_size")  # /dev/shm

    def __post_init__(self) -> None:
        check_fields(self, "runtime.docker")


def docker_settings(settings: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> DockerSettings:
    """``settings['docker']`` (the scenario's ``runtime.docker``) checked; ``shm_size`` also from the engine's
    settings, then ``$BENCH_DOCKER_SHM_SIZE``, then 8g."""
    block = settings.get("docker")
    given = dict(block) if isinstance(block, Mapping) else {}
    if not given.get("shm_size"):
        given["shm_size"] = settings.get("shm_size")
    return gather(DockerSettings, given, os.environ if environ is None else environ, "runtime.docker")
