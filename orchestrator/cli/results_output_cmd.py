"""``bench results compare | report | archive | publish``: what is made from artifacts (a comparison, a report,
an archive, a published copy), added to the ``results`` group of results_cmd.

Artifacts are given as folders or as ``.tar.gz`` archives (extracted safely into a temporary folder).
A missing, unreadable or invalid artifact (schemas, sha256) is bad input: one line, exit code 2.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from orchestrator.cli.console import err, out, print_json
from orchestrator.cli.results_history_cmd import ARTIFACT_HELP, latest_argument
from orchestrator.cli.results_view import WideOption, print_warnings, rich_table
from orchestrator.errors import BadInput
from orchestrator.judge.compare import DIRECTION, Comparison, GroupChange
from orchestrator.judge.environment_diff import EnvironmentDiff
from orchestrator.judge.summary_model import GROUP_KEYS, Summary
from orchestrator.reports.formats import PVALUE, RATE, Span, number, span
from orchestrator.reports.model import Table as ReportTable
from orchestrator.reports.views import Field, batch_label, devices_label, grouped_notes, interval_heading, view
from orchestrator.terminal import markup


@contextlib.contextmanager
def _checked_artifact(path: Path, label: str) -> Iterator[Path]:
    """The artifact at ``path`` as a folder, validated (BadInput, exit 2, when missing or invalid)."""
    from orchestrator.artifacts.archive import artifact_folder
    from orchestrator.artifacts.validate import validate_artifact

    if not path.exists():
        raise BadInput(f"{label} {path}: no such artifact folder or archive")
    with artifact_folder(path) as root:
        problems = validate_artifact(root)
        if problems:
            more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
            raise BadInput(f"{label} {path}: invalid artifact: {problems[0]}{more} (see 'bench results validate')")
        yield root


def _summary(root: Path, path: Path) -> Summary:
    from orchestrator.cli.results_cmd import load_summary

    try:
        return load_summary(root)
    except BadInput as exc:
        raise BadInput(str(exc).replace(str(root), str(path))) from None


def _interval(group: GroupChange) -> Span | None:
    """The ratio's bootstrap 95% CI, or with too few repeats for one, its range."""
    c = group.comparison
    if c is None:
        return None
    return Span.of(c.ci95, "ci95") if c.ci95 else Span.of(c.range, "range")


def _cell(group: GroupChange, key: str) -> Any:
    return group.key[GROUP_KEYS.index(key)]


def comparison_table(doc: Comparison, wide: bool = False) -> ReportTable:
    """The groups of a comparison in the shared table model (the verdict column coloured like a status)."""
    direction = DIRECTION if wide else "B/A = median samples/s of B / median of A; above 1 means B is faster"
    notes = [direction + f"; significant: Mann-Whitney U p < {doc.alpha:g}"
             + (f"; no change: |change| < {doc.min_change_pct:g}%" if doc.min_change_pct else "")]
    header, compact_span = interval_heading([_interval(g) for g in doc.groups], number(".3f"))
    fields = [Field("engine", lambda g: _cell(g, "engine")), Field("precision", lambda g: _cell(g, "precision"), short="prec"),
              Field("path", lambda g: _cell(g, "path"), fold=str), Field("batch", lambda g: _cell(g, "batch_per_device"), fold=batch_label),
              Field("dev", lambda g: _cell(g, "devices"), fold=devices_label),
              Field("n A", lambda g: g.n_a, wide_only=True), Field("n B", lambda g: g.n_b, wide_only=True),
              Field("n A/B", lambda g: f"{g.n_a}/{g.n_b}", compact_only=True),
              Field("median A", lambda g: g.median_a, RATE, wide_only=True), Field("median B", lambda g: g.median_b, RATE, wide_only=True),
              Field("B/A", lambda g: g.ratio, number(".3f", "x")),
              Field("interval", _interval, span(".3f", sep="-"), compact_span, short=header),
              Field("change", lambda g: g.change_pct, number("+.1f", "%"), wide_only=True),
              Field("p", lambda g: g.comparison.test.p_value if g.comparison else None, PVALUE),
              Field("verdict", lambda g: g.verdict, compact_fmt=lambda v: v.split(" (")[0], status=True, clip=True)]
    return view("compare", "B relative to A: steady-state throughput", fields, list(doc.groups), wide, notes)


def _label(key: tuple[Any, ...]) -> str:
    engine, precision, path, batch, devices = key
    return f"{engine} {precision} {path} b{batch} x{devices}"


def _render_comparison(doc: Comparison, wide: bool) -> None:
    a, b = doc.a, doc.b
    out.print(f"A: {markup(a.artifact)} ({markup(a.scenario)} {markup(a.artifact_id)})")
    out.print(f"B: {markup(b.artifact)} ({markup(b.scenario)} {markup(b.artifact_id)})")
    out.print(rich_table(comparison_table(doc, wide), wide))
    for note in grouped_notes(((_label(g.key), g.comparison.test.note if g.comparison else None) for g in doc.groups), "group"):
        err.print(f"[yellow]note[/] {markup(note)}")
    for side, only in (("A", doc.only_in_a), ("B", doc.only_in_b)):
        for key, _runs in only:
            err.print(markup(f"only in {side}: {_label(key)}"))
    print_warnings(list(doc.warnings))


def compare(a: Path = typer.Argument(..., help="Baseline artifact A (folder or .tar.gz; latest~1, SCENARIO/latest ...)."),
            b: Path = typer.Argument(..., help="Artifact B compared with A (folder or .tar.gz; latest ...)."),
            alpha: float = typer.Option(0.05, "--alpha", min=0.0001, max=0.5, help="Significance level of the Mann-Whitney U test."),
            min_change: str = typer.Option("2%", "--min-change", help="Minimum effect: a smaller change of the median throughput is "
                                           "reported as 'no change', significant or not (2% or 2; 0 turns it off)."),
            wide: bool = WideOption,
            as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON.")) -> None:
    """Per matching engine/precision/path/batch/devices group: median throughput ratio B/A (above 1: B is faster),
    its bootstrap 95% interval and whether the difference is significant (Mann-Whitney U over the repeats);
    then what differs in the environments (framework versions, images, driver, GPU clocks, host CPU). Runtimes or
    images that differ within A, within B or between them are warnings (in --json: the ``warnings`` list)."""
    from orchestrator.judge.compare import compare_summaries, parse_percent
    from orchestrator.judge.environment_diff import environment, environment_diff
    from orchestrator.judge.runtime_use import between_warnings, mixed_warnings, runtime_uses

    threshold = parse_percent(min_change)
    a, b = latest_argument(a), latest_argument(b)
    with _checked_artifact(a, "A") as root_a, _checked_artifact(b, "B") as root_b:
        summary_a, summary_b = _summary(root_a, a), _summary(root_b, b)
        env = environment_diff(environment(root_a, summary_a), environment(root_b, summary_b))
        doc = compare_summaries(summary_a, summary_b, str(a), str(b), alpha=alpha, min_change_pct=threshold, environment=env)
        uses_a, uses_b = runtime_uses(root_a, summary_a), runtime_uses(root_b, summary_b)
    doc = dataclasses.replace(doc, warnings=(*doc.warnings, *mixed_warnings(uses_a, "A's"), *mixed_warnings(uses_b, "B's"),
                                             *between_warnings(uses_a, uses_b)))
    if as_json:
        print_json(doc.to_json())
    else:
        _render_comparison(doc, wide)
        _render_environment(env, wide)


def blank_dash(value: Any) -> str:
    return "-" if value in (None, "") else str(value)


def environment_table(env: EnvironmentDiff, wide: bool = False) -> ReportTable:
    """The facts that differ between A and B: scope (artifact or engine), fact, A's value, B's value."""
    fields = [Field("scope", lambda d: d.scope), Field("fact", lambda d: d.key),
              Field("A", lambda d: d.a, blank_dash, wrap=True), Field("B", lambda d: d.b, blank_dash, wrap=True)]
    return view("environment", "environment and optimizations: what differs (A -> B)", fields, list(env.differences), wide)


def _render_environment(env: EnvironmentDiff, wide: bool) -> None:
    """The metadata diff: only the facts that differ, or 'same environment'."""
    if env.same:
        engines = ", ".join(env.engines)
        out.print(markup("environment: same environment and optimizations (bench, host, driver, GPUs" + (f", {engines}" if engines else "") + ")"))
        return
    out.print(rich_table(environment_table(env, wide), wide))


def report(artifact: Path = typer.Argument(..., help=ARTIFACT_HELP),
           html: bool = typer.Option(False, "--html", help="Also write a self-contained HTML page with plots."),
           out_dir: Path | None = typer.Option(None, "--out", help="Output folder (default: <results>/reports/<scenario>/<artifact-id>-report "
                                                "for the artifact <results>/<scenario>/<artifact-id>, never among the artifacts)."),
           as_published: Path | None = typer.Option(None, "--as-published", help="A second artifact that ran the claims' own protocol "
                                                    "(e.g. scenarios/opennn_seed_as_published.yaml): the claims table shows claimed, as "
                                                    "published and fair."),
           history: bool = typer.Option(False, "--history", help="Add to report.html (implies --html) the throughput history of "
                                        "the scenario's artifacts in the same results folder (as 'bench results history')."),
           as_json: bool = typer.Option(False, "--json", help="Print the written files as JSON.")) -> None:
    """Write a Markdown report (runs, statistics, ratios, claims, setup/warmup, telemetry, environment), runs.csv and
    groups.csv, and with --html report.html. The artifacts themselves are never modified."""
    from orchestrator.reports import build_report, default_report_dir, load_report_data

    artifact = latest_argument(artifact)
    as_published = latest_argument(as_published) if as_published is not None else None
    with _checked_artifact(artifact, "artifact") as root, contextlib.ExitStack() as stack:
        data = load_report_data(root, str(artifact))
        if as_published is not None:
            other = stack.enter_context(_checked_artifact(as_published, "--as-published"))
            data.as_published = load_report_data(other, str(as_published))
            if data.claims is None:
                raise BadInput(f"--as-published {as_published}: artifact {artifact}'s scenario has no claims to compare")
        target = out_dir or default_report_dir(artifact, data.summary.scenario, data.artifact_id)
        around = None
        if history:
            from orchestrator.artifacts.layout import results_root
            from orchestrator.reports.history import METRICS, load_history

            around = load_history(results_root(artifact, data.summary.scenario), data.summary.scenario, METRICS["throughput"])
        written = build_report(data, target, html=html or history, artifact_root=artifact if artifact.is_dir() else None,
                               history=around)
    if as_json:
        print_json({"artifact": str(artifact), "out": str(target.resolve()), "files": {k: str(v) for k, v in written.items()}})
        return
    out.print(f"report: {markup(str(target.resolve()))}")
    for kind, path in written.items():
        if not kind.startswith("png:"):
            out.print(f"  {kind}: {markup(str(path))}")


def archive(artifact: Path = typer.Argument(..., help="Artifact folder."),
            out_file: Path | None = typer.Option(None, "--out", help="Archive file (default: <results>/archives/<scenario>/<artifact-id>.tar.gz "
                                                 "for the artifact <results>/<scenario>/<artifact-id>, never among the artifacts)."),
            force: bool = typer.Option(False, "--force", help="Replace an existing archive."),
            as_json: bool = typer.Option(False, "--json", help="Print the archive's path, size and sha256 as JSON.")) -> None:
    """Write the artifact folder (manifest and every listed file) as a .tar.gz, after validating it."""
    from orchestrator.artifacts.archive import create_archive
    from orchestrator.artifacts.manifest import file_sha256

    artifact = latest_argument(artifact)
    if not artifact.is_dir():
        raise BadInput(f"{artifact}: no such artifact folder")
    written = create_archive(artifact, out_file, force=force)
    digest = file_sha256(written)
    if as_json:
        print_json({"artifact": str(artifact), "archive": str(written), "bytes": written.stat().st_size, "sha256": digest})
    else:
        out.print(f"archive: {markup(str(written))} ({written.stat().st_size:,} bytes, sha256 {digest})")


def publish(artifact: Path = typer.Argument(..., help=ARTIFACT_HELP),
            out_root: Path = typer.Option(..., "--out", help="Folder to hold the copy (<out>/<artifact-id>)."),
            as_json: bool = typer.Option(False, "--json", help="Print the copy's path and size as JSON.")) -> None:
    """Copy a valid artifact without bench's shared initial weights (re-made from the seed), for publishing: its
    manifest lists them as omitted with their sha256, and the copy validates like the original."""
    from orchestrator.artifacts.archive import artifact_folder
    from orchestrator.artifacts.publish import publish as publish_copy

    artifact = latest_argument(artifact)
    with artifact_folder(artifact) as root:  # an archive is extracted safely first, like every results verb
        target = publish_copy(root, out_root)
    size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    if as_json:
        print_json({"artifact": str(artifact), "copy": str(target), "bytes": size})
    else:
        out.print(f"published copy: {markup(str(target))} ({size:,} bytes; shared initial weights omitted)")
