"""Report plots with matplotlib (Agg backend, imported lazily): throughput, strong scaling, step times, telemetry.

Each builder returns a ``Figure`` or None when the artifact has nothing to plot; ``to_svg`` and
``to_png`` turn a figure into self-contained SVG text (glyphs as paths) or PNG bytes.
"""

from __future__ import annotations

import io
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from orchestrator.reports.data import ReportData

PALETTE = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974", "#64B5CD"]


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


def _group_label(g: dict[str, Any], vary: set[str]) -> str:
    parts = [g["engine"], g["precision"]]
    if "path" in vary:
        parts.append(g["path"])
    if "batch_per_device" in vary:
        parts.append(f"b{g['batch_per_device']}")
    if "devices" in vary:
        parts.append(f"x{g['devices']}")
    return "\n".join([parts[0], " ".join(parts[1:])])


def throughput(data: ReportData) -> Plot | None:
    groups = [g for g in data.summary["groups"] if g.get("throughput")]
    if not groups:
        return None
    vary = {k for k in ("path", "batch_per_device", "devices") if len({g[k] for g in groups}) > 1}
    engines = sorted({g["engine"] for g in groups})
    colour = {e: PALETTE[i % len(PALETTE)] for i, e in enumerate(engines)}
    values: dict[tuple, list[float]] = defaultdict(list)
    for row in data.summary["runs"]:
        if row["status"] == "ok" and row.get("throughput"):
            values[(row["engine"], row["precision"], row.get("path"), row.get("batch_per_device"), row.get("devices"))].append(row["throughput"])
    fig, axes = _figure(max(5.0, 1.3 * len(groups) + 2), 4.2)
    ax = axes[0, 0]
    used_ci = False
    for x, g in enumerate(groups):
        tp = g["throughput"]
        ci = tp.get("ci95")
        low, high = (ci if ci else (tp["min"], tp["max"]))
        used_ci = used_ci or bool(ci)
        ax.bar(x, tp["median"], color=colour[g["engine"]], alpha=0.85, width=0.6,
               label=g["engine"] if g["engine"] not in ax.get_legend_handles_labels()[1] else None)
        ax.errorbar(x, tp["median"], yerr=[[max(tp["median"] - low, 0)], [max(high - tp["median"], 0)]], fmt="none",
                    ecolor="black", capsize=5, lw=1.2)
        points = values[(g["engine"], g["precision"], g["path"], g["batch_per_device"], g["devices"])]
        if points:
            offsets = [(-0.15 + 0.3 * i / max(len(points) - 1, 1)) if len(points) > 1 else 0 for i in range(len(points))]
            ax.scatter([x + o for o in offsets], points, color="black", s=12, zorder=3)
    ax.set_xticks(range(len(groups)), [_group_label(g, vary) for g in groups])
    ax.set_ylabel("samples/s (steady state)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="best", fontsize="small")
    ax.set_title("Steady-state throughput per engine and precision")
    caption = ("Bars: median over valid repeats; dots: individual repeats; error bars: "
               + ("bootstrap 95% CI of the median where 5+ repeats, else min-max." if used_ci else "min-max over the repeats."))
    return Plot("throughput", "Throughput", caption, fig)


def step_times(data: ReportData) -> Plot | None:
    traces = []
    for run in data.runs:
        windows = ((run.result or {}).get("measurements") or {}).get("windows") or []
        if not windows:
            continue
        xs, ys, step = [], [], 0
        for steps, _samples, duration in windows:
            if steps <= 0:
                continue
            step += steps
            xs.append(step)
            ys.append(duration / steps * 1000.0)
        if xs:
            traces.append((run.label, xs, ys))
    if not traces:
        return None
    fig, axes = _figure(8, 4)
    ax = axes[0, 0]
    for i, (label, xs, ys) in enumerate(traces):
        ax.plot(xs, ys, marker="o" if len(xs) < 40 else None, ms=3, lw=1.2, color=PALETTE[i % len(PALETTE)], label=label)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("steady-state step")
    ax.set_ylabel("time per step (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title("Per-step time of the steady state (timing windows)")
    if len(traces) <= 12:
        ax.legend(fontsize="x-small", loc="best")
    caption = "Each point: one synchronised timing window of the engine, divided by its steps (result.json measurements.windows)."
    return Plot("steps", "Step times", caption, fig)


def scaling(data: ReportData) -> Plot | None:
    rows = [r for r in data.summary.get("scaling") or [] if r.get("speedup") is not None]
    if not rows:
        return None
    lines: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        lines[(r["engine"], r["precision"], r.get("path"), r["batch_per_device"])].append(r)
    vary = {k for i, k in ((2, "path"), (3, "batch")) if len({key[i] for key in lines}) > 1}
    fig, axes = _figure(6.5, 4.2)
    ax = axes[0, 0]
    top = max(r["devices"] for r in rows)
    ax.plot([1, top], [1, top], ls="--", color="#8C8C8C", lw=1, label="ideal (linear)")
    for i, (key, members) in enumerate(sorted(lines.items())):
        members = sorted(members, key=lambda r: r["devices"])
        label = " ".join([key[0], key[1], *([key[2]] if "path" in vary else []), *([f"b{key[3]}"] if "batch" in vary else [])])
        ax.plot([r["devices"] for r in members], [r["speedup"] for r in members], marker="o", lw=1.5,
                color=PALETTE[i % len(PALETTE)], label=label)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("devices")
    ax.set_ylabel("speedup vs 1 device")
    ax.set_xlim(left=0.8)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize="small", loc="best")
    ax.set_title("Strong scaling (data parallel, same per-device batch)")
    caption = "Speedup = median throughput on N devices / median on 1 device (summary.json scaling); dashed: linear scaling."
    return Plot("scaling", "Strong scaling", caption, fig)


TELEMETRY_PANELS = (("power_w", "power (W)"), ("util_gpu_pct", "GPU utilisation (%)"),
                    ("sm_clock_mhz", "SM clock (MHz)"), ("temperature_c", "temperature (C)"))


def telemetry(data: ReportData) -> Plot | None:
    runs = [r for r in data.runs if r.telemetry]
    if not runs:
        return None
    fig, axes = _figure(10, 6, ncols=2, nrows=2)
    line = 0
    for run in runs:
        for gpu in sorted({row["gpu"] for row in run.telemetry if row.get("gpu") is not None}):
            rows = [row for row in run.telemetry if row.get("gpu") == gpu]
            colour = PALETTE[line % len(PALETTE)]
            label = run.label + (f" gpu{int(gpu)}" if gpu else "")
            for ax, (column, _name) in zip(axes.flat, TELEMETRY_PANELS, strict=True):
                points = [(row["time_s"], row[column]) for row in rows if row.get(column) is not None and row.get("time_s") is not None]
                if points:
                    ax.plot([p[0] for p in points], [p[1] for p in points], lw=1.0, color=colour, label=label)
            line += 1
    for ax, (_column, name) in zip(axes.flat, TELEMETRY_PANELS, strict=True):
        ax.set_title(name, fontsize="medium")
        ax.set_xlabel("time since the run started (s)")
    if line <= 10:
        handles, _labels = axes[0, 0].get_legend_handles_labels()
        if handles:
            axes[0, 0].legend(fontsize="x-small", loc="best")
    caption = "NVML samples of every run (telemetry.csv), time from the start of each engine process."
    return Plot("telemetry", "GPU telemetry", caption, fig)


def all_plots(data: ReportData) -> list[Plot]:
    return [p for p in (throughput(data), scaling(data), step_times(data), telemetry(data)) if p is not None]
