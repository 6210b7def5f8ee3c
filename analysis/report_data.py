"""The report's numbers: every small aggregate ``analysis.report`` draws, computed in Spark from the tables
(``groupBy``, windows, ``percentile_approx``) and collected in a few jobs (``collect_many``: every frame's rows
as JSON, tagged, in one union).
"""
from __future__ import annotations

import copy
import math
from typing import Any, Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis.local_rows import local_rows
from analysis.runs import anomalies_by_kind
from analysis.runs import of_faults as _of_faults
from analysis.spark import Background, collect_many
from kafkacommon.hashing import partition_for

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
AHEAD = "ahead:"            # runs()'s names for the frames it collects for details()
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
EVIDENCE_OP_COLS = ["run", "index", "complete_index", "process", "f", "type", "invoke_ns", "complete_ns", "latency_ms",
                    "group", "node", "error", "topic", "partition", "offset", "value", "member", "generation"]
ANOMALY_COLS = ["run", "kind", "message", "group", "topic", "partition", "op_indexes", "event_types", "details"]
META_COLS = ["run", "scenario", "seed", "client"]
QS = [0.05, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99]
# the failover rows' stages as (stage, value) rows
_STACK = "stack({}, {}) as (stage, value)".format(len(STAGES), ", ".join(f"'{k}', cast({k} as double)" for k, _ in STAGES))
# ``details``'s frames of each detail run's own rows
PER_RUN = ("series", "faults", "failovers")
# percentile_approx accuracy of the per-bucket latency series (a rank error of at most 1/1000 of a bucket's
# operations; Spark's default, 10000, is kept for the tables of numbers): at 10M operations the series'
# aggregation took about a third less with it
SERIES_ACCURACY = 1000

class Later:
    """A dict computed by ``fn()`` in another driver thread (``analysis.spark.Background``, its Spark jobs named
    ``name``); ``get`` waits for it."""

    def __init__(self, fn, name: str) -> None:
        self._bg = Background(fn, name)

    def get(self, key: Any, default: Any = None) -> Any:
        return self._bg.result().get(key, default)

    def wait(self) -> None:
        self._bg.wait()


def _usable(tables: dict[str, DataFrame], name: str, cols: Sequence[str]) -> DataFrame | None:
    df = tables.get(name) if tables else None
    if df is None or not set(cols) <= set(df.columns):
        return None
    return df


# ------------------------------------------------------------------ Spark: the aggregates

class Aggregates:
    """Every small aggregate the report draws, computed in Spark from ``tables`` (three collects in all).  Each
    run's scenario, seed and client come from ``meta`` (``analysis.runs.read_meta``'s: known before the checkers
    end, so ``prepare`` collects them) when given, else from the ``runs`` table."""

    def __init__(self, tables: dict[str, DataFrame], verdicts: DataFrame | None,
                 meta: DataFrame | None = None) -> None:
        t = tables or {}
        self.ops = _usable(t, "ops", ["run", "f", "type", "invoke_ns", "complete_ns", "latency_ms", "group"])
        self.faults = _usable(t, "faults", FAULT_COLS)
        self.failovers = _usable(t, "failovers", FAILOVER_COLS)
        self.anomalies = _usable(t, "anomalies", ANOMALY_COLS)
        self.leaders = _usable(t, "leader_changes", ["run", "time_ns", "topic", "partition", "leader", "isr"])
        self.isr = _usable(t, "isr_changes", ["run", "time_ns", "topic", "partition", "isr"])
        self.hw = _usable(t, "hw_samples", ["run", "time_ns", "broker", "topic", "partition", "old", "new"])
        self.verdicts = verdicts if verdicts is not None and {"run", "verdict"} <= set(verdicts.columns) else None
        self._early_meta = meta is not None and set(META_COLS) <= set(meta.columns)
        self.meta = meta.select(*META_COLS) if self._early_meta else _usable(t, "runs", META_COLS)
        self.evidence_ops = _usable(t, "ops", EVIDENCE_OP_COLS)
        self._cached: list[DataFrame] = []
        self._later: list[Later] = []
        # prepare()'s collects: the runs' rows of the frames that need no table of the checkers', and the details
        # collected then (``_early_runs``: the runs whose per-run rows they hold)
        self._early_rows: dict[str, list[dict]] | None = None
        self._early_details: dict[str, list[dict]] = {}
        self._early_runs: set[str] = set()
        self._early_partitions: Later | None = None   # their chosen partitions' series, as if no anomaly named one
        # runs()'s collect of details' frames of the checkers' tables (``_ahead``), and the runs they are for
        self._ahead_details: dict[str, list[dict]] = {}
        self._ahead_runs: set[str] | None = None
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
        for later in self._later:   # what another thread computes from the cached frames ends first
            later.wait()
        for df in self._cached:
            df.unpersist()

    @property
    def spark(self):
        for df in (self.ops, self.faults, self.failovers, self.anomalies, self.leaders, self.verdicts):
            if df is not None:
                return df.sparkSession
        return None

    # ---------------------------------------------------------- collect 1: the runs
    def complete(self, tables: dict[str, DataFrame], verdicts: DataFrame | None) -> None:
        """After ``prepare``: the tables the checkers make (``anomalies``, the verdicts, ``runs``)."""
        self.anomalies = _usable(tables, "anomalies", ANOMALY_COLS)
        self.verdicts = verdicts if verdicts is not None and {"run", "verdict"} <= set(verdicts.columns) else None
        if not self._early_meta:
            self.meta = _usable(tables, "runs", META_COLS)

    def prepare(self) -> None:
        """Collect now what needs none of the checkers' tables (``complete`` adds those later): the runs'
        counts and instants, the cross-run figures of the operations and the failover rows, and, when every
        run known so far gets a section of its own (at most MAX_DETAIL_RUNS), their series, faults and failover
        rows.  ``analysis.main`` calls it while the checkers still run; ``runs`` and ``details`` then collect only
        the rest, and give what they gave without it."""
        self._early_rows = collect_many(self._runs_frames(early=True))
        infos = self._infos(self._early_rows)
        detail = list(infos.values()) if len(infos) <= MAX_DETAIL_RUNS else []
        frames = self._detail_frames(detail, early=True)
        if detail:
            frames.update(self._per_run_frames(detail))
            self._early_runs = set(infos)
            if self.leaders is not None:   # the partitions chosen as when no anomaly names one (the common case)
                frames["chosen"] = self._chosen(detail)
        self._early_details = got = collect_many(frames)
        chosen = got.pop("chosen", None)
        if chosen:   # their series, collected in another driver thread (``details`` uses them if no anomaly)
            rf = self._run_frame(detail)
            self._early_partitions = Later(lambda: self._partitions(chosen, rf), "report")
            self._later.append(self._early_partitions)

    def early_view(self) -> tuple[dict[str, dict], dict[str, Any]]:
        """After ``prepare``: the runs and details as ``runs`` and ``details`` would give them if the checkers'
        tables were empty (copies: the caller may change them), for the figures drawn ahead of the checkers
        (``analysis.report``).  The details hold only what ``prepare`` collected."""
        data = _shaped(copy.deepcopy(self._early_details))
        data["partitions"] = self._early_partitions if self._early_partitions is not None else {}
        return self._infos(self._early_rows or {}), data

    def _runs_frames(self, early: bool | None) -> dict[str, DataFrame]:
        """``runs``'s frames: those that need no table of the checkers' (``early`` True), the others (False),
        or all (None)."""
        frames: dict[str, DataFrame] = {}
        if early is False:
            return self._checked_runs_frames(frames)
        if self.meta is not None and self._early_meta:
            frames["meta"] = self.meta
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
        if self.leaders is not None:
            frames["leaders"] = self.leaders.groupBy("run").agg(
                F.max(F.when(F.col("topic") == OFFSETS_TOPIC, F.col("partition") + 1)).alias("offsets_partitions"),
                F.min("time_ns").alias("e_first"), F.max("time_ns").alias("e_last"))
        return frames if early else self._checked_runs_frames(frames)

    def _checked_runs_frames(self, frames: dict[str, DataFrame]) -> dict[str, DataFrame]:
        if self.anomalies is not None:
            frames["anomalies"] = self.anomalies.groupBy("run").agg(F.count(F.lit(1)).alias("anomalies"))
        if self.verdicts is not None:
            frames["verdicts"] = self.verdicts.select(
                "run", "verdict", *(["unknowns"] if "unknowns" in self.verdicts.columns else []))
        if self.meta is not None and not self._early_meta:
            frames["meta"] = self.meta.select(*META_COLS)
        if self.anomalies is not None:
            frames["by_kind"] = anomalies_by_kind(self.anomalies)
        return frames

    def runs(self) -> dict[str, dict]:
        """run -> counts, first/last instants, groups, verdict, bucket sizes; every run of any table.  After
        ``prepare``, when every run gets a section of its own, the same collect also takes what ``details``
        needs of the checkers' tables whatever their anomalies (``_ahead``), one job for both."""
        if self._early_rows is None:
            return self._infos(collect_many(self._runs_frames(early=None)))
        frames = self._runs_frames(early=False)
        ahead = self._ahead()
        if ahead:
            frames.update({AHEAD + k: v for k, v in self._detail_frames(ahead, early=False, chosen=False,
                                                                         evidence=False).items()})
        got = collect_many(frames)
        if ahead:
            self._ahead_details = {k[len(AHEAD):]: got.pop(k) for k in list(got) if k.startswith(AHEAD)}
            self._ahead_runs = {i["run"] for i in ahead}
        return self._infos({**self._early_rows, **got})

    def _ahead(self) -> list[dict]:
        """The runs ``details`` will be asked for, when known before the checkers' counts: every run ``prepare``
        saw, when each gets a section of its own."""
        if not self._early_runs:
            return []
        return list(self._infos(self._early_rows or {}).values())

    @staticmethod
    def _infos(collected: dict[str, list[dict]]) -> dict[str, dict]:
        out: dict[str, dict] = {}
        got = dict(collected)
        groups = got.pop("groups", [])
        for rows in got.values():
            for r in rows:
                info = out.setdefault(r["run"], {
                    "run": r["run"], "ops": 0, "ok": 0, "fail": 0, "info": 0, "open": 0, "faults": 0,
                    "failovers": 0, "unrecovered": 0, "anomalies": 0, "groups": [], "verdict": None, "unknowns": [],
                    "first_ns": None, "offsets_partitions": None, "scenario": None, "seed": None, "client": None,
                    "anomalies_by_kind": {}})
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
        runs = [i["run"] for i in infos]
        if self._early_rows is None:
            got = collect_many({**self._per_run_frames(infos), **self._detail_frames(infos, early=None)})
        else:   # what prepare() did not collect
            missing = [i for i in infos if i["run"] not in self._early_runs]
            # prepare()'s chosen partitions are these runs' when none of them has an anomaly (which could name a
            # partition, and put it first)
            early_partitions = self._early_partitions if self._early_partitions is not None and not missing and not any(
                i["anomalies"] for i in infos) else None
            if not missing and self._ahead_runs == set(runs):   # runs() collected the rest but these
                got = {**self._ahead_details, **collect_many(self._detail_frames(
                    infos, early=False, chosen=early_partitions is None, checked=False))}
            else:
                got = collect_many({**self._per_run_frames(missing),
                                    **self._detail_frames(infos, early=False, chosen=early_partitions is None)})
            chosen = set(runs)
            for name, rows in self._early_details.items():
                if name in PER_RUN:
                    rows = [r for r in rows if r["run"] in chosen]
                got[name] = got.get(name, []) + rows
        out = _shaped(got)
        # the chosen partitions' series (the third collect) in another driver thread, while this one draws the
        # figures that need only the rows above (``analysis.report`` reads them last)
        if self._early_rows is not None and early_partitions is not None:
            out["partitions"] = early_partitions
            return out
        chosen = got.get("chosen")
        rf = self._run_frame(infos) if chosen else None
        out["partitions"] = Later(lambda: self._partitions(chosen, rf) if chosen else {}, "report")
        self._later.append(out["partitions"])
        return out

    def _per_run_frames(self, infos: Sequence[dict]) -> dict[str, DataFrame]:
        """The runs' own rows (``PER_RUN``): series of their operations, faults and failover rows."""
        frames: dict[str, DataFrame] = {}
        if not infos:
            return frames
        rf = self._run_frame(infos)
        secs = lambda c: ((F.col(c) - F.col("_t0")) / 1e9)  # noqa: E731
        if self.ops is not None:
            t = F.col("type")
            b = F.floor((F.col("complete_ns") - F.col("_t0")) / F.col("_bucket"))
            frames["series"] = (
                self.ops.where(F.col("complete_ns").isNotNull()).join(rf, "run")
                .groupBy("run", b.alias("b"), "_bucket")
                .agg(*[F.sum((t == k).cast("long")).alias(k) for k in ("ok", "fail", "info")],
                     F.percentile_approx(F.when(t == "ok", F.col("latency_ms")), F.array(F.lit(0.5), F.lit(0.99)),
                                         SERIES_ACCURACY).alias("lat")))
        if self.faults is not None:
            frames["faults"] = _capped(self.faults.join(rf, "run"), ["start_ns", "fault"], MAX_FAULTS).select(
                "run", "fault", "kind", "target", "nodes", "skipped", secs("start_ns").alias("start_s"),
                secs("heal_ns").alias("heal_s"))
        if self.failovers is not None:
            frames["failovers"] = _capped(self.failovers.join(rf, "run"),
                                          ["time_ns", "fault", F.col("group").asc_nulls_first()],
                                          MAX_FAILOVER_ROWS).select(*FAILOVER_COLS, secs("time_ns").alias("time_s"))
        return frames

    def _detail_frames(self, infos: Sequence[dict], early: bool | None, chosen: bool = True,
                       evidence: bool = True, checked: bool = True) -> dict[str, DataFrame]:
        """``details``'s cross-run frames and the detail runs' anomalies and partitions: those that need no table
        of the checkers' (``early`` True), the others (False), or all (None); ``chosen``: with the partitions
        chosen (``_chosen``); ``evidence``: with the history lines the anomalies cite (when any);
        ``checked``: with the rest of those that need the checkers' tables (False: ``runs`` collected them)."""
        frames: dict[str, DataFrame] = {}
        runs = [i["run"] for i in infos]
        if early is not False:
            if self.ops is not None:
                t = F.col("type")
                frames["op_latency"] = self.ops.groupBy("f").agg(
                    F.count(F.lit(1)).alias("n"), *[F.sum((t == k).cast("long")).alias(k)
                                                    for k in ("ok", "fail", "info", "open")],
                    F.percentile_approx(F.when(t == "ok", F.col("latency_ms")),
                                        F.array(F.lit(0.5), F.lit(0.9), F.lit(0.99))).alias("q"),
                    F.max(F.when(t == "ok", F.col("latency_ms"))).alias("max"))
            if self.failovers is not None:
                long = self._stages_long()
                frames["stages"] = long.rollup("stage", "run").agg(
                    F.count("value").alias("n"),
                    F.percentile_approx("value", F.array(*[F.lit(q) for q in QS])).alias("q"),
                    F.max("value").alias("max"), F.grouping("run").alias("all_runs")).where(F.col("stage").isNotNull())
                kinds = _of_faults(self.failovers).select("kind", F.expr(_STACK)).where(F.col("value").isNotNull())
                frames["stages_kind"] = _quantiles(kinds, "kind")
            if self.failovers is not None and self.meta is not None and self._early_meta:
                frames["stages_client"] = self._stages_client()
        if early is True:
            return frames
        if checked:
            frames.update(self._checked_detail_frames(runs))
        if evidence and self.anomalies is not None and self.evidence_ops is not None and runs and any(
                i["anomalies"] for i in infos):
            frames["evidence"] = self._evidence(runs)
        if self.leaders is not None and runs and chosen:
            frames["chosen"] = self._chosen(infos)
        return frames

    def _checked_detail_frames(self, runs: Sequence[str]) -> dict[str, DataFrame]:
        """``details``'s frames that need the checkers' tables (or the ``runs`` table's meta), whatever the
        anomalies are."""
        frames: dict[str, DataFrame] = {}
        if self.failovers is not None and self.meta is not None and not self._early_meta:
            frames["stages_client"] = self._stages_client()
        if self.meta is not None and self.verdicts is not None:
            frames["verdict_scenario"] = (self.meta.select("run", "scenario").join(self.verdicts.select("run", "verdict"),
                                                                                   "run")
                                          .groupBy("scenario", "verdict").agg(F.count(F.lit(1)).alias("n")))
        if self.anomalies is not None:
            frames["kinds"] = self.anomalies.groupBy("kind").agg(F.count(F.lit(1)).alias("n"),
                                                                 F.countDistinct("run").alias("runs"))
            if runs:
                frames["anomalies"] = _capped(self.anomalies.where(F.col("run").isin(*runs)), ["kind", "message"],
                                              MAX_ANOMALIES).select(*ANOMALY_COLS)
        return frames

    def _stages_client(self) -> DataFrame:
        return _quantiles(self._stages_long().join(F.broadcast(self.meta.select("run", "client")), "run"), "client")

    def _stages_long(self) -> DataFrame:
        """(run, stage, value): the failover rows of faults, a row per stage with a value."""
        return _of_faults(self.failovers).select("run", F.expr(_STACK)).where(F.col("value").isNotNull())

    def _evidence(self, runs: Sequence[str]) -> DataFrame:
        """The history lines the detail runs' anomalies cite (``op_indexes``): each operation row whose invoke
        or completion index is cited, once per cited index (``_i``)."""
        cited = F.broadcast(self.anomalies.where(F.col("run").isin(*runs))
                            .select("run", F.explode("op_indexes").alias("_i")).distinct())
        ops = self.evidence_ops.where(F.col("run").isin(*runs)).select(
            *EVIDENCE_OP_COLS, F.explode(F.array_distinct(F.array("index", "complete_index"))).alias("_i"))
        return ops.join(cited, ["run", "_i"])

    def _run_frame(self, infos: Sequence[dict]) -> DataFrame:
        rows = [(i["run"], int(i["t0"]), int(i["bucket_s"] * 1e9), int(round(i["pbucket_s"] * 1e9))) for i in infos]
        return F.broadcast(local_rows(self.spark, rows, "run string, _t0 long, _bucket long, _pbucket long"))

    def _owners(self, infos: Sequence[dict]) -> DataFrame | None:
        """(run, partition, owners, topic): the offsets partition of each of the runs' groups (Kafka's
        partitionFor, on the few group names collected with the runs)."""
        rows: dict[tuple[str, int], list[str]] = {}
        for i in infos:
            for g in i["groups"] if i.get("offsets_partitions") else ():
                rows.setdefault((i["run"], partition_for(g, int(i["offsets_partitions"]))), []).append(g)
        if not rows:
            return None
        return local_rows(self.spark, [(r, p, ", ".join(sorted(gs)), OFFSETS_TOPIC) for (r, p), gs in rows.items()],
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
        sel = F.broadcast(local_rows(self.spark, list(parts), "run string, topic string, partition int"))
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



def _shaped(got: dict[str, list[dict]]) -> dict[str, Any]:
    """``details``'s collected rows, shaped as the report reads them (but the partitions)."""
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
    for name in ("stages_kind", "stages_client"):
        out[name] = {(r["by"], r["stage"]): {"n": r["n"], "q": [r["q"][i] for i in (0, 1, 2, 3, 5)]}
                     for r in got.get(name, [])}
    out["verdict_scenario"] = got.get("verdict_scenario", [])
    out["evidence"] = {(r["run"], r["_i"]): r for r in got.get("evidence", [])}
    return out


def _quantiles(long: DataFrame, by: str) -> DataFrame:
    """Per (``by``, stage): rows, Spark's percentiles ``QS`` of the stage values, max."""
    return long.groupBy(F.col(by).alias("by"), "stage").agg(
        F.count("value").alias("n"), F.percentile_approx("value", F.array(*[F.lit(q) for q in QS])).alias("q"),
        F.max("value").alias("max"))


def _capped(df: DataFrame, order: list, cap: int, part: Sequence[str] = ("run",)) -> DataFrame:
    """The first ``cap`` rows of each ``part`` in ``order``."""
    w = Window.partitionBy(*part).orderBy(*order)
    return df.withColumn("_rn", F.row_number().over(w)).where(F.col("_rn") <= cap).drop("_rn")
