"""The ``--slurm-*`` options of ``bench scenario run`` and ``bench scenario resume``, defined once.

Each is a type to annotate a command parameter with (``slurm_account: slurm_options.Account = None``); an
option left out falls back to ``BENCH_SLURM_<KEY>`` (orchestrator.runtimes.slurm_job), and the command
hands what was given to ``slurm_job.settings_from_cli``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Partition = Annotated[str | None, typer.Option("--slurm-partition", help="slurm: partition (env BENCH_SLURM_PARTITION).")]
Account = Annotated[str | None, typer.Option("--slurm-account", help="slurm: account (env BENCH_SLURM_ACCOUNT).")]
Time = Annotated[str | None, typer.Option("--slurm-time", help="slurm: time limit per run, Slurm syntax, e.g. 30 or 1:00:00 (env BENCH_SLURM_TIME).")]
Gpus = Annotated[str | None, typer.Option("--slurm-gpus", help="slurm: GPUs per run, a number or auto (env BENCH_SLURM_GPUS).")]
SbatchArgs = Annotated[str | None, typer.Option("--slurm-sbatch-args", help="slurm: extra sbatch options, e.g. '--exclusive' (env BENCH_SLURM_SBATCH_ARGS).")]
Mode = Annotated[str | None, typer.Option("--slurm-mode", help="slurm: local (the engine's Python environment) | container (env BENCH_SLURM_MODE).")]
Container = Annotated[str | None, typer.Option("--slurm-container", help="slurm container mode: auto | pyxis | apptainer (env BENCH_SLURM_CONTAINER).")]
SharedDir = Annotated[Path | None, typer.Option("--slurm-shared-dir",
                                                help="slurm: staging folder every node sees (default: the run folder; env BENCH_SLURM_SHARED_DIR).")]
