"""Report plots with matplotlib (Agg backend, imported lazily): throughput, strong scaling, step times, telemetry.

Every plot draws a group of runs (engine, precision, path, batch, devices) in one look, the same in every plot
(reports/styles.py: the engine's colour, the precision's line style). Repeats are summarised, never drawn one line
each: a median line in a min-max band across the repeats (the repeats' own points faint, without a legend entry),
and the legend lists one entry per group, outside the axes. Every data artist carries a gid
``<plot>/<engine>/<precision>/<role>/<n>`` (the throughput's black repeat dots excepted): the id of its SVG element,
and what the tests read its engine from.
Each builder returns a ``Plot`` or None when the artifact has nothing to plot; ``to_svg`` and ``to_png`` turn a
figure into self-contained SVG text (glyphs as paths) or PNG bytes.
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from bench_engine.contract import EngineResult
from orchestrator.judge.record import RunRecord
from orchestrator.judge.summary_model import GroupRow, RunRow, ScalingRow
from orchestrator.reports.data import ReportData
from orchestrator.reports.styles import NEUTRAL, Styles, styles_for

if TYPE_CHECKING:
    from matplotlib.artist import Artist

GroupKey = tuple[str, str, Any, Any, Any]  # engine, precision, path, batch per device, devices
VARIANT = ("path", "batch_per_device", "devices")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
BAND_ALPHA = 0.2
POINT_ALPHA = 0.35
TELEMETRY_BINS = 300


@dataclass
class Plot:
    key: str
    title: str
    caption: str
    figure: Any


def matplotlib_available() -> tuple[bool, str | None]:
    try:
        _mpl()
    except ImportError as exc:
        return False, f"plots need matplotlib ({exc}); pip install matplotlib"
    return True, None


def _mpl() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    return matplotlib


def _figure(width: float, height: float, ncols: int = 1, nrows: int = 1) -> tuple[Any, Any]:
    _mpl()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax in axes.flat:
        ax.grid(True, alpha=0.3)
        ax.set_axisbelow(True)
    return fig, axes


def to_svg(fig: Any, salt: str) -> str:
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg")
    text = buf.getvalue()
    return text[text.index("<svg"):]


def to_png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def styles(data: ReportData) -> Styles:
    """The report's one engine -> colour and precision -> line style mapping (every run of the summary)."""
    runs = data.summary.runs
    return styles_for((r.engine for r in runs), (r.precision for r in runs))


def group_key(row: RunRow | GroupRow | RunRecord) -> GroupKey:
    return (row.engine, row.precision, row.path, row.batch_per_device, row.devices)


def _varying(keys: Sequence[GroupKey]) -> list[int]:
    """Indexes (2: path, 3: batch, 4: devices) of the key parts that differ between the groups."""
    return [i for i in (2, 3, 4) if len({k[i] for k in keys}) > 1]


def _label(key: GroupKey, vary: Sequence[int], sep: str = " ") -> str:
    extra = [str(key[2]) if i == 2 else f"b{key[3]}" if i == 3 else f"x{key[4]}" for i in vary]
    return sep.join([key[0], " ".join([key[1], *extra])])


def _markers(keys: Sequence[GroupKey], vary: Sequence[int]) -> dict[GroupKey, str | None]:
    """A marker per variant (the varying path, batch, devices), so that two groups of one engine and precision differ."""
    if not vary:
        return dict.fromkeys(keys)
    variants = sorted({tuple(str(k[i]) for i in vary) for k in keys})
    return {k: MARKERS[variants.index(tuple(str(k[i]) for i in vary)) % len(MARKERS)] for k in keys}


def _gid(plot: str, key: GroupKey, role: str, n: int) -> str:
    """``<plot>/<engine>/<precision>/<role>/<n>``: unique in the page (an engine's name never holds a '/')."""
    return f"{plot}/{key[0]}/{key[1]}/{role}/{n}"


def _legend(fig: Any, handles: list[Any], labels: list[str]) -> None:
    """One figure legend outside the axes (right), so that it never covers the data."""
    if handles:
        fig.legend(handles, labels, loc="outside right upper", fontsize="small")


class Look(NamedTuple):
    """How one group's series is drawn: colour, line style and marker (None: no marker)."""

    color: str
    ls: str
    marker: str | None = None


def _median_band(ax: Any, x: np.ndarray, stack: np.ndarray, look: Look, plot: str, key: GroupKey, n: int) -> tuple[Any, Any]:
    """The median of ``stack`` (one row per repeat, NaN where a repeat has no value) over ``x``, in its min-max band."""
    keep = ~np.all(np.isnan(stack), axis=0)
    x, stack = x[keep], stack[:, keep]
    median, low, high = np.nanmedian(stack, axis=0), np.nanmin(stack, axis=0), np.nanmax(stack, axis=0)
    band = ax.fill_between(x, low, high, color=look.color, alpha=BAND_ALPHA, lw=0, gid=_gid(plot, key, "band", n))
    (line,) = ax.plot(x, median, color=look.color, ls=look.ls, lw=1.6, gid=_gid(plot, key, "median", n),
                      marker=look.marker, ms=4, markevery=max(1, len(x) // 8) if look.marker else None)
    return band, line


def throughput(data: ReportData) -> Plot | None:
    groups = [g for g in data.summary.groups if g.throughput]
    if not groups:
        return None
    look = styles(data)
    keys = [group_key(g) for g in groups]
    vary = _varying(keys)
    values: dict[GroupKey, list[float]] = defaultdict(list)
    for row in data.summary.runs:
        if row.status == "ok" and row.throughput:
            values[group_key(row)].append(row.throughput)
    fig, axes = _figure(max(5.0, 1.3 * len(groups) + 3), 4.2)
    ax = axes[0, 0]
    used_ci = False
    legend: dict[str, Artist] = {}
    for x, (g, key) in enumerate(zip(groups, keys, strict=True)):
        tp = g.throughput
        assert tp is not None
        low, high = tp.ci95 if tp.ci95 else (tp.min, tp.max)
        used_ci = used_ci or bool(tp.ci95)
        colour = look.colour(g.engine)
        bar = ax.bar(x, tp.median, color=colour, alpha=0.85, width=0.6, gid=_gid("throughput", key, "median", x))
        legend.setdefault(g.engine, bar)
        ax.errorbar(x, tp.median, yerr=[[max(tp.median - low, 0)], [max(high - tp.median, 0)]], fmt="none",
                    ecolor="black", capsize=5, lw=1.2)
        points = values[key]
        if points:
            offsets = np.linspace(-0.18, 0.18, len(points)) if len(points) > 1 else [0.0]
            ax.scatter([x + o for o in offsets], points, color="black", s=10, alpha=0.6, zorder=3, lw=0)  # neutral on the bar
    ax.set_xticks(range(len(groups)), [_label(k, vary, sep="\n") for k in keys])
    ax.set_ylabel("samples/s (steady state)")
    ax.set_ylim(bottom=0)
    ax.set_title("Steady-state throughput per engine and precision")
    _legend(fig, list(legend.values()), list(legend))
    caption = ("Bars: median over valid repeats, one colour per engine; dots: individual repeats; error bars: "
               + ("bootstrap 95% CI of the median where 5+ repeats, else min-max." if used_ci else "min-max over the repeats."))
    return Plot("throughput", "Throughput", caption, fig)


def _window_trace(result: EngineResult | None) -> tuple[np.ndarray, np.ndarray] | None:
    """(steady-state step reached, ms per step) of every timing window of a result, or None without windows."""
    xs, ys, step = [], [], 0
    windows = result.measurements.windows if result is not None and result.measurements is not None else ()
    for steps, _samples, duration in windows:
        if steps > 0:
            step += steps
            xs.append(step)
            ys.append(duration / steps * 1000.0)
    return (np.array(xs, dtype=float), np.array(ys, dtype=float)) if xs else None


def _on_grid(grid: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """``ys`` interpolated at ``grid`` inside the trace's own range, NaN outside it."""
    return np.interp(grid, xs, ys, left=np.nan, right=np.nan)


def step_times(data: ReportData) -> Plot | None:
    traces: dict[GroupKey, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
    for run in data.runs:
        trace = _window_trace(run.result)
        if trace is not None:
            traces[group_key(run.record)].append(trace)
    if not traces:
        return None
    look = styles(data)
    keys = list(traces)
    vary = _varying(keys)
    markers = _markers(keys, vary)
    fig, axes = _figure(9, 4)
    ax = axes[0, 0]
    handles, labels = [], []
    for n, (key, members) in enumerate(traces.items()):
        grid = np.unique(np.concatenate([xs for xs, _ in members]))
        stack = np.vstack([_on_grid(grid, xs, ys) for xs, ys in members])
        style = Look(look.colour(key[0]), look.linestyle(key[1]), markers[key])
        handles.append(_median_band(ax, grid, stack, style, "steps", key, n))
        ax.scatter(np.concatenate([xs for xs, _ in members]), np.concatenate([ys for _, ys in members]), s=6, lw=0,
                   color=style.color, alpha=POINT_ALPHA, gid=_gid("steps", key, "repeats", n))
        labels.append(f"{_label(key, vary)} (n={len(members)})")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("steady-state step")
    ax.set_ylabel("time per step (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title("Per-step time of the steady state (timing windows)")
    _legend(fig, handles, labels)
    caption = ("Per group (n repeats): the median over the repeats of each synchronised timing window's time divided by its steps "
               "(result.json measurements.windows), in the min-max band of the repeats; faint points: every repeat's windows.")
    return Plot("steps", "Step times", caption, fig)


def scaling(data: ReportData) -> Plot | None:
    rows = [r for r in data.summary.scaling or () if r.speedup is not None]
    if not rows:
        return None
    look = styles(data)
    lines: dict[GroupKey, list[ScalingRow]] = defaultdict(list)
    for r in rows:
        lines[(r.engine, r.precision, r.path, r.batch_per_device, None)].append(r)
    keys = sorted(lines, key=lambda k: tuple(map(str, k)))
    vary = _varying(keys)
    markers = _markers(keys, vary)
    fig, axes = _figure(7.5, 4.2)
    ax = axes[0, 0]
    top = max(r.devices for r in rows)
    (ideal,) = ax.plot([1, top], [1, top], ls="--", color=NEUTRAL, lw=1)
    handles, labels = [ideal], ["ideal (linear)"]
    for n, key in enumerate(keys):
        members = sorted(lines[key], key=lambda r: r.devices)
        colour = look.colour(key[0])
        devices = [r.devices for r in members]
        if any(r.speedup_ci95 for r in members):
            ci = [r.speedup_ci95 or (r.speedup, r.speedup) for r in members]
            ax.fill_between(devices, [c[0] for c in ci], [c[1] for c in ci], color=colour, alpha=BAND_ALPHA, lw=0,
                            gid=_gid("scaling", key, "band", n))
        (line,) = ax.plot(devices, [r.speedup for r in members], marker=markers[key] or "o", lw=1.6, color=colour,
                          ls=look.linestyle(key[1]), gid=_gid("scaling", key, "median", n))
        handles.append(line)
        labels.append(_label(key, vary))
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("devices")
    ax.set_ylabel("speedup vs 1 device")
    ax.set_xlim(left=0.8)
    ax.set_ylim(bottom=0)
    ax.set_title("Strong scaling (data parallel, same per-device batch)")
    _legend(fig, handles, labels)
    caption = ("Speedup = median throughput on N devices / median on 1 device (summary.json scaling); band: its bootstrap 95% CI "
               "where 5+ repeats a side; dashed grey: linear scaling.")
    return Plot("scaling", "Strong scaling", caption, fig)


TELEMETRY_PANELS = (("power_w", "power (W)"), ("util_gpu_pct", "GPU utilisation (%)"),
                    ("sm_clock_mhz", "SM clock (MHz)"), ("temperature_c", "temperature (C)"))


def _binned(times: np.ndarray, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The mean of ``values`` in each time bin (NaN where the series has no sample)."""
    index = np.clip(np.searchsorted(edges, times, side="right") - 1, 0, len(edges) - 2)
    counts = np.bincount(index, minlength=len(edges) - 1)
    sums = np.bincount(index, weights=values, minlength=len(edges) - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def telemetry(data: ReportData) -> Plot | None:
    series: dict[GroupKey, list[list[dict[str, Any]]]] = defaultdict(list)  # a group's samples, one list per run and GPU
    for run in data.runs:
        for gpu in sorted({row["gpu"] for row in run.telemetry or [] if row.get("gpu") is not None}):
            rows = [row for row in run.telemetry or [] if row.get("gpu") == gpu and row.get("time_s") is not None]
            if rows:
                series[group_key(run.record)].append(rows)
    if not series:
        return None
    look = styles(data)
    keys = list(series)
    vary = _varying(keys)
    markers = _markers(keys, vary)
    end = max(row["time_s"] for members in series.values() for rows in members for row in rows)
    longest = max(len(rows) for members in series.values() for rows in members)
    edges = np.linspace(0.0, max(end, 1e-9) * (1 + 1e-9), max(1, min(TELEMETRY_BINS, longest // 2)) + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    fig, axes = _figure(11, 6, ncols=2, nrows=2)
    handles: dict[str, tuple[Artist, Artist]] = {}
    for ax, (column, name) in zip(axes.flat, TELEMETRY_PANELS, strict=True):
        for n, (key, members) in enumerate(series.items()):
            binned = []
            for rows in members:
                points = [(row["time_s"], row[column]) for row in rows if row.get(column) is not None]
                if points:
                    binned.append(_binned(np.array([p[0] for p in points]), np.array([p[1] for p in points], dtype=float), edges))
            if not binned:
                continue
            style = Look(look.colour(key[0]), look.linestyle(key[1]), markers[key])
            drawn = _median_band(ax, centres, np.vstack(binned), style, f"telemetry.{column}", key, n)
            handles.setdefault(f"{_label(key, vary)} (n={len(members)})", drawn)
        ax.set_title(name, fontsize="medium")
        ax.set_xlabel("time since the run started (s)")
    _legend(fig, list(handles.values()), list(handles))
    caption = ("NVML samples (telemetry.csv), time from the start of each engine process: per group (n runs x GPUs), the median of "
               f"the runs' means in each of {len(centres)} time bins, in the min-max band across the runs.")
    return Plot("telemetry", "GPU telemetry", caption, fig)


def all_plots(data: ReportData) -> list[Plot]:
    return [p for p in (throughput(data), scaling(data), step_times(data), telemetry(data)) if p is not None]
