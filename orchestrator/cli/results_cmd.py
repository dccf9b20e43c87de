"""``bench results``: show and validate artifacts."""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.artifacts import open_artifact
from orchestrator.artifacts.layout import SUMMARY
from orchestrator.cli.console import err, out, print_json
from orchestrator.cli.results_view import render_summary
from orchestrator.errors import BadInput
from orchestrator.jsonio import read_json
from orchestrator.schemas import SchemaError

results_app = typer.Typer(help="Inspect, validate, compare and archive result artifacts.", no_args_is_help=True)


def _folder(path: Path) -> Path:
    if not path.exists():
        raise BadInput(f"{path}: no such artifact folder")
    return path


def load_summary(folder: Path) -> dict:
    open_artifact(folder)
    try:
        return read_json(folder / SUMMARY, "summary")
    except FileNotFoundError:
        raise BadInput(f"{folder}: no {SUMMARY} (the run may still be in progress)") from None
    except (ValueError, SchemaError) as exc:
        raise BadInput(f"{folder / SUMMARY}: invalid ({exc})") from None


@results_app.command("show")
def show(artifact: Path = typer.Argument(..., help="Artifact folder."), as_json: bool = typer.Option(False, "--json")) -> None:
    """Print an artifact's runs, statistics and cross-engine ratios."""
    summary = load_summary(_folder(artifact))
    if as_json:
        print_json(summary)
    else:
        render_summary(summary)


@results_app.command("validate")
def validate(artifact: Path = typer.Argument(..., help="Artifact folder (or .tar.gz archive)."),
             as_json: bool = typer.Option(False, "--json")) -> None:
    """Re-check schemas and sha256 of every file; exit 1 if anything is missing, modified or invalid."""
    from orchestrator.artifacts.archive import validate_path

    if _folder(artifact).is_dir():
        open_artifact(artifact)  # BadInput when the folder is not an artifact at all
    problems = validate_path(artifact)
    if as_json:
        print_json({"artifact": str(artifact), "valid": not problems, "problems": [str(p) for p in problems]})
    elif problems:
        for problem in problems:
            err.print(f"[red]invalid[/] {problem}")
    else:
        out.print(f"[green]valid[/]: {artifact}")
    raise typer.Exit(1 if problems else 0)


def register(app: typer.Typer) -> None:
    app.add_typer(results_app, name="results")
