"""``bench scenario resume ARTIFACT_DIR``: run again only the runs without a valid result.

Adds the ``resume`` command to ``bench scenario`` (the app of ``scenario_cmd``); works for every
runtime. See :mod:`orchestrator.run.resume` for what is kept and where old attempts go.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from orchestrator.artifacts.label import check_label
from orchestrator.cli import local_options, slurm_options
from orchestrator.cli.console import err, out, print_json, status_text
from orchestrator.cli.reporter import RichReporter
from orchestrator.cli.results_view import WideOption, print_outcome
from orchestrator.errors import BadInput
from orchestrator.terminal import markup


@slurm_options.slurm_flags
@local_options.local_flags
def resume_cmd(
    artifact_dir: Path = typer.Argument(..., help="The artifact folder to complete (results/<scenario>/<id>/)."),
    runtime: str = typer.Option(None, "--runtime", help="auto | docker | local | slurm ... (default: the runtime the artifact's runs used)."),
    device: str = typer.Option(None, "--device", help="auto | cpu | cuda (default: as the artifact's specs recorded)."),
    local: dict[str, Any] | None = None,  # --python (local_options.local_flags)
    slurm: dict[str, Any] | None = None,  # the --slurm-* options (slurm_options.slurm_flags)
    dry_run: bool = typer.Option(False, "--dry-run", help="Only list the runs that would be run again."),
    force: bool = typer.Option(False, "--force", help="Resume an artifact whose files changed since bench wrote them (recorded in its integrity.json)."),
    label: str = typer.Option(None, "--label", help="Replace the artifact's label (default: keep it); the same rules as 'scenario run --label'."),
    wide: bool = WideOption,
    as_json: bool = typer.Option(False, "--json", help="Print the summary (or, with --dry-run, the plan) as JSON."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Echo engine output."),
) -> None:
    """Run again, into the same artifact, every run that has no valid result; keep the valid ones."""
    from orchestrator.artifacts.lock import artifact_lock
    from orchestrator.run.resume import plan_resume

    if device is not None and device not in ("auto", "cpu", "cuda"):
        raise BadInput(f"--device: '{device}' is not one of auto, cpu, cuda")
    label = check_label(label)
    artifact_dir = artifact_dir.resolve()
    if dry_run:
        _check_integrity(artifact_dir, force, dry_run)
        _show(plan_resume(artifact_dir, runtime, device), as_json, dry_run)
        return
    if not artifact_dir.is_dir():
        raise BadInput(f"{artifact_dir}: not a bench artifact (no such folder)")
    with artifact_lock(artifact_dir):  # one resume of an artifact at a time
        _resume(artifact_dir, runtime, device, local or {}, force, as_json, wide, verbose, slurm or {}, label)


def _resume(artifact_dir: Path, runtime: str | None, device: str | None, local: dict[str, Any], force: bool, as_json: bool,
            wide: bool, verbose: bool, slurm: dict[str, Any], label: str | None = None) -> None:
    from orchestrator.artifacts.label import relabel
    from orchestrator.run.resume import check_resume_host, plan_resume, resume

    forced = bool(_check_integrity(artifact_dir, force, False))
    plan = plan_resume(artifact_dir, runtime, device)
    if not plan.nothing_to_do:
        check_resume_host(plan)  # one line, exit 2, before the label or any run changes the artifact
    if label is not None:  # before any run: the artifact validates with its new label whatever happens next
        relabel(artifact_dir, label)
        err.print(f"label: {markup(label)}")
    if plan.nothing_to_do:
        _show(plan, as_json, False)
        return
    settings: dict = dict(local)
    if slurm:
        settings["slurm"] = slurm
    reporter = RichReporter(verbose=verbose)  # stderr: progress with --json too
    reporter.note(f"resuming {plan.artifact.root}: {len(plan.to_run) + len(plan.unsearched)} of {len(plan.runs) + len(plan.unsearched)} runs to run "
                  f"(runtime {plan.runtime}, device {plan.device})")
    outcome = resume(plan, settings, reporter, forced=forced)
    print_outcome(outcome.artifact.root, outcome.summary, as_json, wide)
    raise typer.Exit(outcome.exit_code)


def _check_integrity(artifact_dir: Path, force: bool, dry_run: bool) -> list:
    """Hashes first: refuse (exit 2) a changed artifact unless --force (then recorded in the artifact)."""
    from orchestrator.artifacts import open_artifact
    from orchestrator.artifacts.integrity import check_before_resume

    open_artifact(artifact_dir)
    problems = check_before_resume(artifact_dir, force, dry_run)
    if problems:
        err.print(f"[yellow]warning[/] --force: resuming over {len(problems)} integrity problem(s), first: {markup(str(problems[0]))}"
                  + ("" if dry_run else " (recorded in integrity.json)"))
    return problems


def _show(plan, as_json: bool, dry_run: bool) -> None:
    if as_json:
        print_json({"artifact": str(plan.artifact.root), "runtime": plan.runtime, "device": plan.device,
                    "runs": [{"run_id": r.plan.run_id, "action": "keep" if r.keep else "run", "why": r.why} for r in plan.runs]})
        return
    if plan.nothing_to_do:
        out.print(f"nothing to resume: all {len(plan.runs)} runs of {markup(str(plan.artifact.root))} have a valid result")
        return
    for run in plan.runs:
        action = "[dim]keep[/]" if run.keep else "[bold]run again[/]"
        status = run.record.status if run.record else "no record"
        out.print(f"{action}  {markup(run.plan.run_id)}  {status_text(status)}  [dim]{markup(run.why)}[/]")
    for unsearched in plan.unsearched:
        out.print(f"[bold]search[/]  {markup(unsearched.run_id)}  [dim]its maximal batch search did not finish[/]")
    if dry_run:
        todo, total = len(plan.to_run) + len(plan.unsearched), len(plan.runs) + len(plan.unsearched)
        out.print(f"{todo} of {total} runs would run again (runtime {plan.runtime}, device {plan.device})")
