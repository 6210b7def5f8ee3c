"""The report's figures: matplotlib (Agg, no pyplot state) over small, already aggregated rows.

Every function takes plain Python values collected from Spark by
``analysis.report`` (a few hundred rows per figure at most), writes one PNG
and returns nothing.  Times are seconds since the run's first client op.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.ticker import MaxNLocator

DPI = 90
#: The failover stages drawn as stacked segments: (label, field the segment ends at).
STAGE_SEGMENTS = (("detect", "detect_ms"), ("elect − detect", "elect_ms"), ("load − elect", "load_ms"),
                  ("first commit − load", "first_commit_ms"))
STAGE_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1")
FAULT_COLOR = "#e15759"
#: Faults named on a figure at most; beyond, they are only shaded (the report lists them in a table).
MAX_FAULT_LABELS = 40
#: Unavailability windows labelled with their duration at most.
MAX_WINDOW_LABELS = 60


def _save(fig: Figure, path: Path) -> None:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=DPI)


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def _text_in(fig: Figure, texts: Sequence[str], size: float) -> float:
    """The width in inches of the widest of ``texts`` at font ``size`` (points)."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    font = FontProperties(size=size)
    return max([renderer.get_text_width_height_descent(t, font, ismath=False)[0] for t in texts] or [0.0]) / fig.dpi


def shade_faults(ax: Any, faults: Sequence[dict], end_s: float, label: bool = True) -> None:
    """Shade each fault's window (start to heal, or to ``end_s`` when never healed), all in one collection,
    and name each at the top when there are at most ``MAX_FAULT_LABELS`` (more would overlap into a band)."""
    spans = []
    for f in faults:
        start = f["start_s"]
        if start is None:
            continue
        heal = f["heal_s"] if f["heal_s"] is not None else max(end_s, start)
        spans.append((f, start, max(heal, start + 0.02)))
    if not spans:
        return
    # one polygon per window in a single collection (x in data, y in axes coordinates, as axvspan): with
    # hundreds of faults, one patch each made drawing the report's figures several times slower
    boxes = [[(a, 0.0), (a, 1.0), (b, 1.0), (b, 0.0)] for _f, a, b in spans]
    ax.add_collection(PolyCollection(boxes, transform=ax.get_xaxis_transform(), facecolors=FAULT_COLOR, alpha=0.15,
                                     linewidths=0, zorder=0), autolim=False)
    ax.update_datalim([(a, 0.0) for _f, a, _b in spans] + [(b, 0.0) for _f, _a, b in spans], updatey=False)
    ax.autoscale_view(scaley=False)
    if label and len(spans) <= MAX_FAULT_LABELS:
        for f, start, _b in spans:
            text = f"{f['kind'] or '?'} {f['target'] or ''}".strip()
            note = ax.annotate(text, xy=(start, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -2),
                               textcoords="offset points", va="top", ha="left", fontsize=7, color="#9c1f22",
                               rotation=90, clip_on=True, zorder=5)
            note.set_in_layout(False)   # inside the axes: the layout need not measure it


def _x_limits(ax: Any, start_s: float, end_s: float) -> None:
    if end_s > start_s:
        ax.set_xlim(start_s, end_s)


def timeseries(path: Path, buckets: Sequence[dict], bucket_s: float, faults: Sequence[dict],
               end_s: float) -> None:
    """Latency (p50/p99 of ok ops) and throughput (ok, fail, info ops/s) per bucket, faults shaded."""
    fig = _figure(10, 5.2)
    lat, thr = fig.subplots(2, 1, sharex=True)
    xs = [b["t_s"] + bucket_s / 2 for b in buckets]
    for key, style in (("p50", "-"), ("p99", "--")):
        pts = [(x, b[key]) for x, b in zip(xs, buckets) if b[key] is not None and b[key] > 0]
        if pts:
            lat.plot([p[0] for p in pts], [p[1] for p in pts], style, lw=1.2, label=f"{key} (ok ops)")
    lat.set_yscale("log")
    lat.set_ylabel("latency (ms)")
    lat.legend(loc="upper right", fontsize=8)
    for key, color in (("ok", "#59a14f"), ("fail", "#e15759"), ("info", "#edc948")):
        thr.plot(xs, [b[key] / bucket_s for b in buckets], lw=1.2, color=color, label=f"{key}/s")
    thr.set_ylabel(f"ops/s (per {bucket_s:g} s)")
    thr.set_xlabel("seconds since the run's first op")
    thr.legend(loc="upper right", fontsize=8)
    start = min([0.0] + [b["t_s"] for b in buckets])
    for ax in (lat, thr):
        shade_faults(ax, faults, end_s, label=ax is lat)
        ax.grid(alpha=0.3)
    _x_limits(thr, start, max(end_s, start + bucket_s))
    _save(fig, path)


def unavailability(path: Path, groups: Sequence[str], windows: Sequence[dict], faults: Sequence[dict],
                   end_s: float) -> None:
    """Gantt chart: one lane per group, a bar per unavailability window (hatched: never recovered)."""
    fig = _figure(10, max(2.2, 1.2 + 0.45 * len(groups)))
    ax = fig.subplots()
    lane = {g: i for i, g in enumerate(groups)}
    bars: dict[tuple[int, bool], list[tuple[float, float]]] = {}
    for w in windows:
        start = w["from_s"]
        open_ = w["to_s"] is None
        stop = end_s if open_ else w["to_s"]
        bars.setdefault((lane[w["group"]], open_), []).append((start, max(stop - start, 0.01)))
    for (y, open_), xranges in sorted(bars.items()):   # one collection per lane (and kind): fast with many windows
        ax.broken_barh(xranges, (y - 0.3, 0.6), facecolors="#e15759", hatch="//" if open_ else None, alpha=0.85,
                       edgecolor="#9c1f22" if open_ else "none")
    closed = [w for w in windows if w["to_s"] is not None]
    if len(closed) <= MAX_WINDOW_LABELS:   # more would overlap; the report's table has every duration
        for w in closed:
            note = ax.annotate(f"{(w['to_s'] - w['from_s']) * 1000:.0f} ms", xy=(w["to_s"], lane[w["group"]]),
                               xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
            note.set_in_layout(False)
    ax.set_yticks(range(len(groups)), [str(g) for g in groups], fontsize=8)
    ax.set_ylim(-0.7, len(groups) - 0.3)
    ax.invert_yaxis()
    shade_faults(ax, faults, end_s)
    ax.set_xlabel("seconds since the run's first op (hatched: not recovered by the end of the run)")
    ax.grid(axis="x", alpha=0.3)
    _x_limits(ax, min([0.0] + [w["from_s"] for w in windows]), end_s)
    _save(fig, path)


def stage_segments(row: dict) -> list[float]:
    """The stacked segments of a failover row: each stage from the end of the one before (a missing stage,
    or one that ended before the previous, adds nothing)."""
    out, reached = [], 0.0
    for _label, key in STAGE_SEGMENTS:
        v = row.get(key)
        if v is None:
            out.append(0.0)
            continue
        out.append(max(0.0, v - reached))
        reached = max(reached, v)
    return out


def stages(path: Path, rows: Sequence[dict]) -> None:
    """Stacked horizontal bars per (fault, group): detect, elect − detect, load − elect, first commit − load;
    a black tick at the end of the group's unavailability window, a grey bar for a controller failover."""
    fig = _figure(10, max(2.0, 1.3 + 0.32 * len(rows)))
    ax = fig.subplots()
    labels = []
    for y, r in enumerate(rows):
        labels.append(r["label"])
        if r.get("group") is None:
            if r.get("controller_failover_ms") is not None:
                ax.barh(y, r["controller_failover_ms"], color="#9d9d9d", height=0.6,
                        label="controller failover" if "controller failover" not in
                        ax.get_legend_handles_labels()[1] else None)
            continue
        left = 0.0
        for (label, key), seg, color in zip(STAGE_SEGMENTS, stage_segments(r), STAGE_COLORS):
            have = ax.get_legend_handles_labels()[1]
            if seg > 0:
                ax.barh(y, seg, left=left, color=color, height=0.6, label=label if label not in have else None)
            elif r.get(key) is not None:      # ended before the stage drawn before it: a diamond at its instant
                ax.plot([r[key]], [y], marker="D", color=color, ms=6, mec="black", ls="none",
                        label=label if label not in have else None)
            left += seg
        if r.get("unavailable_to_ms") is not None:
            ax.plot([r["unavailable_to_ms"]], [y], marker="|", color="black", ms=12, mew=2,
                    label="unavailable until" if "unavailable until" not in ax.get_legend_handles_labels()[1]
                    else None)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_ylim(-0.7, len(labels) - 0.3)
    ax.invert_yaxis()
    ax.set_xlabel("ms from the fault's start")
    ax.grid(axis="x", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if labels:
        order = [label for label, _k in STAGE_SEGMENTS] + ["unavailable until", "controller failover"]
        pairs = sorted(zip(handles, labels), key=lambda hl: order.index(hl[1]) if hl[1] in order else 99)
        ax.legend([h for h, _ in pairs], [lb for _, lb in pairs], loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  fontsize=7, borderaxespad=0)
    _save(fig, path)


def partitions(path: Path, parts: Sequence[dict], faults: Sequence[dict], end_s: float) -> None:
    """One panel per partition: the leader (step line, broker id; -1 none) and the ISR size on the left
    axis, each broker's HW (last value per bucket) on the right; a red cross where a HW went back."""
    # fixed margins, measured from the texts, not a layout engine: constrained layout was a third of this, the
    # report's largest figure, which is drawn last (its rows are the last collected)
    fig = Figure(figsize=(10, 0.8 + 2.1 * max(1, len(parts))))
    axes = fig.subplots(max(1, len(parts)), 1, sharex=True, squeeze=False)[:, 0]
    start = 0.0
    legends = []
    for ax, p in zip(axes, parts):
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        if p["leader"]:
            ax.step([t for t, _ in p["leader"]] + [end_s], [v for _, v in p["leader"]] + [p["leader"][-1][1]],
                    where="post", color="#4e79a7", lw=1.5, label="leader (broker id)")
            start = min(start, p["leader"][0][0])
        if p["isr"]:
            ax.step([t for t, _ in p["isr"]] + [end_s], [v for _, v in p["isr"]] + [p["isr"][-1][1]],
                    where="post", color="#f28e2b", lw=1.2, ls="--", label="ISR size")
        ax.set_ylabel("broker / size", fontsize=8)
        ax.set_title(p["title"], fontsize=9, loc="left")
        ax.grid(alpha=0.3)
        hw = ax.twinx()
        for broker, pts in sorted(p["hw"].items()):
            hw.step([t for t, _ in pts], [v for _, v in pts], where="post", lw=0.9, alpha=0.8,
                    label=f"HW b{broker}")
        if p["hw_decreases"]:
            hw.plot([t for t, _ in p["hw_decreases"]], [v for _, v in p["hw_decreases"]], "x", color="red", ms=7, mew=2,
                    label="HW went back")
        hw.set_ylabel("HW", fontsize=8)
        shade_faults(ax, faults, end_s, label=ax is axes[0])
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = hw.get_legend_handles_labels()
        if l1 or l2:
            legends.append(ax.legend(h1 + h2, l1 + l2, loc="upper left", bbox_to_anchor=(1.07, 1.0), fontsize=7,
                                     borderaxespad=0))
    axes[-1].set_xlabel("seconds since the run's first op")
    _x_limits(axes[-1], start, end_s)
    _partition_margins(fig, parts, legends)
    _save(fig, path)


def _partition_margins(fig: Figure, parts: Sequence[dict], legends: list) -> None:
    """Room for the y ticks and label (left), the HW ticks, label and legend (right), the titles and x label."""
    width, height = fig.get_size_inches()
    ints = [str(v) for p in parts for k in ("leader", "isr") for _t, v in p[k]] or ["0"]
    hws = [v for p in parts for pts in p["hw"].values() for _t, v in pts] or [1]
    tick = 7 / 72                                   # tick length and pad, points to inches
    left = tick + _text_in(fig, [s.replace("-", "\u2212") for s in ints], 10) + 12 / 72 + 0.12
    renderer = FigureCanvasAgg(fig).get_renderer()
    legend = max([lg.get_window_extent(renderer).width / fig.dpi for lg in legends] or [0.0])
    # the legends start 0.07 axes widths right of the axes (bbox_to_anchor above)
    right = max(tick + _text_in(fig, [f"{max(hws) * 1.05:.0f}"], 10) + 14 / 72,
                (0.07 * (width - left) + legend + 0.1) / 1.07)
    rows = max(1, len(parts))
    top, bottom, gap = 0.32, 0.55, 0.34
    axes_h = (height - top - bottom - gap * (rows - 1)) / rows
    fig.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height, bottom=bottom / height,
                        hspace=gap / axes_h)


def stage_boxes(path: Path, stages_: Sequence[tuple[str, str]], runs: Sequence[str],
                stats: dict[tuple[str, str], dict],
                title: str = "failover stages per run (ms from the fault's start)") -> None:
    """One panel per stage, a box per run (or per any label: ``stats`` is keyed by (label, stage)) from Spark's
    percentiles (whiskers p5/p95, box p25–p75, median)."""
    fig = _figure(max(8.0, 1.5 + 0.22 * len(runs)), 1.2 + 1.6 * len(stages_))
    axes = fig.subplots(len(stages_), 1, squeeze=False, sharex=True)[:, 0]
    for ax, (key, label) in zip(axes, stages_):
        boxes, pos = [], []
        for i, run in enumerate(runs):
            s = stats.get((run, key))
            if not s:
                continue
            boxes.append({"whislo": s["q"][0], "q1": s["q"][1], "med": s["q"][2], "q3": s["q"][3],
                          "whishi": s["q"][4], "fliers": [], "label": ""})
            pos.append(i)
        if boxes:
            ax.bxp(boxes, positions=pos, widths=0.6, showfliers=False)
            ax.plot(pos, [b["med"] for b in boxes], "o", color="#e15759", ms=3)
        ax.set_xlim(-0.7, len(runs) - 0.3)
        ax.set_ylabel(f"{label} (ms)", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    axes[-1].set_xticks(range(len(runs)), [r if len(r) <= 18 else r[:8] + "…" + r[-8:] for r in runs],
                        rotation=60, ha="right", fontsize=6)
    fig.suptitle(title, fontsize=10)
    _save(fig, path)


VERDICT_COLOURS = {"valid": "#1b7f3b", "invalid": "#b00020", "unknown": "#a36a00"}


def verdicts_per_scenario(path: Path, rows: Sequence[dict]) -> None:
    """Stacked horizontal bars: per scenario, its runs by verdict (``rows``: scenario, verdict, n)."""
    scenarios = sorted({r["scenario"] or "(none)" for r in rows})
    verdicts = sorted({r["verdict"] or "(none)" for r in rows}, key=lambda v: (v not in VERDICT_COLOURS, v))
    counts = {(r["scenario"] or "(none)", r["verdict"] or "(none)"): r["n"] for r in rows}
    fig = _figure(8.0, 1.0 + 0.35 * len(scenarios))
    ax = fig.subplots()
    left = [0] * len(scenarios)
    for v in verdicts:
        n = [counts.get((s, v), 0) for s in scenarios]
        ax.barh(range(len(scenarios)), n, left=left, color=VERDICT_COLOURS.get(v, "#888"), label=v)
        left = [a + b for a, b in zip(left, n)]
    ax.set_yticks(range(len(scenarios)), scenarios, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("runs")
    ax.legend(fontsize=8, loc="lower right")
    _save(fig, path)


def op_latency(path: Path, rows: Sequence[dict]) -> None:
    """Horizontal bars: p50, p90 and p99 latency of ok ops per op type, across runs (log scale)."""
    rows = [r for r in rows if r["p50"] is not None]
    fig = _figure(9, 1.2 + 0.45 * max(1, len(rows)))
    ax = fig.subplots()
    h = 0.26
    for j, (key, color) in enumerate((("p50", "#4e79a7"), ("p90", "#f28e2b"), ("p99", "#e15759"))):
        ax.barh([i + (j - 1) * h for i in range(len(rows))], [max(r[key] or 0, 1e-3) for r in rows], height=h,
                color=color, label=key)
    ax.set_yticks(range(len(rows)), [r["f"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("latency of ok ops (ms), all runs")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    _save(fig, path)
