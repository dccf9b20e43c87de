"""``bench data``: prepare datasets once into the canonical cache, and list what is prepared."""

from __future__ import annotations

import re
from typing import Any

import typer

from orchestrator.cli.console import err, out, print_json
from orchestrator.cli.results_view import WideOption, rich_table
from orchestrator.errors import BadInput
from orchestrator.reports.model import Table
from orchestrator.reports.views import Field, view
from orchestrator.terminal import markup

data_app = typer.Typer(help="Datasets: prepare real or synthetic data once into the canonical cache ($BENCH_DATA_DIR); list it.",
                       no_args_is_help=True)


def _size(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    match = re.fullmatch(r"\s*(\d+)\s*(?:[xX]\s*(\d+)\s*)?", value)
    if not match or int(match.group(1)) < 1 or (match.group(2) and int(match.group(2)) < 1):
        raise BadInput(f"--size: {value!r} is not N or HxW")
    height = int(match.group(1))
    return height, int(match.group(2) or height)


@data_app.command("prepare")
def prepare(
    name: str = typer.Argument(..., help="Dataset name: cifar10 or imagenet, or any name with --source synthetic (32x32x3, 10 classes unless --size)."),
    source: str | None = typer.Option(None, "--source", help="PATH or URL of the archive (cifar10; default: the official URL), "
                                      "a FOLDER of class subfolders (imagenet), or 'synthetic'."),
    sha256: str | None = typer.Option(None, "--sha256", help="Expected sha256 of the archive (a mirror or a local copy); default: the published one."),
    size: str | None = typer.Option(None, "--size", help="Image size for a folder or synthetic data: N or HxW (default: the dataset's, 224 for imagenet)."),
    samples: int | None = typer.Option(None, "--samples", min=1, max=2_000_000_000,
                                       help="Samples per split: synthetic sizes, or the first N images of a folder."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of synthetic data (scenarios use workload.seed)."),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """Verify, convert and cache a dataset (train and test splits, content-hashed); a second run is instant."""
    from orchestrator.data.registry import get_dataset
    from orchestrator.data.sources import prepare_named

    info = get_dataset(name, "dataset", synthetic=source == "synthetic")
    geometry = info.geometry
    hw = _size(size)
    if hw is not None:
        if info.fixed_geometry and source != "synthetic" and hw != info.geometry[:2]:
            raise BadInput(f"--size: {name} images are {info.geometry[0]}x{info.geometry[1]}; --size applies to folders and synthetic data")
        geometry = (*hw, info.geometry[2])
    document = prepare_named(name, source, sha256, geometry, samples, seed)
    if as_json:
        print_json(document)
        return
    state = "already prepared" if document["cached"] else "prepared"
    kind = "synthetic" if document["synthetic"] else "real"
    out.print(f"[green]{state}[/] {markup(name)} ({kind}, {'x'.join(map(str, document['geometry']))}, {document['num_classes']} classes) "
              f"in {markup(document['path'])}")
    if document["sha256"]:
        out.print(f"  source sha256 {document['sha256']} ({markup(document['source'].get('verified', ''))})")
    for split, entry in document["splits"].items():
        counts = document["class_counts"][split].values()
        out.print(f"  {split}: {entry['samples']:,} samples, {sum(1 for c in counts if c)} classes "
                  f"({min(counts):,}..{max(counts):,} per class), sha256 {entry['sha256'][:12]}")


@data_app.command("list")
def list_(wide: bool = WideOption, as_json: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """Show the prepared splits in the cache: name, split, samples, sha256, synthetic or real, path."""
    from orchestrator.data.store import dataset_cache_root, list_splits

    rows = [{
        "name": row.meta.about.name, "split": row.meta.about.split, "samples": row.meta.samples, "shape": list(row.meta.shape),
        "sha256": row.meta.sha256, "synthetic": row.meta.about.synthetic,
        "subset_of": row.meta.about.subset_of.sha256 if row.meta.about.subset_of is not None else None,
        "prepared": row.prepared, "path": str(row.path),
    } for row in list_splits()]
    if as_json:
        print_json({"cache": str(dataset_cache_root()), "splits": rows})
        return
    if not rows:
        err.print(f"no datasets prepared in {markup(str(dataset_cache_root()))} (bench data prepare NAME)")
        return
    out.print(rich_table(splits_table(rows, f"datasets in {dataset_cache_root()}", wide), wide))


def _kind(row: dict[str, Any]) -> str:
    """'synthetic', 'real (prepared)', 'real (first 1,000 of 0123456789ab)'."""
    kind = "synthetic" if row["synthetic"] else "real"
    if row["subset_of"]:
        return kind + f" (first {row['samples']:,} of {row['subset_of'][:12]})"
    return kind + (" (prepared)" if row["prepared"] else "")


def splits_table(rows: list[dict[str, Any]], title: str, wide: bool) -> Table:
    """The prepared splits: name, split, samples, shape, kind, sha256 (12 digits), path (--wide)."""
    fields = [Field("name", lambda r: r["name"]), Field("split", lambda r: r["split"]), Field("samples", lambda r: f"{r['samples']:,}"),
              Field("shape", lambda r: "x".join(map(str, r["shape"] or []))), Field("kind", _kind, wrap=True),
              Field("sha256", lambda r: r["sha256"][:12]), Field("path", lambda r: r["path"], wide_only=True)]
    return view("splits", title, fields, rows, wide)
