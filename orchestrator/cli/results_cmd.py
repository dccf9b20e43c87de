"""``bench results``: show and validate artifacts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from orchestrator.artifacts import open_artifact
from orchestrator.artifacts.layout import SUMMARY
from orchestrator.cli.console import err, out, print_json
from orchestrator.cli.results_history_cmd import ARTIFACT_HELP, latest_argument
from orchestrator.cli.results_view import WideOption, render_summary, with_warnings
from orchestrator.errors import BadInput
from orchestrator.judge.summary_model import Summary
from orchestrator.reports.catalog import is_latest
from orchestrator.schemas import SchemaError
from orchestrator.schemas import validate as validate_document
from orchestrator.terminal import markup

results_app = typer.Typer(help="Inspect, validate, compare and archive result artifacts.", no_args_is_help=True)


def _folder(path: Path) -> Path:
    if not path.exists():
        raise BadInput(f"{path}: no such artifact folder")
    return path


def load_summary(folder: Path) -> Summary:
    """The artifact's summary.json, read without following links and schema-checked; BadInput when unusable."""
    return Summary.from_json(summary_document(folder))


def summary_document(folder: Path) -> dict[str, Any]:
    """The artifact's summary.json as the document it is (what ``--json`` prints)."""
    from orchestrator.artifacts.walk import read_bytes_no_follow

    open_artifact(folder)
    try:
        summary = json.loads(read_bytes_no_follow(folder, SUMMARY, 256 << 20))
        validate_document(summary, "summary")
        return summary
    except FileNotFoundError:
        raise BadInput(f"{folder}: no {SUMMARY} (the run may still be in progress)") from None
    except OSError as exc:
        raise BadInput(f"{folder / SUMMARY}: refused ({exc.strerror or exc}; links are never followed)") from None
    except (ValueError, SchemaError, RecursionError) as exc:
        raise BadInput(f"{folder / SUMMARY}: invalid ({exc})") from None


@results_app.command("show")
def show(artifact: Path = typer.Argument(..., help=ARTIFACT_HELP),
         scenario: str | None = typer.Option(None, "--scenario", help="With latest: the newest artifact of this scenario."),
         wide: bool = WideOption,
         as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON, with the artifact's warnings.")) -> None:
    """Print an artifact's runs, statistics, cross-engine ratios and claims (compact; --wide: every column)."""
    from orchestrator.artifacts.archive import artifact_folder
    from orchestrator.artifacts.label import read_label
    from orchestrator.judge.runtime_use import artifact_warnings

    if scenario is not None and not is_latest(artifact):
        raise BadInput(f"--scenario: only with latest (the artifact {artifact} is named)")
    with artifact_folder(_folder(latest_argument(artifact, scenario))) as root:
        document = summary_document(root)
        summary = Summary.from_json(document)
        try:
            label = read_label(root)
        except ValueError as exc:
            label = None
            err.print(f"[yellow]warning[/] {markup(str(exc))}")
        if as_json:
            print_json(with_warnings({**document, **({"label": label} if label else {})}, artifact_warnings(root, summary)))
        else:
            if label:
                out.print(f"label: {markup(label)}")
            render_summary(summary, wide, root)
        warn_integrity(root)


def warn_integrity(folder: Path) -> None:
    """Warnings (stderr) for an artifact that fails validation or was resumed over integrity problems."""
    from orchestrator.artifacts.integrity import read_integrity
    from orchestrator.artifacts.validate import validate_artifact

    problems = validate_artifact(folder)
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        err.print(f"[yellow]warning[/] the artifact does not validate, these results may have been tampered with: "
                  f"{markup(str(problems[0]))}{more} (see 'bench results validate')")
    for override in (read_integrity(folder) or {}).get("overrides", []):
        err.print(f"[yellow]warning[/] {markup(override['action'])} at {markup(override['at'])} overrode "
                  f"{override['problem_count']} integrity problem(s) (see integrity.json)")


@results_app.command("validate")
def validate(artifact: Path = typer.Argument(..., help=ARTIFACT_HELP),
             as_json: bool = typer.Option(False, "--json", help="Print the verdict and the problems found as JSON.")) -> None:
    """Re-check schemas and sha256 of every file; exit 1 if anything is missing, modified or invalid."""
    from orchestrator.artifacts.archive import validate_path

    artifact = latest_argument(artifact)

    if _folder(artifact).is_dir():
        open_artifact(artifact)  # BadInput when the folder is not an artifact at all
    problems = validate_path(artifact)
    if as_json:
        print_json({"artifact": str(artifact), "valid": not problems, "problems": [str(p) for p in problems]})
    elif problems:
        for problem in problems:
            err.print(f"[red]invalid[/] {markup(str(problem))}")
    else:
        out.print(f"[green]valid[/]: {markup(str(artifact))}")
        if artifact.is_dir():
            from orchestrator.artifacts.integrity import read_integrity

            for override in (read_integrity(artifact) or {}).get("overrides", []):
                err.print(f"[yellow]note[/] {markup(override['action'])} at {markup(override['at'])} overrode "
                          f"{override['problem_count']} integrity problem(s) (see integrity.json)")
    raise typer.Exit(1 if problems else 0)
