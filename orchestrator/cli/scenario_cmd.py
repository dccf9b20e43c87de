"""``bench scenario``: run, validate, show and list scenarios."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from textwrap import shorten
from typing import Any

import typer

from orchestrator.artifacts.label import check_label
from orchestrator.cli import local_options, slurm_options
from orchestrator.cli.console import out, print_json
from orchestrator.cli.reporter import RichReporter
from orchestrator.cli.results_view import WideOption, print_outcome, rich_table
from orchestrator.errors import BadInput
from orchestrator.paths import default_results_dir, scenarios_dir
from orchestrator.reports.formats import blank, plural
from orchestrator.reports.model import Table
from orchestrator.reports.views import Field, batch_label, devices_label, view
from orchestrator.scenario import RunPlan, expand, load_scenario
from orchestrator.scenario.load import Scenario
from orchestrator.scenario.workload import Workload
from orchestrator.terminal import markup

scenario_app = typer.Typer(help="Validate, inspect and run YAML scenarios.", no_args_is_help=True)

DESCRIPTION = 72  # characters of a scenario's description in the compact list (--wide: all)
TABLE_ROWS = 200  # runs drawn in the --dry-run and show table (a table of thousands takes seconds to draw)
LabelOption = typer.Option(None, "--label", help="A short label for the artifact (e.g. 'torch 2.11 image'), shown by "
                           "'bench results list' and 'history'; letters, digits, spaces and _.,:;+=@#()/-, at most 80 characters.")
SetOption = typer.Option(None, "--set", help="Override a scenario field: key=value (e.g. workload.batch.size=64). Repeatable.")


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def _load(file: str, sets: list[str] | None, smoke: bool) -> Scenario:
    return load_scenario(file, sets or [], smoke=smoke)


@scenario_app.command("run")
@slurm_options.slurm_flags
@local_options.local_flags
def run(
    file: str = typer.Argument(..., help="Scenario YAML file (or the name of a bundled scenario)."),
    engines: str = typer.Option(None, "--engines", help="Comma-separated subset of the scenario's engines."),
    precisions: str = typer.Option(None, "--precisions", help="Comma-separated subset of the scenario's precisions."),
    runtime: str = typer.Option("auto", "--runtime", help="auto | docker | local | slurm (and any other runtime module)."),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda."),
    devices: int = typer.Option(None, "--devices", min=1, help="Devices per run (data parallel); overrides matrix.devices."),
    sets: list[str] = SetOption,
    repeats: int = typer.Option(None, "--repeats", min=1, help="Repeats of every run (separate processes)."),
    smoke: bool = typer.Option(False, "--smoke", help="Shrink the scenario (few steps, small synthetic data) for a quick check."),
    out_dir: Path = typer.Option(None, "--out", help="Artifact root (default: results/)."),
    local: dict[str, Any] | None = None,  # --python (local_options.local_flags)
    visible_devices: str = typer.Option(None, "--visible-devices", help="GPU indices to use, e.g. 2,3 (local: CUDA_VISIBLE_DEVICES; docker: device requests)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and print the run matrix without running."),
    label: str = LabelOption,
    wide: bool = WideOption,
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout, with the artifact's warnings (progress stays on stderr)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Echo engine output."),
    slurm: dict[str, Any] | None = None,  # the --slurm-* options (slurm_options.slurm_flags)
) -> None:
    """Run a scenario and write a hashed, schema-valid artifact."""
    from orchestrator.run.execute import RunOptions, run_scenario

    if device not in ("auto", "cpu", "cuda"):
        raise BadInput(f"--device: '{device}' is not one of auto, cpu, cuda")
    label = check_label(label)
    if runtime != "auto":  # checked by --dry-run too
        from orchestrator.runtimes import get_runtime

        get_runtime(runtime)
    scenario = _load(file, sets, smoke)
    plans = expand(scenario, _csv(engines), _csv(precisions), repeats, devices)
    from orchestrator.scenario.runtime_check import check_runtime_blocks

    slurm = slurm or {}
    # the runtime settings as the run would check them (the environment's BENCH_SLURM_* with --runtime slurm)
    check_runtime_blocks(scenario, slurm, os.environ if runtime == "slurm" else None)
    if dry_run:
        _show_plans(scenario, plans, as_json, wide)
        return
    settings: dict = dict(local or {})
    if visible_devices:
        if not all(part.strip().isdigit() for part in visible_devices.split(",")):
            raise BadInput(f"--visible-devices: '{visible_devices}' is not a comma-separated list of GPU indices")
        settings["visible_devices"] = visible_devices.replace(" ", "")
    if slurm:
        settings["slurm"] = slurm
    options = RunOptions(runtime=runtime, device=device, out_root=(out_dir or default_results_dir()).resolve(), settings=settings,
                         label=label)
    outcome = run_scenario(scenario, plans, options, RichReporter(verbose=verbose))  # stderr: progress with --json too
    print_outcome(outcome.artifact.root, outcome.summary, as_json, wide)
    raise typer.Exit(outcome.exit_code)


@scenario_app.command("validate")
def validate_cmd(
    file: str = typer.Argument(..., help="Scenario YAML file."),
    sets: list[str] = SetOption,
    smoke: bool = typer.Option(False, "--smoke", help="Validate the smoke profile too."),
) -> None:
    """Check a scenario against its schema and bench's rules (exit 2 with the field on error)."""
    scenario = _load(file, sets, smoke)
    plans = expand(scenario)
    out.print(f"[green]valid[/]: {markup(scenario.source)} ({markup(scenario.name)}, {len(plans)} runs)")


@scenario_app.command("show")
def show(
    file: str = typer.Argument(..., help="Scenario YAML file."),
    sets: list[str] = SetOption,
    smoke: bool = typer.Option(False, "--smoke", help="Show the smoke profile."),
    engines: str = typer.Option(None, "--engines", help="Comma-separated subset of the scenario's engines."),
    precisions: str = typer.Option(None, "--precisions", help="Comma-separated subset of the scenario's precisions."),
    repeats: int = typer.Option(None, "--repeats", min=1, help="Repeats of every run (separate processes)."),
    devices: int = typer.Option(None, "--devices", min=1, help="Devices per run (data parallel); overrides matrix.devices."),
    wide: bool = WideOption,
    as_json: bool = typer.Option(False, "--json", help="Print the matrix as JSON."),
) -> None:
    """Print the expanded run matrix."""
    scenario = _load(file, sets, smoke)
    _show_plans(scenario, expand(scenario, _csv(engines), _csv(precisions), repeats, devices), as_json, wide)


def _length(workload: Workload) -> str:
    """'1 epoch', '90 epochs' or '500 steps'."""
    return plural(workload.epochs, "epoch") if workload.epochs is not None else plural(workload.steps or 0, "step")


def plans_table(plans: list[RunPlan], title: str, wide: bool) -> Table:
    """The run matrix: run id (--wide), engine, precision, path, batch, devices, repeat, and why a run is skipped."""
    fields = [Field("run id", lambda p: p.run_id, wide_only=True), Field("engine", lambda p: p.engine),
              Field("precision", lambda p: p.precision, short="prec"), Field("path", lambda p: p.path, fold=str),
              Field("batch", lambda p: p.batch, fold=batch_label), Field("devices", lambda p: p.devices, short="dev", fold=devices_label),
              Field("repeat", lambda p: p.repeat, short="#"),
              Field("note", lambda p: f"skipped: {p.skip_reason}" if p.skip_reason else None, blank, clip=True)]
    return view("plans", title, fields, plans, wide)


def _show_plans(scenario: Scenario, plans, as_json: bool, wide: bool = False) -> None:
    if as_json:
        print_json({"scenario": scenario.name, "smoke": scenario.smoke, "workload": scenario.workload.to_json(),
                    "runs": [{"run_id": p.run_id, "engine": p.engine, "precision": p.precision, "path": p.path,
                              "batch_per_device": p.batch, "devices": p.devices, "repeat": p.repeat,
                              "skip_reason": p.skip_reason} for p in plans]})
        return
    w, data = scenario.workload, scenario.workload.dataset
    out.print(f"[bold]{markup(scenario.name)}[/]{' (smoke)' if scenario.smoke else ''}: {w.mode} {w.model.arch} "
              f"{w.input.height}x{w.input.width}x{w.input.channels}, {w.model.num_classes} classes, "
              f"{markup(data.name)}/{markup(data.split)} ({data.samples if data.samples is not None else 'all'} samples, "
              f"{markup(data.source)}), {_length(w)}, warmup {plural(w.warmup_steps, 'step')}")
    shown = plans if len(plans) <= TABLE_ROWS else plans[:TABLE_ROWS]
    more = f", the first {TABLE_ROWS} shown (--json lists all)" if len(shown) < len(plans) else ""
    out.print(rich_table(plans_table(shown, f"{plural(len(plans), 'run')}{more}", wide), wide))


@scenario_app.command("list")
def list_cmd(wide: bool = WideOption, as_json: bool = typer.Option(False, "--json", help="Print the list as JSON.")) -> None:
    """List the bundled scenarios."""
    rows = []
    for path in sorted(scenarios_dir().glob("*.yaml")):
        try:
            scenario = load_scenario(str(path))
            rows.append(ScenarioEntry(scenario.name, str(path), scenario.description, scenario.matrix.engines, scenario.matrix.precisions))
        except BadInput as exc:
            rows.append(ScenarioEntry(path.stem, str(path), f"INVALID: {exc}"))
    if as_json:
        print_json([row.to_json() for row in rows])
        return
    out.print(rich_table(scenarios_table(rows, wide), wide))


@dataclass(frozen=True)
class ScenarioEntry:
    """One bundled scenario of ``scenario list`` (an invalid one: its problem as the description, no axes)."""

    name: str
    file: str
    description: str
    engines: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ()

    def to_json(self) -> dict[str, str | list[str]]:
        return {"name": self.name, "file": self.file, "description": self.description, "engines": list(self.engines),
                "precisions": list(self.precisions)}


def scenarios_table(rows: list[ScenarioEntry], wide: bool) -> Table:
    """The bundled scenarios: name, engines, precisions, description (compact: cut to the width left)."""
    fields = [Field("name", lambda r: r.name), Field("engines", lambda r: ", ".join(r.engines), wide_only=True),
              Field("precisions", lambda r: ", ".join(r.precisions), wide_only=True),
              Field("engines x precisions", lambda r: f"{', '.join(r.engines)} x {', '.join(r.precisions)}", wrap=True,
                    compact_only=True),
              Field("description", lambda r: r.description, compact_fmt=lambda d: shorten(d, DESCRIPTION, placeholder=" …"), wrap=True)]
    return view("scenarios", "", fields, rows, wide)
