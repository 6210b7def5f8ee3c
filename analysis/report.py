"""The pipeline's HTML report: one ``report.html`` with its PNG plots beside it (docs/analysis.md, "The report").

    path = write_report(tables, out)              # -> <out>/report/report.html, plots in <out>/report/img/

First the answers: the verdict, each run's anomalies with their evidence and each group's failover
timeline (``analysis.report_top``); then the plots, and the runs compared.  Spark does the work
(``analysis.report_data``: every number shown is a ``groupBy`` / window / ``percentile_approx`` over the
tables, and only small aggregates are collected); matplotlib (``analysis.plots``) draws them.  Per-run sections are capped at :data:`MAX_DETAIL_RUNS` runs (those
with anomalies first); the cross-run part covers every run.  Missing or empty
tables give a sentence instead of a plot.
"""
from __future__ import annotations

import logging
import os
import pickle
import re
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pyspark.sql import DataFrame

from analysis import plots
from analysis.report_data import (BOX_STAGES, MAX_ANOMALIES, MAX_BOX_RUNS, MAX_FAILOVER_ROWS, MAX_FAULTS,
                                  MAX_PARTITIONS, STAGES, Aggregates)
from analysis.report_top import (Html, anomalies_block, cross_run_plots, esc, img, none, runs_rows, table,
                                 timeline_block, verdict, verdicts_block)

log = logging.getLogger(__name__)

MAX_DETAIL_RUNS = 20        # runs with a section of their own

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:1.5em auto;max-width:1180px;
color:#222;padding:0 1em}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:2px solid #4e79a7;padding-bottom:.2em}
h3{margin-top:1.4em;font-size:1.05em;color:#333}
table{border-collapse:collapse;margin:.6em 0;font-size:.85em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#eef2f7}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr:nth-child(even) td{background:#fafafa}
img{max-width:100%;border:1px solid #ddd;margin:.4em 0}
.none{color:#777;font-style:italic}.note{color:#555;font-size:.9em}
.v-invalid{color:#b00020;font-weight:bold}.v-valid{color:#1b7f3b;font-weight:bold}.v-unknown{color:#a36a00;font-weight:bold}
code{background:#f3f3f3;padding:0 .2em}nav a{margin-right:.6em}
p.verdict{font-size:1.25em}h4{margin:.8em 0 .2em}.evidence{border-left:3px solid #4e79a7;padding-left:.6em;margin:.6em 0}
.evidence:target{background:#fff8d6}details>summary{cursor:pointer;color:#4e79a7}
"""


def _slug(run: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", run)[:60] or "run"


Draw = Callable[..., None]


class Drawer:
    """The figures drawn in one other thread, in the order they are asked for, while the report's thread goes on
    collecting from Spark and writing HTML (which names the figures' files only): the drawing is Python's work,
    the collects mostly the JVM's, so the two overlap.  One thread only: matplotlib's figures are drawn one at a
    time, as before.

    ``ahead`` draws a figure before its file's name is known (``prepare_report``: the runs' order, which names the
    files, waits for the checkers); a later ``draw`` of the same plot with the same values renames that file
    instead of drawing it again (the same values draw the same PNG).  ``wait`` raises the first error."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafkasim-report-draw")
        self._drawn: list[Future] = []
        self._ahead: dict[tuple[str, bytes], tuple[Future, Path]] = {}   # by plot and values
        self._files: list[Path] = []   # every file drawn ahead

    @staticmethod
    def _key(fn: Callable[..., None], args: tuple, kwargs: dict[str, Any]) -> tuple[str, bytes] | None:
        try:
            return fn.__qualname__, pickle.dumps((args, sorted(kwargs.items())), protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):   # not plain values: drawn each time
            return None

    def ahead(self, fn: Callable[..., None], path: Path, *args: Any, **kwargs: Any) -> None:
        """Draw into a file of its own beside ``path`` (a name ``close`` removes unless ``draw`` took it)."""
        tmp = path.with_name(f".ahead-{len(self._files)}-{path.name}")
        self._files.append(tmp)
        key, drawing = self._key(fn, args, kwargs), self._pool.submit(fn, tmp, *args, **kwargs)
        if key is not None:
            self._ahead[key] = (drawing, tmp)

    def draw(self, fn: Callable[..., None], path: Path, *args: Any, **kwargs: Any) -> None:
        key = self._key(fn, args, kwargs)
        early = None if key is None else self._ahead.pop(key, None)
        if early is None:
            self._drawn.append(self._pool.submit(fn, path, *args, **kwargs))
        else:
            drawn, tmp = early
            self._drawn.append(self._pool.submit(lambda: (drawn.result(), os.replace(tmp, path))))

    def wait(self) -> None:
        for f in self._drawn:
            f.result()

    def close(self) -> None:
        """Stop drawing (what is queued and not begun is dropped) and remove the figures drawn ahead and not
        used."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        for tmp in self._files:   # (those draw took are renamed)
            tmp.unlink(missing_ok=True)
        self._ahead.clear()
        self._files.clear()


@dataclass
class Prepared:
    """``prepare_report``'s: the report's collects made ahead, and its figures drawn ahead."""
    agg: Aggregates
    drawer: Drawer

    def release(self) -> None:
        self.drawer.close()
        self.agg.release()


# ------------------------------------------------------------------ HTML sections

def _across(infos: dict[str, dict], anchors: dict[str, str], data: dict, img_dir: Path, draw: Draw) -> str:
    parts = ["<h2 id=\"across\">Across runs</h2>"]
    if not infos:
        return parts[0] + none("No runs: every table is empty, nothing to show.")
    links = {r: Html(f"<a href=\"#{esc(anchors[r])}\">{esc(r)}</a>") if r in anchors else r for r in infos}
    overall, per_run = data["stages"], data["stages_per_run"]
    head, rows = runs_rows(infos, links, per_run)
    parts.append("<h3>Runs</h3>")
    if len(infos) > len(rows):
        parts.append(f"<p class=\"note\">The first {len(rows):,} of {len(infos):,} runs; every run is in the "
                     "<code>runs</code> table.</p>")
    parts.append(table(head, rows, numeric=(2, *range(5, 16), 17)))
    parts.append("<h3>Failover stages, all runs</h3>")
    if overall:
        parts.append(table(["stage (ms from the fault)", "rows", "p50", "p90", "p99", "max"],
                           [[label, overall[k]["n"], overall[k]["q"][2], overall[k]["q"][4], overall[k]["q"][6],
                             overall[k]["max"]] for k, label in STAGES if k in overall], numeric=range(1, 6)))
        box_runs = [r for r in infos if any((r, k) in per_run for k, _ in BOX_STAGES)][:MAX_BOX_RUNS]
        stages = [(k, label) for k, label in BOX_STAGES if any((r, k) in per_run for r in box_runs)]
        if len(infos) > 1 and box_runs and stages:   # a one-run report: its section's stage figure says it
            draw(plots.stage_boxes, img_dir / "stages-per-run.png", stages, box_runs, per_run)
            capped = sum(1 for r in infos if any((r, k) in per_run for k, _ in BOX_STAGES)) > len(box_runs)
            parts.append("<p class=\"note\">Per run: box p25–p75, line the median, whiskers p5–p95 "
                         f"(Spark's percentile_approx){'; the first ' + str(MAX_BOX_RUNS) + ' runs' if capped else ''}."
                         "</p>" + img(img_dir, "stages-per-run.png", "failover stages per run"))
    else:
        parts.append(none("No failover rows: no fault hit a group's coordinator or the controller."))
    parts += cross_run_plots(data, img_dir, draw)
    parts.append("<h3>Op latency by op type, all runs</h3>")
    lat = data["op_latency"]
    if lat:
        parts.append(table(["op", "ops", "ok", "fail", "info", "open", "p50 (ms, ok)", "p90", "p99", "max"],
                           [[r["f"], r["n"], r["ok"], r["fail"], r["info"], r["open"], r["p50"], r["p90"], r["p99"],
                             r["max"]] for r in lat], numeric=range(1, 10)))
        if any(r["p50"] is not None for r in lat):
            draw(plots.op_latency, img_dir / "op-latency.png", lat)
            parts.append(img(img_dir, "op-latency.png", "op latency by op type"))
    else:
        parts.append(none("No client operations."))
    parts.append("<h3>Anomalies by kind</h3>")
    kinds = data["kinds"]
    parts.append(table(["kind", "anomalies", "runs"], [[k["kind"], k["n"], k["runs"]] for k in kinds],
                       numeric=(1, 2)) if kinds else none("No anomalies in any run."))
    return "\n".join(parts)


def _run_section(anchor: str, info: dict, data: dict, img_dir: Path, draw: Draw) -> str:
    run, slug = info["run"], anchor
    faults = data["faults"].get(run, [])
    shaded = [f for f in faults if not f["skipped"]]
    end_s = info["end_s"]
    about = " · ".join(f"{k}: {esc(info[k])}" for k in ("scenario", "seed", "client") if info.get(k) is not None)
    out = [f"<h2 id=\"{esc(anchor)}\">Run {esc(run)}</h2>",
           f"<p class=\"verdict\">Verdict: {esc(verdict(info['verdict']))} · anomalies: {info['anomalies']}"
           + (f" · unknown because: {esc('; '.join(info['unknowns']))}" if info["unknowns"] else "") + "</p>",
           f"<p>{about + ' · ' if about else ''}{info['ops']:,} ops ({info['ok']:,} ok, "
           f"{info['fail']:,} fail, {info['info']:,} info, {info['open']:,} open) · faults: {info['faults']} · "
           f"{end_s:.1f} s · groups: {esc(', '.join(info['groups']) or '–')}</p>",
           "<h3>Anomalies</h3>", anomalies_block(run, slug, info, data, MAX_ANOMALIES),
           "<h3>Failover timeline by group</h3>", timeline_block(run, info, data)]
    out.append("<h3>Latency and throughput</h3>")
    series = data["series"].get(run)
    if series:
        draw(plots.timeseries, img_dir / f"{slug}-timeseries.png", series, info["bucket_s"], shaded, end_s)
        out.append(f"<p class=\"note\">Per {info['bucket_s']:g}-s bucket of completions; shaded: fault windows "
                   "(start to heal).</p>" + img(img_dir, f"{slug}-timeseries.png", f"latency and throughput of {run}"))
    else:
        out.append(none("No completed client operations in this run."))
    out.append("<h3>Faults</h3>")
    if faults:
        capped = " (the first %d)" % MAX_FAULTS if info["faults"] > len(faults) else ""
        out.append(f"<p class=\"note\">Faults: {info['faults']}{capped}.</p>" + table(
            ["fault", "kind", "target", "nodes", "start (s)", "heal (s)", "skipped"],
            [[f["fault"], f["kind"], f["target"], f["nodes"], f["start_s"], f["heal_s"], f["skipped"]]
             for f in faults], numeric=(0, 4, 5)))
    else:
        out.append(none("No faults in this run."))
    rows = data["failovers"].get(run, [])
    groups_rows = [r for r in rows if r["group"] is not None]
    out.append("<h3>Unavailability by group</h3>")
    windows = [{"group": r["group"], "from_s": r["time_s"] + r["unavailable_from_ms"] / 1000,
                "to_s": None if r["unavailable_to_ms"] is None else r["time_s"] + r["unavailable_to_ms"] / 1000}
               for r in groups_rows if r["unavailable_from_ms"] is not None and r["fault"] is not None]
    if windows:
        lanes = sorted(set(info["groups"]) | {w["group"] for w in windows})
        draw(plots.unavailability, img_dir / f"{slug}-unavailability.png", lanes, windows, shaded, end_s)
        out.append("<p class=\"note\">From the group's first failed op after a fault to its first ok "
                   "coordinator op (the failovers table).</p>"
                   + img(img_dir, f"{slug}-unavailability.png", f"unavailability windows of {run}"))
    else:
        out.append(none("No group was unavailable after a fault (no failed group op in a failover row)."))
    out.append("<h3>Failover stages</h3>")
    if rows:
        for r in rows:
            if r["fault"] is None:   # a move no fault explains: its cause where the fault goes
                r["fault"], r["kind"], r["target"] = "-", f"({r['cause']})", ""
            r["label"] = f"#{r['fault']} {r['kind'] or ''} {r['target'] or ''} → " + (
                r["group"] if r["group"] is not None else "controller")
        draw(plots.stages, img_dir / f"{slug}-stages.png", rows)
        capped = f" (the first {MAX_FAILOVER_ROWS})" if len(rows) >= MAX_FAILOVER_ROWS else ""
        out.append(f"<p class=\"note\">Per (fault, group){capped}: detect, elect − detect, load − elect, first commit −"
                   " load, in ms from the fault's start; a stage that did not happen adds nothing.</p>"
                   + img(img_dir, f"{slug}-stages.png", f"failover stages of {run}"))
    else:
        out.append(none("No failover stages to draw."))
    out.append("<h3>Partitions: leader, ISR, HW</h3>")
    parts = data["partitions"].get(run, [])
    if parts:
        draw(plots.partitions, img_dir / f"{slug}-partitions.png", parts, shaded, end_s)
        out.append(f"<p class=\"note\">At most {MAX_PARTITIONS} partitions: those an anomaly names, the workload "
                   "topics', the offsets partitions of the run's groups, then the busiest. HW: each broker's last "
                   f"value per {info['pbucket_s']:g}-s bucket; a red cross where a HW went back.</p>"
                   + img(img_dir, f"{slug}-partitions.png", f"partitions of {run}"))
    else:
        out.append(none("No partition state changes recorded for this run."))
    return "\n".join(out)



# ------------------------------------------------------------------ the entry point

def prepare_report(tables: dict[str, DataFrame], out: Path, meta: DataFrame | None = None) -> Prepared:
    """The report's collects that need none of the tables the checkers make (``anomalies``, the verdicts,
    ``runs``), made ahead (``Aggregates.prepare``), and the figures they draw, drawn ahead in another thread
    under names of their own: ``analysis.main`` calls it while the checkers run, and passes it to
    ``write_report`` (``prepared``), which collects the rest and draws what changed.  The report is the same.
    ``meta``: the runs' scenario, seed and client (``analysis.runs.read_meta``'s), for the report to take from
    it, not from the ``runs`` table, and so collect them and draw the figures by client ahead too."""
    img_dir = Path(out) / "report" / "img"
    img_dir.mkdir(parents=True, exist_ok=True)
    for old in img_dir.glob("*.png"):
        old.unlink()
    prepared = Prepared(Aggregates(tables, None, meta), Drawer())
    try:
        prepared.agg.prepare()
        infos, data = prepared.agg.early_view()
        # each figure as a report with no anomaly would draw it (the HTML made is not kept)
        detail = list(infos)[:MAX_DETAIL_RUNS]
        anchors = {r: f"run{i:03d}-{_slug(r)}" for i, r in enumerate(detail)}
        _across(infos, anchors, data, img_dir, prepared.drawer.ahead)
        for r in detail:
            _run_section(anchors[r], infos[r], data, img_dir, prepared.drawer.ahead)
    except BaseException:
        prepared.release()
        raise
    return prepared


def write_report(tables: dict[str, DataFrame], out: Path, verdicts: DataFrame | None = None,
                 prepared: Prepared | None = None) -> Path:
    """Write ``<out>/report/report.html`` and its plots (``<out>/report/img/*.png``); return the HTML's path.
    ``prepared``: ``prepare_report``'s, of the same tables but the checkers' (released here, as is any
    ``Aggregates`` of the report)."""
    started = time.monotonic()
    report_dir = Path(out) / "report"
    img_dir = report_dir / "img"
    agg = Aggregates(tables, verdicts) if prepared is None else prepared.agg
    drawer = Drawer() if prepared is None else prepared.drawer
    try:
        if prepared is not None:
            agg.complete(tables, verdicts)
        else:
            img_dir.mkdir(parents=True, exist_ok=True)
            for old in img_dir.glob("*.png"):
                old.unlink()
        infos = agg.runs()
        log.info("report: %d runs summarized in %.1f s", len(infos), time.monotonic() - started)
        order = sorted(infos, key=lambda r: (not (infos[r]["anomalies"] or infos[r]["verdict"] in ("invalid",
                                                                                                      "unknown")), r))
        detail = order[:MAX_DETAIL_RUNS]
        anchors = {r: f"run{i:03d}-{_slug(r)}" for i, r in enumerate(detail)}   # also the plots' file names
        t = time.monotonic()
        data = agg.details([infos[r] for r in detail])
        log.info("report: details and cross-run aggregates collected in %.1f s", time.monotonic() - t)
        t = time.monotonic()
        across = _across(infos, anchors, data, img_dir, drawer.draw)
        log.info("report: cross-run part in %.1f s", time.monotonic() - t)
        t = time.monotonic()
        sections = [_run_section(anchors[r], infos[r], data, img_dir, drawer.draw) for r in detail]
        log.info("report: %d run sections written in %.1f s", len(sections), time.monotonic() - t)
        t = time.monotonic()
        drawer.wait()
        log.info("report: the last figure drawn %.1f s later", time.monotonic() - t)
    finally:
        drawer.close()   # (a failure: the figures queued are dropped, the one being drawn ends)
        agg.release()
    total = {k: sum(i[k] for i in infos.values()) for k in ("ops", "faults", "anomalies")}
    note = (f"All {len(infos)} runs are shown in detail." if len(detail) == len(infos) else
            f"Runs shown in detail: {len(detail)} of {len(infos)} (at most {MAX_DETAIL_RUNS}: the runs with anomalies "
            "or an invalid/unknown verdict first, then by name); the cross-run part covers all of them.")
    nav = " ".join(f"<a href=\"#{esc(anchors[r])}\">{esc(r)}</a>" for r in detail)
    doc = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>kafkasim analysis report</title>
<style>{CSS}</style></head><body>
<h1>kafkasim analysis report</h1>
{verdicts_block(infos, anchors)}
<p>{len(infos):,} runs · {total['ops']:,} client ops · {total['faults']:,} faults · {total['anomalies']:,} anomalies.
{esc(note)} Times are seconds since each run's first client op; durations in ms.</p>
<nav>{nav} <a href="#across">Across runs</a></nav>
{''.join(sections) if sections else none('No run to show in detail.')}
{across}
<p class="note">Generated by analysis/report.py in {time.monotonic() - started:.1f} s.</p>
</body></html>
"""
    path = report_dir / "report.html"
    path.write_text(doc, encoding="utf-8")
    return path
