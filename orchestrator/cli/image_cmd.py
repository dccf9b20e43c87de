"""``bench image``: build, list, inspect and bump the pinned engine images."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from orchestrator.cli.console import err, out, print_json
from orchestrator.cli.results_view import WideOption, rich_table
from orchestrator.errors import BadInput
from orchestrator.reports.formats import DASH
from orchestrator.reports.model import Table
from orchestrator.reports.views import Field, view
from orchestrator.terminal import markup

if TYPE_CHECKING:
    from orchestrator.imagebuild.lock import LockEntry

image_app = typer.Typer(help="Build, list, inspect and bump the engines' pinned container images.", no_args_is_help=True)

LockOption = typer.Option(None, "--lock", help="Lock file to read/write (default: images/images.lock.json; env BENCH_IMAGES_LOCK).")
RequirePinned = typer.Option(False, "--require-pinned", help="Refuse a base that is not pinned by a sha256 digest (exit 2).")
NoCache = typer.Option(False, "--no-cache", help="Do not reuse the builder's cache.")
Quiet = typer.Option(False, "--quiet", "-q", help="Do not echo the build output (progress only).")
AsJson = typer.Option(False, "--json", help="Print as JSON.")


def _use_lock(lock: Path | None) -> None:
    if lock is not None:
        os.environ["BENCH_IMAGES_LOCK"] = str(lock.resolve())


class RichBuildReporter:
    """Streams the builder's output above a progress bar of the Dockerfile's steps."""

    def __init__(self, engine: str, quiet: bool) -> None:
        self.engine, self.quiet = engine, quiet
        self.progress = Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=err, transient=True)
        self.task = self.progress.add_task(f"{engine}: preparing", total=None)

    def __enter__(self) -> RichBuildReporter:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def note(self, message: str) -> None:
        self.progress.console.print(f"[cyan]{markup(self.engine)}[/]: {markup(message)}")

    def line(self, text: str) -> None:
        if not self.quiet and text.strip():
            self.progress.console.print(markup(text), style="dim", highlight=False, soft_wrap=True)

    def step(self, number: int, total: int, instruction: str) -> None:
        short = instruction if len(instruction) <= 48 else instruction[:45] + "..."
        self.progress.update(self.task, total=total, completed=number - 1, description=f"{self.engine} {markup(short)}")


def _summary(entry: LockEntry) -> str:
    base = entry.base
    return (f"[green]built[/] {markup(entry.image)} = {markup(entry.image_id)}\n"
            f"  base {markup(base.ref)}" + (f" ({markup(base.digest)})" if base.digest and base.digest not in base.ref else "")
            + ("" if base.pinned else " [yellow](not pinned by digest)[/]") + "\n"
            + markup(f"  {entry.framework or 'framework'} {entry.framework_version}, CUDA {entry.cuda or '-'}, "
                     f"cuDNN {entry.cudnn or '-'}, Python {entry.python}, engine library {entry.engine_version}"))


@image_app.command("build")
def build(
    engine: str = typer.Argument(None, help="Engine to build (default: every engine with an image)."),
    base: str = typer.Option(None, "--base", help="Base image reference (default: image.yaml's pinned base)."),
    require_pinned: bool = RequirePinned,
    no_cache: bool = NoCache,
    lock: Path = LockOption,
    quiet: bool = Quiet,
    as_json: bool = AsJson,
) -> None:
    """Build engine images, read their framework/CUDA/cuDNN versions from inside, and record them in the lock."""
    from orchestrator.imagebuild.build import build_engine_image
    from orchestrator.imagebuild.metadata import get_image_meta, image_engines

    _use_lock(lock)
    if engine is None and base:
        raise BadInput("--base: name the ENGINE whose base it is (bench image build ENGINE --base REF)")
    engines = [get_image_meta(engine).engine] if engine else sorted(image_engines())
    entries = []
    for name in engines:
        with RichBuildReporter(name, quiet or as_json) as reporter:
            built = build_engine_image(name, base, pinned_only=require_pinned, nocache=no_cache, reporter=reporter)
        entries.append(built.entry.to_json())
        if not as_json:
            err.print(_summary(built.entry))
            err.print(f"  recorded in {markup(built.lock)}")
    if as_json:
        print_json(entries if engine is None else entries[0])


@image_app.command("bump")
def bump(
    engine: str = typer.Argument(..., help="Engine whose base to move to a new framework release."),
    base: str = typer.Option(..., "--base", help="The new base reference (name:tag[@sha256:digest])."),
    require_pinned: bool = RequirePinned,
    no_cache: bool = NoCache,
    lock: Path = LockOption,
    quiet: bool = Quiet,
    as_json: bool = AsJson,
) -> None:
    """Update the pinned base of ENGINE (image.yaml + Dockerfile), rebuild, and record the new image."""
    from orchestrator.imagebuild.bump import bump_engine_image

    _use_lock(lock)
    with RichBuildReporter(engine, quiet or as_json) as reporter:
        built = bump_engine_image(engine, base, pinned_only=require_pinned, nocache=no_cache, reporter=reporter)
    if as_json:
        print_json(built.entry.to_json())
        return
    err.print(_summary(built.entry))
    err.print(f"  recorded in {markup(built.lock)}; images/{engine}/image.yaml and Dockerfile updated (commit them with the lock)")


@image_app.command("list")
def list_cmd(lock: Path = LockOption, wide: bool = WideOption, as_json: bool = AsJson) -> None:
    """Engines with images: default base, built and locked image ids, framework/CUDA/cuDNN versions."""
    from orchestrator.imagebuild.inspect import image_rows

    _use_lock(lock)
    rows = [row.to_json() for row in image_rows()]
    if as_json:
        print_json(rows)
        return
    out.print(rich_table(images_table(rows, wide), wide))


def _image_id(image_id: str | None, length: int) -> str:
    return (image_id or DASH)[:length]


def images_table(rows: list[dict[str, Any]], wide: bool) -> Table:
    """Engine images: status, local and locked image ids, base, versions (compact: the local id, framework and CUDA)."""
    fields = [Field("engine", lambda r: r["engine"]), Field("status", lambda r: r["status"], status=True),
              Field("local image", lambda r: r["local_image_id"], lambda i: _image_id(i, 19), lambda i: _image_id(i, 19)),
              Field("locked image", lambda r: r["locked_image_id"], lambda i: _image_id(i, 19), wide_only=True),
              Field("built from", lambda r: r["built_from"] or DASH, wide_only=True),
              Field("framework", lambda r: r["framework_version"] or DASH), Field("CUDA", lambda r: r["cuda"] or DASH),
              Field("cuDNN", lambda r: r["cudnn"] or DASH, wide_only=True),
              Field("default base", lambda r: r["default_base"] + ("" if r["default_base_pinned"] else " (unpinned)"), wide_only=True)]
    return view("images", "engine images", fields, rows, wide)


@image_app.command("inspect")
def inspect_cmd(engine: str = typer.Argument(..., help="Engine whose image to describe."), lock: Path = LockOption, as_json: bool = AsJson) -> None:
    """Everything known about ENGINE's image: metadata, lock entry, the local image and its labels."""
    from orchestrator.imagebuild.inspect import inspect_image

    _use_lock(lock)
    facts = inspect_image(engine).to_json()
    if as_json:
        print_json(facts)
        return
    out.print(f"[bold]{facts['engine']}[/]  {facts['image']}  [{'green' if facts['status'] == 'built' else 'yellow'}]{markup(facts['status'])}[/]")
    out.print(f"  default base  {markup(facts['default_base'])}" + ("" if facts["default_base_pinned"] else " [yellow](not pinned by digest)[/]"))
    if not facts["metadata_consistent"]:
        out.print(f"  [red]Dockerfile ARG BASE differs:[/] {markup(str(facts['dockerfile_arg_base']))}")
    out.print(f"  note          {markup(facts['base_note'])}")
    out.print(f"  provides      {markup(str(facts['provides']))}")
    entry = facts["lock"]
    if entry:
        out.print(f"  locked        {entry['image_id']}  built {entry['built_at']} from {markup(entry['base']['ref'])}")
        out.print(markup(f"                {entry.get('framework')} {entry.get('framework_version')}, CUDA {entry.get('cuda') or '-'}, "
                         f"cuDNN {entry.get('cudnn') or '-'}, Python {entry.get('python')}, revision {entry.get('source_revision')}"))
    else:
        out.print(f"  locked        - (not in {markup(facts['lock_file'])})")
    local = facts["local"]
    if local:
        out.print(markup(f"  local         {local['id']}  created {local['created']}  user {local['user']}  entrypoint {local['entrypoint']}"))
        for key, value in sorted(local["labels"].items()):
            out.print(f"    {markup(key)} = {markup(str(value))}")
    elif facts.get("daemon"):
        out.print(f"  local         unknown: {markup(facts['daemon'])}")
    else:
        out.print(f"  local         not built (run 'bench image build {facts['engine']}')")
