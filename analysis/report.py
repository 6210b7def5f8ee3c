"""The pipeline's HTML report: one ``report.html`` with its PNG plots beside it (docs/analysis.md, "The report").

    path = write_report(tables, out)              # -> <out>/report/report.html, plots in <out>/report/img/

Spark does the work: every number shown is a ``groupBy`` / window /
``percentile_approx`` over the tables, and only small aggregates are
collected (per run and time bucket, per fault, per failover row, per
partition and bucket, per op type, per stage).  matplotlib (``analysis.plots``)
draws them.  Per-run sections are capped at :data:`MAX_DETAIL_RUNS` runs (those
with anomalies first); the cross-run part covers every run.  Missing or empty
tables give a sentence instead of a plot.
"""
from __future__ import annotations

import html
import json
import logging
import math
import re
import time
from functools import reduce
from pathlib import Path
from typing import Any, Iterable, Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis import plots
from kafkacommon.hashing import partition_for

log = logging.getLogger(__name__)

MAX_DETAIL_RUNS = 20        # runs with a section of their own
MAX_BUCKETS = 600           # time buckets per run for latency/throughput (1 s, or longer)
MAX_PART_BUCKETS = 200      # time buckets per run for the HW series
MAX_PARTITIONS = 8          # partitions plotted per run
MAX_POINTS = 500            # leader / ISR changes kept per partition
MAX_FAILOVER_ROWS = 60      # failover rows per run (bars and table)
MAX_ANOMALIES = 100         # anomalies listed per run
MAX_FAULTS = 200            # faults listed per run
MAX_BOX_RUNS = 60           # runs in the per-run stage box plot
OFFSETS_TOPIC = "__consumer_offsets"
STAGES = (("detect_ms", "detect"), ("elect_ms", "elect"), ("load_ms", "load"), ("first_commit_ms", "first commit"),
          ("unavailable_ms", "unavailable"), ("controller_failover_ms", "controller failover"),
          ("load_duration_ms", "load duration"))
BOX_STAGES = (("detect_ms", "detect"), ("elect_ms", "elect"), ("load_ms", "load"),
              ("first_commit_ms", "first commit"), ("unavailable_ms", "unavailable"))
FAULT_COLS = ["run", "fault", "kind", "target", "nodes", "start_ns", "heal_ns", "skipped"]
FAILOVER_COLS = ["run", "fault", "cause", "kind", "target", "time_ns", "heal_ms", "group", "partition", "old_leader",
                 "new_leader", "moved", "detect_ms", "detect_by", "elect_ms", "elect_reason", "load_ms",
                 "load_duration_ms", "first_commit_ms", "unavailable_ms", "unavailable_from_ms", "unavailable_to_ms",
                 "old_controller", "new_controller", "controller_failover_ms"]
ANOMALY_COLS = ["run", "kind", "message", "group", "topic", "partition", "op_indexes", "event_types", "details"]
QS = [0.05, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99]
# percentile_approx accuracy of the per-bucket latency series (a rank error of at most 1/1000 of a bucket's
# operations; Spark's default, 10000, is kept for the tables of numbers): at 10M operations the series'
# aggregation took about a third less with it
SERIES_ACCURACY = 1000

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
"""


class Html(str):
    """Text that is already HTML (not escaped again)."""


def esc(v: Any) -> str:
    if isinstance(v, Html):
        return v
    return html.escape("" if v is None else str(v), quote=True)


def fmt(v: Any, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v)
    return str(v)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Iterable[int] = ()) -> str:
    num = set(numeric)
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for r in rows:
        cells = "".join(f"<td class=\"n\">{esc(fmt(c))}</td>" if i in num else
                        f"<td>{c if isinstance(c, Html) else esc(fmt(c))}</td>" for i, c in enumerate(r))
        body.append(f"<tr>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def none(sentence: str) -> str:
    return f"<p class=\"none\">{esc(sentence)}</p>"


def _usable(tables: dict[str, DataFrame], name: str, cols: Sequence[str]) -> DataFrame | None:
    df = tables.get(name) if tables else None
    if df is None or not set(cols) <= set(df.columns):
        return None
    return df


def _slug(run: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", run)[:60] or "run"


# ------------------------------------------------------------------ Spark: the aggregates

def collect_many(frames: dict[str, DataFrame]) -> dict[str, list[dict]]:
    """Collect several small aggregates in one Spark job: every row as JSON, tagged with its frame's name."""
    out: dict[str, list[dict]] = {name: [] for name in frames}
    parts = [df.select(F.lit(name).alias("_k"), F.to_json(F.struct(*df.columns), {"ignoreNullFields": "false"})
                       .alias("_j")) for name, df in frames.items()]
    if parts:
        for r in reduce(DataFrame.unionByName, parts).collect():
            out[r["_k"]].append(json.loads(r["_j"]))
    return out


class Aggregates:
    """Every small aggregate the report draws, computed in Spark from ``tables`` (three collects in all)."""

    def __init__(self, tables: dict[str, DataFrame], verdicts: DataFrame | None) -> None:
        t = tables or {}
        self.ops = _usable(t, "ops", ["run", "f", "type", "invoke_ns", "complete_ns", "latency_ms", "group"])
        self.faults = _usable(t, "faults", FAULT_COLS)
        self.failovers = _usable(t, "failovers", FAILOVER_COLS)
        self.anomalies = _usable(t, "anomalies", ANOMALY_COLS)
        self.leaders = _usable(t, "leader_changes", ["run", "time_ns", "topic", "partition", "leader", "isr"])
        self.isr = _usable(t, "isr_changes", ["run", "time_ns", "topic", "partition", "isr"])
        self.hw = _usable(t, "hw_samples", ["run", "time_ns", "broker", "topic", "partition", "old", "new"])
        self.verdicts = verdicts if verdicts is not None and {"run", "verdict"} <= set(verdicts.columns) else None
        self._cached: list[DataFrame] = []
        # the small tables read several times are computed once
        if self.failovers is not None:
            self.failovers = self._cache(self.failovers.select(*FAILOVER_COLS))
        if self.faults is not None:
            self.faults = self._cache(self.faults.select(*FAULT_COLS))
        if self.leaders is not None:
            self.leaders = self._cache(self.leaders.select("run", "time_ns", "topic", "partition", "leader", "isr"))
        if self.isr is not None:
            self.isr = self._cache(self.isr.select("run", "time_ns", "topic", "partition", "isr"))

    def _cache(self, df: DataFrame) -> DataFrame:
        df = df.persist()
        self._cached.append(df)
        return df

    def release(self) -> None:
        for df in self._cached:
            df.unpersist()

    @property
    def spark(self):
        for df in (self.ops, self.faults, self.failovers, self.anomalies, self.leaders, self.verdicts):
            if df is not None:
                return df.sparkSession
        return None

    # ---------------------------------------------------------- collect 1: the runs
    def runs(self) -> dict[str, dict]:
        """run -> counts, first/last instants, groups, verdict, bucket sizes; every run of any table."""
        frames: dict[str, DataFrame] = {}
        if self.ops is not None:
            t = F.col("type")
            frames["ops"] = self.ops.groupBy("run").agg(
                F.count(F.lit(1)).alias("ops"), *[F.sum((t == k).cast("long")).alias(k)
                                                  for k in ("ok", "fail", "info", "open")],
                F.min("invoke_ns").alias("first_ns"),
                F.max(F.greatest("invoke_ns", F.coalesce("complete_ns", "invoke_ns"))).alias("last_ns"))
            # the group names as a plain distinct, not a collect_set (an object aggregate, which cost about a
            # second more at 10M operations)
            frames["groups"] = self.ops.where(F.col("group").isNotNull()).select("run", "group").distinct()
        if self.faults is not None:
            frames["faults"] = self.faults.groupBy("run").agg(
                F.count(F.lit(1)).alias("faults"), F.min("start_ns").alias("f_first"),
                F.max(F.coalesce("heal_ns", "start_ns")).alias("f_last"))
        if self.failovers is not None:
            g = F.col("group").isNotNull()
            frames["failovers"] = _of_faults(self.failovers).groupBy("run").agg(
                F.sum(g.cast("long")).alias("failovers"),
                F.sum((g & F.col("unavailable_ms").isNull()).cast("long")).alias("unrecovered"))
        if self.anomalies is not None:
            frames["anomalies"] = self.anomalies.groupBy("run").agg(F.count(F.lit(1)).alias("anomalies"))
        if self.leaders is not None:
            frames["leaders"] = self.leaders.groupBy("run").agg(
                F.max(F.when(F.col("topic") == OFFSETS_TOPIC, F.col("partition") + 1)).alias("offsets_partitions"),
                F.min("time_ns").alias("e_first"), F.max("time_ns").alias("e_last"))
        if self.verdicts is not None:
            frames["verdicts"] = self.verdicts.select(
                "run", "verdict", *(["unknowns"] if "unknowns" in self.verdicts.columns else []))
        out: dict[str, dict] = {}
        got = collect_many(frames)
        groups = got.pop("groups", [])
        for rows in got.values():
            for r in rows:
                info = out.setdefault(r["run"], {
                    "run": r["run"], "ops": 0, "ok": 0, "fail": 0, "info": 0, "open": 0, "faults": 0,
                    "failovers": 0, "unrecovered": 0, "anomalies": 0, "groups": [], "verdict": None, "unknowns": [],
                    "first_ns": None, "offsets_partitions": None})
                info.update({k: v for k, v in r.items() if v is not None})
        for r in groups:   # from ops: its run has a row of the ops frame above
            out[r["run"]]["groups"].append(r["group"])
        for info in out.values():
            info["groups"].sort()
            firsts = [info[k] for k in ("first_ns", "f_first", "e_first") if info.get(k) is not None]
            lasts = [info[k] for k in ("last_ns", "f_last", "e_last") if info.get(k) is not None]
            info["t0"] = info["first_ns"] if info["first_ns"] is not None else (min(firsts) if firsts else 0)
            info["end_s"] = max(0.0, ((max(lasts) if lasts else info["t0"]) - info["t0"]) / 1e9)
            info["bucket_s"] = float(max(1, math.ceil(info["end_s"] / MAX_BUCKETS)))
            info["pbucket_s"] = max(0.01, math.ceil(info["end_s"] / MAX_PART_BUCKETS * 100) / 100)
        return dict(sorted(out.items()))

    # ---------------------------------------------------------- collect 2: per detail run, and across runs
    def details(self, infos: Sequence[dict]) -> dict[str, Any]:
        """The detail runs' series, faults, failover rows, anomalies and chosen partitions, and the cross-run
        stage and latency percentiles and anomaly counts."""
        frames: dict[str, DataFrame] = {}
        runs = [i["run"] for i in infos]
        rf = self._run_frame(infos) if infos else None
        secs = lambda c: ((F.col(c) - F.col("_t0")) / 1e9)  # noqa: E731
        if self.ops is not None:
            t = F.col("type")
            if rf is not None:
                b = F.floor((F.col("complete_ns") - F.col("_t0")) / F.col("_bucket"))
                frames["series"] = (
                    self.ops.where(F.col("complete_ns").isNotNull()).join(rf, "run")
                    .groupBy("run", b.alias("b"), "_bucket")
                    .agg(*[F.sum((t == k).cast("long")).alias(k) for k in ("ok", "fail", "info")],
                         F.percentile_approx(F.when(t == "ok", F.col("latency_ms")), F.array(F.lit(0.5), F.lit(0.99)),
                                             SERIES_ACCURACY).alias("lat")))
            frames["op_latency"] = self.ops.groupBy("f").agg(
                F.count(F.lit(1)).alias("n"), *[F.sum((t == k).cast("long")).alias(k)
                                                for k in ("ok", "fail", "info", "open")],
                F.percentile_approx(F.when(t == "ok", F.col("latency_ms")),
                                    F.array(F.lit(0.5), F.lit(0.9), F.lit(0.99))).alias("q"),
                F.max(F.when(t == "ok", F.col("latency_ms"))).alias("max"))
        if self.faults is not None and rf is not None:
            frames["faults"] = _capped(self.faults.join(rf, "run"), ["start_ns", "fault"], MAX_FAULTS).select(
                "run", "fault", "kind", "target", "nodes", "skipped", secs("start_ns").alias("start_s"),
                secs("heal_ns").alias("heal_s"))
        if self.failovers is not None:
            if rf is not None:
                frames["failovers"] = _capped(self.failovers.join(rf, "run"),
                                              ["time_ns", "fault", F.col("group").asc_nulls_first()],
                                              MAX_FAILOVER_ROWS).select(*FAILOVER_COLS, secs("time_ns").alias("time_s"))
            stack = "stack({}, {}) as (stage, value)".format(
                len(STAGES), ", ".join(f"'{k}', cast({k} as double)" for k, _ in STAGES))
            long = _of_faults(self.failovers).select("run", F.expr(stack)).where(F.col("value").isNotNull())
            frames["stages"] = long.rollup("stage", "run").agg(
                F.count("value").alias("n"), F.percentile_approx("value", F.array(*[F.lit(q) for q in QS])).alias("q"),
                F.max("value").alias("max"), F.grouping("run").alias("all_runs")).where(F.col("stage").isNotNull())
        if self.anomalies is not None:
            frames["kinds"] = self.anomalies.groupBy("kind").agg(F.count(F.lit(1)).alias("n"),
                                                                 F.countDistinct("run").alias("runs"))
            if runs:
                frames["anomalies"] = _capped(self.anomalies.where(F.col("run").isin(*runs)), ["kind", "message"],
                                              MAX_ANOMALIES).select(*ANOMALY_COLS)
        if self.leaders is not None and runs:
            frames["chosen"] = self._chosen(infos)
        got = collect_many(frames)
        out: dict[str, Any] = {"series": {}, "faults": {}, "failovers": {}, "anomalies": {}}
        for r in sorted(got.get("series", []), key=lambda r: (r["run"], r["b"])):
            p = r["lat"] or [None, None]
            out["series"].setdefault(r["run"], []).append({"t_s": r["b"] * r["_bucket"] / 1e9, "ok": r["ok"],
                                                           "fail": r["fail"], "info": r["info"], "p50": p[0],
                                                           "p99": p[1]})
        for name, order in (("faults", lambda r: (r["start_s"], r["fault"] or 0)),
                            ("failovers", lambda r: (r["time_ns"], r["fault"] or 0, r["group"] is not None,
                                                     r["group"] or "")),
                            ("anomalies", lambda r: (r["kind"] or "", r["message"] or ""))):
            for r in sorted(got.get(name, []), key=lambda r: (r["run"], order(r))):
                out[name].setdefault(r["run"], []).append(r)
        out["stages"], out["stages_per_run"] = {}, {}
        for r in got.get("stages", []):
            if r["all_runs"]:
                out["stages"][r["stage"]] = {"n": r["n"], "q": r["q"], "max": r["max"]}
            else:
                out["stages_per_run"][(r["run"], r["stage"])] = {"n": r["n"], "q": [r["q"][i] for i in (0, 1, 2, 3, 5)]}
        out["op_latency"] = []
        for r in sorted(got.get("op_latency", []), key=lambda r: (-r["n"], r["f"] or "")):
            q = r.pop("q") or [None] * 3
            out["op_latency"].append(dict(r, p50=q[0], p90=q[1], p99=q[2]))
        out["kinds"] = sorted(got.get("kinds", []), key=lambda r: r["kind"] or "")
        out["partitions"] = self._partitions(got.get("chosen", []), rf) if got.get("chosen") else {}
        return out

    def _run_frame(self, infos: Sequence[dict]) -> DataFrame:
        rows = [(i["run"], int(i["t0"]), int(i["bucket_s"] * 1e9), int(round(i["pbucket_s"] * 1e9))) for i in infos]
        return F.broadcast(self.spark.createDataFrame(rows, "run string, _t0 long, _bucket long, _pbucket long"))

    def _owners(self, infos: Sequence[dict]) -> DataFrame | None:
        """(run, partition, owners, topic): the offsets partition of each of the runs' groups (Kafka's
        partitionFor, on the few group names collected with the runs)."""
        rows: dict[tuple[str, int], list[str]] = {}
        for i in infos:
            for g in i["groups"] if i.get("offsets_partitions") else ():
                rows.setdefault((i["run"], partition_for(g, int(i["offsets_partitions"]))), []).append(g)
        if not rows:
            return None
        return self.spark.createDataFrame([(r, p, ", ".join(sorted(gs)), OFFSETS_TOPIC) for (r, p), gs in rows.items()],
                                          "run string, partition int, owners string, topic string")

    def _chosen(self, infos: Sequence[dict]) -> DataFrame:
        """Per run, up to MAX_PARTITIONS partitions: those an anomaly names first, then the workload topics',
        then the offsets partitions of the run's groups, then the busiest (most leader and ISR changes)."""
        changes = self.leaders.select("run", "topic", "partition")
        if self.isr is not None:
            changes = changes.unionByName(self.isr.select("run", "topic", "partition"))
        counts = (changes.where(F.col("run").isin(*[i["run"] for i in infos])).groupBy("run", "topic", "partition")
                  .agg(F.count(F.lit(1)).alias("changes")))
        owners = self._owners(infos)
        if owners is not None:
            counts = counts.join(F.broadcast(owners), ["run", "topic", "partition"], "left")
        else:
            counts = counts.withColumn("owners", F.lit(None).cast("string"))
        if self.anomalies is not None:
            named = (self.anomalies.where(F.col("topic").isNotNull() & F.col("partition").isNotNull())
                     .select("run", "topic", "partition").distinct().withColumn("_named", F.lit(True)))
            counts = counts.join(F.broadcast(named), ["run", "topic", "partition"], "left")
        else:
            counts = counts.withColumn("_named", F.lit(None).cast("boolean"))
        prio = (F.when(F.col("_named"), 0).when(F.col("topic") != OFFSETS_TOPIC, 1)
                .when(F.col("owners").isNotNull(), 2).otherwise(3))
        return _capped(counts.withColumn("_prio", prio), ["_prio", F.col("changes").desc(), "topic", "partition"],
                       MAX_PARTITIONS).drop("_named")

    # ---------------------------------------------------------- collect 3: the chosen partitions over time
    def _partitions(self, chosen: list[dict], rf: DataFrame) -> dict[str, list[dict]]:
        """Leader and ISR size at each change (at most MAX_POINTS each) and each broker's HW per bucket."""
        key = ["run", "topic", "partition"]
        parts = {(c["run"], c["topic"], c["partition"]): dict(c, leader=[], isr=[], hw={}, hw_decreases=[])
                 for c in chosen}
        sel = F.broadcast(self.spark.createDataFrame([k for k in parts], "run string, topic string, partition int"))
        secs = ((F.col("time_ns") - F.col("_t0")) / 1e9).alias("t_s")
        frames = {"leader": _capped(self.leaders.join(sel, key).join(rf, "run"), ["time_ns"], MAX_POINTS, key)
                  .select(*key, secs, F.coalesce("leader", F.lit(-1)).alias("v"), F.size("isr").alias("isr"))}
        if self.isr is not None:
            frames["isr"] = (_capped(self.isr.join(sel, key).join(rf, "run"), ["time_ns"], MAX_POINTS, key)
                             .select(*key, secs, F.size("isr").alias("isr")))
        if self.hw is not None:
            b = F.floor((F.col("time_ns") - F.col("_t0")) / F.col("_pbucket"))
            frames["hw"] = (self.hw.join(sel, key).join(rf, "run").groupBy(*key, "broker", b.alias("b"), "_pbucket")
                            .agg(F.max_by("new", "time_ns").alias("hw"),
                                 F.min(F.when(F.col("new") < F.col("old"), F.col("new"))).alias("dec")))
        got = collect_many(frames)
        for r in sorted(got["leader"], key=lambda r: r["t_s"]):
            p = parts[(r["run"], r["topic"], r["partition"])]
            p["leader"].append((r["t_s"], r["v"]))
            p["isr"].append((r["t_s"], r["isr"]))
        for r in got.get("isr", []):
            parts[(r["run"], r["topic"], r["partition"])]["isr"].append((r["t_s"], r["isr"]))
        for r in sorted(got.get("hw", []), key=lambda r: r["b"]):
            p = parts[(r["run"], r["topic"], r["partition"])]
            t_s = (r["b"] + 1) * r["_pbucket"] / 1e9          # the value at the bucket's end
            p["hw"].setdefault(r["broker"], []).append((t_s, r["hw"]))
            if r["dec"] is not None:
                p["hw_decreases"].append((t_s, r["dec"]))
        out: dict[str, list[dict]] = {}
        for (run, topic, partition), p in sorted(parts.items(), key=lambda kv: (kv[0][0], kv[1]["_prio"],
                                                                                kv[0][1], kv[0][2])):
            p["isr"].sort(key=lambda x: x[0])
            p["title"] = f"{topic}/{partition}" + (f" (offsets of {p['owners']})" if p["owners"] else "")
            out.setdefault(run, []).append(p)
        return out


def _of_faults(failovers: DataFrame) -> DataFrame:
    """The rows of faults, not of moves no fault explains (docs/chaos.md): the figures leave those out."""
    return failovers.where(F.col("cause").isNull() | (F.col("cause") == "fault"))


def _capped(df: DataFrame, order: list, cap: int, part: Sequence[str] = ("run",)) -> DataFrame:
    """The first ``cap`` rows of each ``part`` in ``order``."""
    w = Window.partitionBy(*part).orderBy(*order)
    return df.withColumn("_rn", F.row_number().over(w)).where(F.col("_rn") <= cap).drop("_rn")


# ------------------------------------------------------------------ HTML sections

def _verdict(v: str | None) -> Html | str:
    return Html(f"<span class=\"v-{esc(v)}\">{esc(v)}</span>") if v else "–"


def _img(img_dir: Path, name: str, alt: str) -> str:
    return f"<img src=\"{esc(img_dir.name + '/' + name)}\" alt=\"{esc(alt)}\">"


def _across(infos: dict[str, dict], anchors: dict[str, str], data: dict, img_dir: Path) -> str:
    parts = ["<h2 id=\"across\">Across runs</h2>"]
    if not infos:
        return parts[0] + none("No runs: every table is empty, nothing to show.")
    links = {r: Html(f"<a href=\"#{esc(anchors[r])}\">{esc(r)}</a>") if r in anchors else r for r in infos}
    overall, per_run = data["stages"], data["stages_per_run"]
    rows = []
    for r, i in infos.items():
        s = per_run.get((r, "unavailable_ms"))
        rows.append([links[r], _verdict(i["verdict"]), i["ops"], i["ok"], i["fail"], i["info"], i["open"],
                     i["faults"], i["failovers"], i["unrecovered"], s["q"][2] if s else None,
                     s["q"][4] if s else None, i["anomalies"], i["end_s"], "; ".join(i["unknowns"])])
    parts.append("<h3>Runs</h3>")
    parts.append(table(["run", "verdict", "ops", "ok", "fail", "info", "open", "faults", "failover rows",
                        "not recovered", "unavailable p50 (ms)", "unavailable p95 (ms)", "anomalies",
                        "duration (s)", "unknown because"], rows, numeric=range(2, 14)))
    parts.append("<h3>Failover stages, all runs</h3>")
    if overall:
        parts.append(table(["stage (ms from the fault)", "rows", "p50", "p90", "p99", "max"],
                           [[label, overall[k]["n"], overall[k]["q"][2], overall[k]["q"][4], overall[k]["q"][6],
                             overall[k]["max"]] for k, label in STAGES if k in overall], numeric=range(1, 6)))
        box_runs = [r for r in infos if any((r, k) in per_run for k, _ in BOX_STAGES)][:MAX_BOX_RUNS]
        stages = [(k, label) for k, label in BOX_STAGES if any((r, k) in per_run for r in box_runs)]
        if box_runs and stages:
            plots.stage_boxes(img_dir / "stages-per-run.png", stages, box_runs, per_run)
            capped = sum(1 for r in infos if any((r, k) in per_run for k, _ in BOX_STAGES)) > len(box_runs)
            parts.append("<p class=\"note\">Per run: box p25–p75, line the median, whiskers p5–p95 "
                         f"(Spark's percentile_approx){'; the first ' + str(MAX_BOX_RUNS) + ' runs' if capped else ''}."
                         "</p>" + _img(img_dir, "stages-per-run.png", "failover stages per run"))
    else:
        parts.append(none("No failover rows: no fault hit a group's coordinator or the controller."))
    parts.append("<h3>Op latency by op type, all runs</h3>")
    lat = data["op_latency"]
    if lat:
        parts.append(table(["op", "ops", "ok", "fail", "info", "open", "p50 (ms, ok)", "p90", "p99", "max"],
                           [[r["f"], r["n"], r["ok"], r["fail"], r["info"], r["open"], r["p50"], r["p90"], r["p99"],
                             r["max"]] for r in lat], numeric=range(1, 10)))
        if any(r["p50"] is not None for r in lat):
            plots.op_latency(img_dir / "op-latency.png", lat)
            parts.append(_img(img_dir, "op-latency.png", "op latency by op type"))
    else:
        parts.append(none("No client operations."))
    parts.append("<h3>Anomalies by kind</h3>")
    kinds = data["kinds"]
    parts.append(table(["kind", "anomalies", "runs"], [[k["kind"], k["n"], k["runs"]] for k in kinds],
                       numeric=(1, 2)) if kinds else none("No anomalies in any run."))
    return "\n".join(parts)


def _run_section(anchor: str, info: dict, data: dict, img_dir: Path) -> str:
    run, slug = info["run"], anchor
    faults = data["faults"].get(run, [])
    shaded = [f for f in faults if not f["skipped"]]
    end_s = info["end_s"]
    out = [f"<h2 id=\"{esc(anchor)}\">Run {esc(run)}</h2>",
           f"<p>Verdict: {esc(_verdict(info['verdict']))} · {info['ops']:,} ops ({info['ok']:,} ok, "
           f"{info['fail']:,} fail, {info['info']:,} info, {info['open']:,} open) · faults: {info['faults']} · "
           f"anomalies: {info['anomalies']} · {end_s:.1f} s · groups: {esc(', '.join(info['groups']) or '–')}</p>"]
    out.append("<h3>Latency and throughput</h3>")
    series = data["series"].get(run)
    if series:
        plots.timeseries(img_dir / f"{slug}-timeseries.png", series, info["bucket_s"], shaded, end_s)
        out.append(f"<p class=\"note\">Per {info['bucket_s']:g}-s bucket of completions; shaded: fault windows "
                   "(start to heal).</p>" + _img(img_dir, f"{slug}-timeseries.png", f"latency and throughput of {run}"))
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
        plots.unavailability(img_dir / f"{slug}-unavailability.png", lanes, windows, shaded, end_s)
        out.append("<p class=\"note\">From the group's first failed op after a fault to its first ok "
                   "coordinator op (the failovers table).</p>"
                   + _img(img_dir, f"{slug}-unavailability.png", f"unavailability windows of {run}"))
    else:
        out.append(none("No group was unavailable after a fault (no failed group op in a failover row)."))
    out.append("<h3>Failover stages</h3>")
    if rows:
        for r in rows:
            if r["fault"] is None:   # a move no fault explains: its cause where the fault goes
                r["fault"], r["kind"], r["target"] = "-", f"({r['cause']})", ""
            r["label"] = f"#{r['fault']} {r['kind'] or ''} {r['target'] or ''} → " + (
                r["group"] if r["group"] is not None else "controller")
        plots.stages(img_dir / f"{slug}-stages.png", rows)
        capped = f" (the first {MAX_FAILOVER_ROWS})" if len(rows) >= MAX_FAILOVER_ROWS else ""
        out.append(f"<p class=\"note\">Per (fault, group){capped}: detect, elect − detect, load − elect, first commit −"
                   " load, in ms from the fault's start; a stage that did not happen adds nothing.</p>"
                   + _img(img_dir, f"{slug}-stages.png", f"failover stages of {run}"))
        out.append(table(["fault", "kind", "target", "at (s)", "group", "partition", "old → new leader", "detect",
                          "by", "elect", "load", "first commit", "unavailable", "controller failover"],
                         [[r["fault"], r["kind"], r["target"], r["time_s"], r["group"] or "(controller)",
                           r["partition"], f"{fmt(r['old_leader'] if r['group'] else r['old_controller'])} → "
                           f"{fmt(r['new_leader'] if r['group'] else r['new_controller'])}", r["detect_ms"],
                           r["detect_by"], r["elect_ms"], r["load_ms"], r["first_commit_ms"],
                           r["unavailable_ms"] if r["group"] is None or r["unavailable_ms"] is not None
                           else "not recovered", r["controller_failover_ms"]] for r in rows],
                         numeric=(0, 3, 5, 7, 9, 10, 11, 12, 13)))
    else:
        out.append(none("No failover rows: no fault hit a group's coordinator or the controller in this run."))
    out.append("<h3>Partitions: leader, ISR, HW</h3>")
    parts = data["partitions"].get(run, [])
    if parts:
        plots.partitions(img_dir / f"{slug}-partitions.png", parts, shaded, end_s)
        out.append(f"<p class=\"note\">At most {MAX_PARTITIONS} partitions: those an anomaly names, the workload "
                   "topics', the offsets partitions of the run's groups, then the busiest. HW: each broker's last "
                   f"value per {info['pbucket_s']:g}-s bucket; a red cross where a HW went back.</p>"
                   + _img(img_dir, f"{slug}-partitions.png", f"partitions of {run}"))
    else:
        out.append(none("No partition state changes recorded for this run."))
    out.append("<h3>Anomalies</h3>")
    anomalies = data["anomalies"].get(run, [])
    if anomalies:
        capped = f" (the first {MAX_ANOMALIES})" if info["anomalies"] > len(anomalies) else ""
        out.append(f"<p class=\"note\">Anomalies: {info['anomalies']}{capped}.</p>" + table(
            ["kind", "message", "group", "partition", "evidence ops (index)", "evidence events", "details"],
            [[a["kind"], a["message"], a["group"],
              f"{a['topic']}/{a['partition']}" if a["topic"] is not None else None,
              " ".join(str(i) for i in sorted(a["op_indexes"] or [])), ", ".join(a["event_types"] or []),
              _short(a["details"])] for a in anomalies]))
    else:
        out.append(none("No anomalies in this run."))
    return "\n".join(out)


def _short(details: str | None, limit: int = 400) -> str | None:
    if details is None:
        return None
    try:
        details = json.dumps(json.loads(details), sort_keys=True)
    except ValueError:
        pass
    return details if len(details) <= limit else details[:limit] + "…"


# ------------------------------------------------------------------ the entry point

def write_report(tables: dict[str, DataFrame], out: Path, verdicts: DataFrame | None = None) -> Path:
    """Write ``<out>/report/report.html`` and its plots (``<out>/report/img/*.png``); return the HTML's path."""
    started = time.monotonic()
    report_dir = Path(out) / "report"
    img_dir = report_dir / "img"
    img_dir.mkdir(parents=True, exist_ok=True)
    for old in img_dir.glob("*.png"):
        old.unlink()
    agg = Aggregates(tables, verdicts)
    try:
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
        across = _across(infos, anchors, data, img_dir)
        log.info("report: cross-run part in %.1f s", time.monotonic() - t)
        t = time.monotonic()
        sections = [_run_section(anchors[r], infos[r], data, img_dir) for r in detail]
        log.info("report: %d run sections drawn in %.1f s", len(sections), time.monotonic() - t)
    finally:
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
<p>{len(infos):,} runs · {total['ops']:,} client ops · {total['faults']:,} faults · {total['anomalies']:,} anomalies.
{esc(note)} Times are seconds since each run's first client op; durations in ms.</p>
<nav><a href="#across">Across runs</a> {nav}</nav>
{across}
{''.join(sections) if sections else none('No run to show in detail.')}
<p class="note">Generated by analysis/report.py in {time.monotonic() - started:.1f} s.</p>
</body></html>
"""
    path = report_dir / "report.html"
    path.write_text(doc, encoding="utf-8")
    return path
