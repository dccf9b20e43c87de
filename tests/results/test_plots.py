"""The report's plots: one colour per engine in every plot (PNG and SVG alike), repeats as a median band, one legend entry per group."""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator.judge.summary_model import ScalingRow
from orchestrator.reports import plots
from orchestrator.reports.data import load_report_data
from orchestrator.reports.styles import ENGINE_COLOURS, PALETTE, engine_colours, precision_linestyles

pytest.importorskip("matplotlib")

RUNS = {("pytorch", "bf16"): [100.0, 104.0, 98.0], ("pytorch", "fp32"): [50.0, 51.0, 49.0],
        ("jax", "bf16"): [180.0, 185.0, 178.0], ("jax", "fp32"): [60.0, None, 61.0]}
TWELVE = {(engine, precision): [100.0 + i for i in range(12)] for engine in ("pytorch", "jax") for precision in ("bf16", "fp32")}


def tagged(figure: Any) -> list[tuple[str, str, str, Any]]:
    """(engine, precision, role, artist) of every data artist of a figure (its gid: plot/engine/precision/role/n)."""
    found = []
    for artist in figure.findobj(lambda a: bool(a.get_gid())):
        _plot, engine, precision, role, _n = artist.get_gid().split("/")
        found.append((engine, precision, role, artist))
    return found


def colour_of(artist: Any) -> str:
    """A line's colour, or the (first) face colour of a patch or collection, as #rrggbb."""
    import numpy as np
    from matplotlib.colors import to_hex

    if not hasattr(artist, "get_facecolor"):  # Line2D
        return to_hex(artist.get_color())
    return to_hex(np.atleast_2d(artist.get_facecolor())[0])


def legend_labels(figure: Any) -> list[str]:
    legends = [*figure.legends, *(ax.get_legend() for ax in figure.axes if ax.get_legend())]
    return [text.get_text() for legend in legends for text in legend.get_texts()]


def scaling_rows(engines: list[str]) -> list[dict[str, Any]]:
    """summary.json scaling rows of 1 and 2 devices (the synthetic artifacts run on one)."""
    return [{"engine": engine, "precision": "bf16", "path": "optimized", "batch_per_device": 32, "devices": devices,
             "speedup": speedup, "speedup_ci95": [speedup - 0.1, speedup + 0.1] if devices > 1 else None}
            for engine in engines for devices, speedup in ((1, 1.0), (2, 1.8))]


def test_an_engine_has_one_colour_in_every_plot(make_artifact: Callable[..., Path]) -> None:
    data = load_report_data(make_artifact(RUNS, telemetry_power=250.0))
    data.summary = dataclasses.replace(data.summary, scaling=tuple(ScalingRow.from_json({**row, "throughput": None,
                                                                                           "efficiency": row["speedup"] / row["devices"]})
                                                                    for row in scaling_rows(["pytorch", "jax"])))
    figures = plots.all_plots(data)
    assert {p.key for p in figures} == {"throughput", "scaling", "steps", "telemetry"}
    colours: dict[str, set[str]] = defaultdict(set)
    for plot in figures:
        artists = tagged(plot.figure)
        assert {engine for engine, *_ in artists} == {"pytorch", "jax"}, plot.key
        for engine, _precision, _role, artist in artists:
            colours[engine].add(colour_of(artist))
        for legend in plot.figure.legends:  # the legend says the same
            for text, handle in zip(legend.get_texts(), legend.legend_handles, strict=True):
                if not text.get_text().startswith("ideal"):
                    colours[text.get_text().split()[0]].add(colour_of(handle))
        svg = plots.to_svg(plot.figure, salt=plot.key)
        for engine, precision, role, artist in artists:  # the inline SVG draws it in the same colour
            element = re.search(rf'id="{re.escape(artist.get_gid())}">(.*?)</g>', svg, re.S)
            assert element and ENGINE_COLOURS[engine].lower() in element.group(1), (plot.key, engine, precision, role)
    assert {engine: sorted(c) for engine, c in colours.items()} == {"pytorch": [ENGINE_COLOURS["pytorch"].lower()],
                                                                    "jax": [ENGINE_COLOURS["jax"].lower()]}


def test_twelve_repeats_make_one_band_and_one_legend_entry_per_group(make_artifact: Callable[..., Path]) -> None:
    data = load_report_data(make_artifact(TWELVE, telemetry_power=250.0))
    groups = {f"{engine} {precision}" for engine, precision in TWELVE}
    for plot in plots.all_plots(data):
        labels = legend_labels(plot.figure)
        assert len(labels) == len(set(labels)), (plot.key, labels)
        assert "#" not in " ".join(labels)  # never a run
        if plot.key == "throughput":
            assert labels == ["pytorch", "jax"]
            continue
        assert {label.split(" (")[0] for label in labels} == groups and len(labels) <= len(groups), (plot.key, labels)
        assert all(label.endswith("(n=12)") for label in labels)
        medians = [a for *_, role, a in tagged(plot.figure) if role == "median"]
        bands = [a for *_, role, a in tagged(plot.figure) if role == "band"]
        panels = len(plot.figure.axes)
        assert len(medians) == len(bands) == len(groups) * panels, plot.key  # not one line per repeat
        lines = [line for ax in plot.figure.axes for line in ax.get_lines()]
        assert len(lines) == len(medians), plot.key


def test_a_precision_has_one_line_style(make_artifact: Callable[..., Path]) -> None:
    data = load_report_data(make_artifact(RUNS, telemetry_power=250.0))
    styles = {}
    for plot in plots.all_plots(data):
        for _engine, precision, role, artist in tagged(plot.figure):
            if role == "median" and hasattr(artist, "get_linestyle") and plot.key != "throughput":
                assert styles.setdefault(precision, artist.get_linestyle()) == artist.get_linestyle()
    assert styles == {"fp32": "-", "bf16": "--"}


def test_the_shipped_engines_keep_their_colour_in_every_report() -> None:
    assert engine_colours(["jax"]) == {"jax": ENGINE_COLOURS["jax"]}
    mixed = engine_colours(["zeta", "pytorch", "alpha", "jax"])
    assert mixed["pytorch"] == ENGINE_COLOURS["pytorch"] and mixed["jax"] == ENGINE_COLOURS["jax"]
    assert len(set(mixed.values())) == 4 and mixed["alpha"] == next(c for c in PALETTE if c not in ENGINE_COLOURS.values())
    assert precision_linestyles(["bf16", "fp32"]) == {"fp32": "-", "bf16": "--"}
    assert precision_linestyles(["bf16"]) == {"bf16": "-"}
