"""``bench results list | history``: the artifacts of a results folder, newest first, and one metric of a scenario's
cells across its artifacts over time (added to the ``results`` group of results_cmd).

``latest`` (``latest~N``, ``SCENARIO/latest``, ``DIR/latest``) names the newest usable artifact wherever the other
``results`` commands take one (:func:`orchestrator.reports.catalog.resolve_latest`).
"""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.cli.console import err, out, print_json
from orchestrator.cli.results_view import WideOption, print_warnings, rich_table
from orchestrator.errors import BadInput
from orchestrator.reports.catalog import Listed, resolve_latest, scan
from orchestrator.reports.model import Table
from orchestrator.reports.views import Field, view
from orchestrator.terminal import markup

ARTIFACT_HELP = "Artifact folder (or .tar.gz archive); latest: the newest usable one (latest~1 the one before, SCENARIO/latest)."
ValidateOption = typer.Option(False, "--validate", help="Re-check every file's sha256 and schema (as 'bench results validate'; "
                              "slower). By default the manifest, summary and label are checked.")


def results_folder(folder: Path | None) -> Path:
    from orchestrator.paths import default_results_dir

    return folder if folder is not None else default_results_dir()


def latest_argument(path: Path, scenario: str | None = None) -> Path:
    """An artifact argument with ``latest`` resolved (said on stderr), else as given."""
    resolved = resolve_latest(path, scenario)
    if resolved is not path:
        err.print(f"[dim]{markup(str(path))}: {markup(str(resolved))}[/]")
    return resolved


def state(entry: Listed) -> str:
    """ok | incomplete (interrupted, or runs still in progress) | invalid."""
    if entry.usable:
        return "ok" if entry.complete is not False else "incomplete"
    return "incomplete" if entry.complete is False and entry.summary is None and entry.problems == 1 else "invalid"


def note(entry: Listed) -> str | None:
    parts = []
    if entry.summary is not None and entry.summary.smoke:
        parts.append("smoke")
    if entry.archive:
        parts.append("archive")
    if entry.usable and entry.complete is False:
        parts.append("interrupted: 'bench scenario resume' completes it")
    if entry.problem:
        parts.append(entry.problem + (f" (+{entry.problems - 1} more)" if entry.problems > 1 else ""))
    return "; ".join(parts) or None


def list_table(entries: list[Listed], title: str, wide: bool) -> Table:
    """One row per artifact: scenario, time, id, state, runs ok/total, engines, GPU, label, note."""
    one_year = len({e.time.year for e in entries if e.time}) <= 1
    fields = [Field("scenario", lambda e: e.scenario, fold=str),
              Field("time (UTC)", lambda e: e.time, lambda t: t.strftime("%Y-%m-%d %H:%M") if t else "-", short="time",
                    compact_fmt=lambda t: (t.strftime("%m-%d %H:%M") if one_year else t.strftime("%Y-%m-%d %H:%M")) if t else "-"),
              Field("id", lambda e: e.artifact_id),
              Field("state", state, status=True),
              Field("runs ok/total", lambda e: "{}/{}".format(*e.runs) if e.runs else None, short="runs"),
              Field("engines", lambda e: ", ".join(e.engines) or None),
              Field("GPU", lambda e: e.gpu, fold=lambda t: "no GPU" if t == "-" else t, wrap=True),
              Field("label", lambda e: e.label, lambda v: v or "", clip=True),
              Field("note", note, lambda v: v or "", clip=True),
              Field("path", lambda e: str(e.path), wide_only=True)]
    if not wide:  # a compact table leaves out a label or note column that no row fills, and the state when all are ok
        fields = [f for f in fields if (f.header not in ("label", "note") or any(f.cell(e) for e in entries))
                  and (f.header != "state" or any(state(e) != "ok" for e in entries))]
    return view("artifacts", title, fields, entries, wide)


def list_artifacts(folder: Path | None = typer.Argument(None, help="Results folder (default: bench's results/), a scenario "
                                                       "folder in it, an artifact or an archive."),
                   scenario: str | None = typer.Option(None, "--scenario", help="Only this scenario's artifacts."),
                   validate: bool = ValidateOption,
                   wide: bool = WideOption,
                   as_json: bool = typer.Option(False, "--json", help="Print the artifacts as JSON.")) -> None:
    """List the artifacts of a results folder, newest first: scenario, time, id, runs ok/total, engines, GPU, label; an
    artifact that cannot be used is listed with its problem (its archive under archives/ too)."""
    root = results_folder(folder)
    entries = scan(root, scenario, validate) if folder is not None or root.exists() else []  # no results/ yet: none
    if as_json:
        print_json({"folder": str(root), "scenario": scenario, "artifacts": [e.to_json() for e in entries]})
        return
    if not entries:
        err.print(f"no artifacts under {markup(str(root))}" + (f" for scenario {markup(scenario)}" if scenario else ""))
        return
    usable = sum(1 for e in entries if e.usable)
    title = f"{len(entries)} artifact(s) under {root}, newest first" + (f"; {len(entries) - usable} unusable" if usable < len(entries) else "")
    out.print(rich_table(list_table(entries, title, wide), wide))


def _csv(values: list[str] | None) -> tuple[str, ...]:
    return tuple(v.strip() for value in values or [] for v in value.split(",") if v.strip())


def _ints(values: list[str] | None, option: str) -> tuple[int, ...]:
    items = _csv(values)
    if not all(v.isdigit() and int(v) > 0 for v in items):
        raise BadInput(f"{option}: {', '.join(items)} is not a list of positive integers")
    return tuple(int(v) for v in items)


def _output(path: Path | None, option: str, suffixes: tuple[str, ...]) -> Path | None:
    """An output file for --plot/--html: its suffix one of ``suffixes`` and its folder there."""
    if path is None:
        return None
    if path.suffix.lower() not in suffixes:
        raise BadInput(f"{option} {path}: the file name ends in {' or '.join(suffixes)}")
    if path.is_dir():
        raise BadInput(f"{option} {path}: a folder, not a file")
    if not path.resolve().parent.is_dir():
        raise BadInput(f"{option} {path}: no such folder {path.resolve().parent}")
    return path


def history(scenario: str = typer.Argument(..., help="The scenario whose artifacts to follow."),
            folder: Path | None = typer.Option(None, "--dir", help="Results folder (default: bench's results/)."),
            metric: str = typer.Option("throughput", "--metric", help="throughput | energy | power | setup | warmup | tflops."),
            engine: list[str] = typer.Option(None, "--engine", help="Only these engines (comma-separated or repeated)."),
            precision: list[str] = typer.Option(None, "--precision", help="Only these precisions."),
            path: list[str] = typer.Option(None, "--path", help="Only these paths (optimized, fair ...)."),
            batch: list[str] = typer.Option(None, "--batch", help="Only these per-device batch sizes."),
            devices: list[str] = typer.Option(None, "--devices", help="Only these device counts."),
            plot: Path | None = typer.Option(None, "--plot", help="Write the plot to this .png or .svg file."),
            html: Path | None = typer.Option(None, "--html", help="Write a self-contained HTML page (table, plot, version changes)."),
            validate: bool = ValidateOption,
            wide: bool = WideOption,
            as_json: bool = typer.Option(False, "--json", help="Print the history as JSON.")) -> None:
    """One metric of every cell (engine, precision, path, batch, devices) across the scenario's artifacts, oldest first:
    the median and spread per artifact, its framework version and label, and the change against the cell's previous
    artifact (e.g. PyTorch 2.10.0 -> 2.11.0: +4.0%)."""
    from orchestrator.reports.history import METRICS, Filters, load_history
    from orchestrator.reports.history_views import history_table

    if metric not in METRICS:
        raise BadInput(f"--metric: '{metric}' is not one of {', '.join(METRICS)}")
    filters = Filters(_csv(engine), _csv(precision), _csv(path), _ints(batch, "--batch"), _ints(devices, "--devices"))
    plot_file = _output(plot, "--plot", (".png", ".svg"))
    html_file = _output(html, "--html", (".html", ".htm"))
    root = results_folder(folder)
    doc = load_history(root, scenario, METRICS[metric], filters, validate)
    if not doc.artifacts and not doc.skipped and not scan(root, scenario):
        raise BadInput(f"{scenario}: no artifacts of this scenario under {root} (see 'bench results list')")
    if plot_file is not None or html_file is not None:
        from orchestrator.reports.plots import matplotlib_available

        ok, why = matplotlib_available()
        if plot_file is not None and not ok:
            raise BadInput(f"--plot: {why}")
    if plot_file is not None:
        from orchestrator.reports.history_views import write_plot

        write_plot(doc, plot_file)
    if html_file is not None:
        from orchestrator.clock import utc_now
        from orchestrator.jsonio import write_text_atomic
        from orchestrator.reports.history_views import render_history_html

        write_text_atomic(html_file, render_history_html(doc, utc_now()))
    if as_json:
        print_json({**doc.to_json(), "plot": str(plot_file) if plot_file else None, "html": str(html_file) if html_file else None})
        return
    if not doc.points:
        err.print(f"no {markup(metric)} to show: none of the {len(doc.artifacts) + len(doc.skipped)} artifact(s) of {markup(scenario)} "
                  "has a matching usable cell")
    else:
        out.print(rich_table(history_table(doc, wide), wide))
    for where, why in doc.skipped:
        err.print(f"[yellow]left out[/] {markup(where)}: {markup(why)}")
    print_warnings(list(doc.warnings))
    for kind, written in (("plot", plot_file), ("html", html_file)):
        if written is not None:
            err.print(f"{kind}: {markup(str(written))}")
