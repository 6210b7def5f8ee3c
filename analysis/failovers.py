"""The failover timeline in Spark: ``judge/timeline.py``'s rows, with its rules (docs/chaos.md, "Failover timeline").

``failovers(inputs, tables)`` gives one row per (fault start, group whose
offsets partition one of the fault's brokers led at the fault's time T) and
one controller row per fault that hit the controller of time T, with the
columns of ``judge.timeline.ROW_FIELDS`` (after ``run``).  The rules, as there:

* the leader of partition P at T is the last state written for P that had
  *landed* by T (``analysis.tables.state_writes``), ties by logging time;
* detection, election and the controller failover are looked for until the
  next fault start that hits the same broker (naming it, or naming any
  ZooKeeper server); the failure that opens an unavailability window must
  complete before the next fault start of any kind; the load, the first
  commit and the end of the window are not bounded;
* a client op's completion is paired with its process's invoke (the line
  before it of that process, when it is an invoke: the ``ops`` table's
  pairs); end-of-run reads (``final``) are ignored.

How: the events a failover looks at are few per run whatever the load
(controller elections, broker changes, the offsets topic's partition states
and loads), so they are gathered per run (and per offsets partition) into
arrays, joined to the fault rows, and searched with higher-order functions
(``filter``, ``array_min``).  The client ops, which may be millions, are
searched with one window over each group's completions into which the fault
instants are merged.  Times are rounded exactly as ``round(ns / 1e6, 3)``
rounds in Python, by a Spark expression (:func:`round3`).
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analysis.checks_base import partition_for
from analysis.spark import kept, spread, union_by_name
from analysis.tables import OFFSETS_TOPIC, state_writes
from judge.timeline import CAUSE_END, CAUSE_FAULT, CAUSE_NONE, END_PHASE, STOP_PHASE
from judge.timeline import ROW_FIELDS  # noqa: F401  (re-exported: the same rows as the runner's timeline)

ROW_TYPES = {
    "fault": "int", "cause": "string", "kind": "string", "target": "string", "nodes": "array<string>",
    "time_ns": "bigint",
    "heal_ms": "double", "group": "string", "partition": "int", "old_leader": "int", "new_leader": "int",
    "moved": "boolean", "detect_ms": "double", "detect_by": "string", "elect_ms": "double",
    "elect_reason": "string", "load_ms": "double", "load_duration_ms": "double", "records_replayed": "bigint",
    "records": "bigint", "first_commit_ms": "double", "unavailable_ms": "double",
    "unavailable_from_ms": "double", "unavailable_to_ms": "double", "old_controller": "int",
    "new_controller": "int", "controller_failover_ms": "double",
}
FAILED_OPS = ("commit", "heartbeat", "join", "sync", "fetch-committed", "poll")
RECOVERED_OPS = ("commit", "join", "sync", "heartbeat", "fetch-committed")
NOT_FAILOVER_REASONS = ("preferred_admin", "auto_rebalance")
SHUTDOWN_KINDS = ("terminate",)


# ---------------------------------------------------------------- helpers

def ms_between(t: int | None, t0: int | None) -> float | None:
    """``round((t - t0) / 1e6, 3)``, exactly as the Python timeline computes it."""
    return None if t is None or t0 is None else round((t - t0) / 1e6, 3)


_SPLIT = 134217729.0   # 2**27 + 1: Veltkamp's split of a double into two halves of 26 bits


def round3(x: Column) -> Column:
    """Python's ``round(x, 3)`` of a double, as a Spark expression (no Python worker): the exact value of
    ``x * 1000`` rounded half to even, over 1000.  ``p = x * 1000`` in doubles is that value but for the
    rounding error ``err``, which Dekker's product gives exactly (1000 has 10 bits, each half of ``x`` 27 at
    most, so every product below is exact); ``err`` only matters when ``p`` is a tie: its sign says which
    side of the tie the exact value lies on (a tie of both is a tie: half to even, as Python)."""
    p = x * 1000.0
    c = x * _SPLIT
    hi = c - (c - x)
    lo = x - hi
    err = (hi * 1000.0 - p) + lo * 1000.0
    fl = F.floor(p).cast("double")
    k = (F.when((p - fl == 0.5) & (err > 0), fl + 1.0).when((p - fl == 0.5) & (err < 0), fl)
         .otherwise(F.rint(p)))
    return F.when(F.abs(p) < 4503599627370496.0, k / 1000.0).otherwise(p / 1000.0)   # 2**52: no fraction left


def _ms(t: Column | str, t0: Column | str = "time_ns") -> Column:
    """ms from ``t0`` to ``t``, rounded exactly as Python's ``round((t - t0) / 1e6, 3)``."""
    a = F.col(t) if isinstance(t, str) else t
    b = F.col(t0) if isinstance(t0, str) else t0
    return round3((a - b).cast("double") / 1e6)


def _before(t: Column, end: Column) -> Column:
    """``t < end``, a null end being infinity."""
    return end.isNull() | (t < end)


def _first(arr: Column, cond, key=None, last: bool = False) -> Column:
    """The first (smallest, or with ``last`` the largest) element of ``arr`` satisfying ``cond``; structs
    compare field by field, so an element's leading fields are its order.  ``key`` maps it first.

    A per-row value that ``cond`` reads should be a column of its own (``withColumn``) read at least twice:
    Spark's optimizer inlines a column's expression where it is read once, and inside a lambda that means once
    per element (a search of one array per element of another: most of this table's time, before)."""
    found = F.filter(arr, cond)
    if key is not None:
        found = F.transform(found, key)
    return F.array_max(found) if last else F.array_min(found)


# ---------------------------------------------------------------- inputs, per run

def completions(ops: DataFrame) -> DataFrame:
    """Client completions, from the paired ``ops`` table, ``final`` ones dropped: run, index (the
    completion's), time, type, f, group."""
    return ops.where(F.col("complete_index").isNotNull() & ~F.col("final") & F.col("group").isNotNull()).select(
        "run", F.col("complete_index").alias("index"), F.col("complete_ns").alias("time"), "type", "f", "group")


def _ops(inputs, tables) -> DataFrame:
    ops = (tables or {}).get("ops")
    if ops is None:
        from analysis.ops_tables import build_ops_tables
        ops = build_ops_tables(inputs)["ops"]
    return ops


def _stage_ops(comp: DataFrame) -> DataFrame:
    """The completions a stage can be made of: ok commits, joins, syncs, heartbeats and fetch-committed, and
    failed (fail/info) ones of those and of polls.  Ok polls, the bulk of a group's ops, play no part."""
    return comp.where(((F.col("type") == "ok") & F.col("f").isin(*RECOVERED_OPS))
                      | (F.col("type").isin("fail", "info") & F.col("f").isin(*FAILED_OPS)))


def _run_arrays(inputs) -> DataFrame:
    """Per run: the controller log, broker changes, controlled-shutdown requests, clean stops (``broker_stopping``)
    and the offsets topic's size."""
    types = ["controller_elected", "controller_resigned", "broker_change", "controlled_shutdown_requested",
             "broker_stopping", "topic_created", "replicas_offline"]
    ev = inputs.parsed_events().where(F.col("type").isin(types)).select(
        "run", "broker", "mono_ns", "type",
        F.struct("dead", "bounced", "broker_id", "topic", "partitions", "replicas").alias("e"))
    t = F.col("type")
    offsets_created = (t == "topic_created") & (F.col("e.topic") == OFFSETS_TOPIC) & F.col("e.partitions").isNotNull()
    return ev.groupBy("run").agg(
        F.collect_list(F.when(t.isin("controller_elected", "controller_resigned"), F.struct(
            F.col("mono_ns").alias("t"), F.col("broker").alias("broker"),
            (t == "controller_elected").alias("elected")))).alias("_ctl"),
        F.collect_list(F.when(t == "broker_change", F.struct(
            F.col("mono_ns").alias("t"), F.col("e.dead").alias("dead"), F.col("e.bounced").alias("bounced")))
        ).alias("_bc"),
        F.collect_list(F.when(t == "controlled_shutdown_requested", F.struct(
            F.col("mono_ns").alias("t"), F.col("e.broker_id").alias("broker_id")))).alias("_csr"),
        F.collect_list(F.when(t == "replicas_offline", F.struct(   # a log directory failed (a disk fault)
            F.col("mono_ns").alias("t"), F.col("e.broker_id").alias("broker_id"),
            F.coalesce(F.col("e.replicas"), F.array().cast("array<string>")).alias("replicas")))).alias("_ro"),
        F.collect_list(F.when(t == "broker_stopping", F.struct(
            F.col("mono_ns").alias("t"), F.col("broker").alias("broker")))).alias("_stops"),
        F.min_by(F.when(offsets_created, F.col("e.partitions")), F.when(offsets_created, F.col("mono_ns")))
        .alias("_n"))


def _partition_arrays(inputs) -> DataFrame:
    """Per run and offsets partition: the states written (landing order) and the coordinator loads."""
    st = state_writes(inputs).where(F.col("topic") == OFFSETS_TOPIC).groupBy("run", "partition").agg(
        F.collect_list(F.struct(F.col("landed_ns").alias("landed"), F.col("mono_ns").alias("mono"),
                                F.col("broker").alias("broker"), F.col("leader").alias("leader"),
                                F.col("leader_epoch").alias("epoch"), F.col("reason").alias("reason"))).alias("_st"))
    ld = (inputs.parsed_events().where(F.col("type") == "coordinator_loaded")
          .select("run", "broker", "mono_ns",
                  F.struct("partition", "leader_epoch", "records", "replayed", "duration_ms").alias("e"))
          .groupBy("run", F.col("e.partition").alias("partition")).agg(F.collect_list(F.struct(
              F.col("mono_ns").alias("t"), F.col("broker").alias("broker"), F.col("e.leader_epoch").alias("epoch"),
              F.col("e.duration_ms").alias("duration_ms"), F.col("e.replayed").alias("replayed"),
              F.col("e.records").alias("records"))).alias("_ld")))
    return st.join(ld, ["run", "partition"], "full")


def _faults(inputs, tables) -> DataFrame:
    """Fault starts with ``brokers`` (the int nodes) and ``zk`` (a ``zk<n>`` node: a ZooKeeper server; an
    ``app<n>`` node, the user's application, is neither)."""
    f = (tables or {}).get("faults")
    if f is None:
        from analysis.tables import faults
        f = faults(inputs)
    return f.select("run", "fault", "kind", "target", "nodes", F.col("start_ns").alias("time_ns"), "heal_ns",
                    F.filter("nodes", lambda x: x.rlike("^-?[0-9]+$")).cast("array<int>").alias("brokers"),
                    F.exists("nodes", lambda x: x.startswith("zk")).alias("zk"))


def _end_marks(inputs, tables) -> DataFrame:
    """Per run (with marks): ``_end_ns`` and ``_stop_ns``, the runner's end-phase marks (the first nemesis line
    of ``value.phase`` ``end``, ``stop``).  From ``tables["nemesis"]`` (``ops_tables.nemesis_lines``: few
    rows) when given, else from the history."""
    nem = (tables or {}).get("nemesis")
    if nem is None:
        nem = inputs.ops.where(F.col("process") == "nemesis")
    phase = F.col("value.phase")
    return (nem.where(phase.isin(END_PHASE, STOP_PHASE)).groupBy("run")
            .agg(F.min(F.when(phase == END_PHASE, F.col("time"))).alias("_end_ns"),
                 F.min(F.when(phase == STOP_PHASE, F.col("time"))).alias("_stop_ns")))


# ---------------------------------------------------------------- the stages, as expressions over the arrays

def _end_for(broker: Column) -> Column:
    """The end of a fault's window for ``broker``: the first of the next fault start after T hitting it (naming
    it, or any ZooKeeper server), the runner's ``stop`` mark, and (unless the fault is a SIGTERM) the broker's
    next clean stop.  Null: none (infinity)."""
    nxt = _first(F.col("_all"), lambda g: (g["t"] > F.col("time_ns"))
                 & (F.coalesce(F.array_contains(g["brokers"], broker), F.lit(False)) | g["zk"]), lambda g: g["t"])
    stop = F.when(~F.col("kind").isin(*SHUTDOWN_KINDS) | F.col("kind").isNull(),
                  _first(F.col("_stops"), lambda e: (e["t"] > F.col("time_ns")) & (e["broker"] == broker),
                         lambda e: e["t"]))
    return F.least(nxt, F.col("_stop_ns"), stop)


def _election_after(end: Column, not_by: Column) -> Column:
    """The first ``controller_elected`` after T, before ``end``, by another broker than ``not_by``: (t, broker)."""
    return _first(F.col("_ctl"), lambda e: e["elected"] & (e["t"] > F.col("time_ns")) & _before(e["t"], end)
                  & (e["broker"] != not_by), lambda e: F.struct(e["t"].alias("t"), e["broker"].alias("broker")))


def _controller_at(rows: DataFrame, **extra: Column) -> DataFrame:
    """``rows`` with ``extra`` columns (independent of it) and ``controller``: the controller at T, the last
    ``controller_elected`` at or before T, unless its broker resigned since."""
    el = _first(F.col("_ctl"), lambda e: e["elected"] & (e["t"] <= F.col("time_ns")),
                lambda e: F.struct(e["t"].alias("t"), e["broker"].alias("broker")), last=True)
    # a column of its own: read in the lambda below, not recomputed per element
    rows = rows.withColumns({**extra, "_el": el})
    el = F.col("_el")
    gone = F.exists(F.col("_ctl"), lambda e: ~e["elected"] & (e["broker"] == el["broker"]) & (e["t"] > el["t"])
                    & (e["t"] <= F.col("time_ns")))
    return rows.select(*[c for c in rows.columns if c != "_el"],
                       F.when(el.isNotNull() & ~gone, el["broker"]).alias("controller"))


_ARRAYS = ("_ctl", "_bc", "_csr", "_ro", "_stops", "_all")


def _or_empty(df: DataFrame, cols: tuple[str, ...]) -> DataFrame:
    """``df`` with the nulls of the array columns ``cols`` made empty arrays, in one projection (a ``withColumn``
    each would have the JVM analyse the whole plan once per column)."""
    return df.select(*[F.coalesce(F.col(c), F.array()).alias(c) if c in cols else F.col(c) for c in df.columns])


def _fault_rows(inputs, tables) -> tuple[DataFrame, DataFrame]:
    """The fault starts that name a broker, with the run's arrays; and the per-run arrays alone (one row per
    run with events: ``_all``, every fault's (t, brokers, zk); the events' arrays; the end-phase marks)."""
    faults = _faults(inputs, tables)
    every = faults.groupBy("run").agg(F.collect_list(F.struct(
        F.col("time_ns").alias("t"), F.col("brokers").alias("brokers"), F.col("zk").alias("zk"))).alias("_all"))
    per_run = _run_arrays(inputs).join(every, "run", "left").join(_end_marks(inputs, tables), "run", "left")
    per_run = _or_empty(per_run, _ARRAYS)
    per_run = kept(per_run, DataFrame.cache)   # one row per run: read by every kind of row
    # The fault rows are spread over the cores (by fault) and the per-run arrays broadcast to them: the searches
    # of the arrays below are most of this table's work, and rows keyed by run alone would all be in one task.
    parts = spread(faults.sparkSession, faults.sparkSession.sparkContext.defaultParallelism)
    rows = (faults.where(F.size("brokers") > 0).repartition(parts, "run", "fault")
            .join(F.broadcast(per_run), "run", "left"))
    rows = _or_empty(rows, _ARRAYS)
    return _controller_at(rows, _any_end=_first(F.col("_all"), lambda g: g["t"] > F.col("time_ns"),
                                                 lambda g: g["t"])), per_run


def _controller_rows(rows: DataFrame) -> DataFrame:
    rows = rows.where(F.array_contains("brokers", F.col("controller")))
    rows = rows.withColumn("_ctl_end", _end_for(F.col("controller")))   # a column: read in the lambda below
    won = _election_after(F.col("_ctl_end"), F.col("controller"))
    return rows.withColumn("_won", won).select(
        "run", "fault", F.lit(CAUSE_FAULT).alias("cause"), "kind", "target", "nodes", "time_ns",
        _ms("heal_ns").alias("heal_ms"),
        F.col("_won").isNotNull().alias("moved"), F.col("controller").alias("old_controller"),
        F.col("_won.broker").alias("new_controller"), _ms(F.col("_won.t")).alias("controller_failover_ms"))


def _group_stages(rows: DataFrame, comp: DataFrame) -> DataFrame:
    """The first ok commit after ``_floor`` (the row's last stage); the first failure after T and the recovery
    after it: by one window over each group's completions with the rows' instants (T and ``_floor``) merged in
    (ops before an instant they share).  Rows are keyed by (run, fault, time_ns, group), fault null-safe."""
    ops = comp.select("run", "group", "time", "index", F.lit(0).alias("_probe"), "type", "f",
                      F.lit(None).cast("int").alias("fault"), F.lit(None).cast("bigint").alias("_t0"),
                      F.lit(None).cast("int").alias("_pk"))
    keys = rows.select("run", "group", "fault", "time_ns", "_floor")

    def probes(at: str, pk: int) -> DataFrame:
        return keys.select("run", "group", F.col(at).alias("time"), F.lit(None).cast("bigint").alias("index"),
                           F.lit(1).alias("_probe"), F.lit(None).cast("string").alias("type"),
                           F.lit(None).cast("string").alias("f"), "fault", F.col("time_ns").alias("_t0"),
                           F.lit(pk).alias("_pk"))
    # reversed order and a growing frame: last(...) is "the nearest such row after this one" (a linear pass)
    after = (Window.partitionBy("run", "group")
             .orderBy(F.col("time").desc(), F.col("_probe").desc(), F.col("index").desc())
             .rowsBetween(Window.unboundedPreceding, -1))
    is_op = F.col("_probe") == 0
    recovered = F.when(is_op & (F.col("type") == "ok") & F.col("f").isin(*RECOVERED_OPS), F.col("time"))
    commit = F.when(is_op & (F.col("type") == "ok") & (F.col("f") == "commit"), F.col("time"))
    failed = F.when(is_op & F.col("type").isin("fail", "info") & F.col("f").isin(*FAILED_OPS),
                    F.struct(F.col("time").alias("t"), F.col("_back").alias("back")))
    merged = (union_by_name([ops, probes("time_ns", 0), probes("_floor", 1)])
              .withColumns({"_back": F.last(recovered, ignorenulls=True).over(after),
                            "_commit_t": F.last(commit, ignorenulls=True).over(after)})
              .withColumn("_failed", F.last(failed, ignorenulls=True).over(after)))
    # both probes of a row in one row, joined back once: a join per probe would read a window of its own (Spark
    # prunes each branch to the columns it reads, and the two would no longer match for reuse), and the group
    # completions would be read, shuffled and sorted twice
    found = merged.where(F.col("_probe") == 1).groupBy(
        F.col("run").alias("_r"), F.col("group").alias("_g"), F.col("fault").alias("_f"), "_t0").agg(
        F.max(F.when(F.col("_pk") == 0, F.col("_failed"))).alias("_failed"),
        F.max(F.when(F.col("_pk") == 1, F.col("_commit_t"))).alias("_commit_t"))
    key = ((F.col("run") == found["_r"]) & (F.col("group") == found["_g"])
           & F.col("fault").eqNullSafe(found["_f"]) & (F.col("time_ns") == found["_t0"]))
    return rows.join(found, key, "left").drop("_r", "_g", "_f", "_t0")


def _load_after(elected: str) -> Column:
    """The new leader's ``coordinator_loaded`` for the partition at or after the election ``elected`` landed."""
    el = F.col(elected)
    return _first(F.col("_ld"), lambda e: (e["t"] >= el["landed"]) & (e["broker"] == el["leader"])
                  & (el["epoch"].isNull() | e["epoch"].isNull() | (e["epoch"] >= el["epoch"])))


def _floor_of(*stages: Column) -> Column:
    """The row's last stage (its first commit comes after it): T, or a later detect, elect or load."""
    return F.greatest(F.col("time_ns"), *stages)


#: The columns of a group row before its stages: ``_detect`` (t, by), ``_el`` (the state of the move) and
#: ``_load`` structs, ``_any_end`` (the next fault start after T).
_PRE = ["run", "fault", "cause", "kind", "target", "nodes", "time_ns", "heal_ms", "group", "partition", "old_leader",
        "_detect", "_el", "_load", "_any_end"]


def _stage_columns(ops: DataFrame, rows: DataFrame) -> DataFrame:
    """The group rows' columns (and ``_el_landed``/``_mono``/``_broker``, which identify the move) from
    ``_PRE``: the first commit and the unavailability window from the group's ops, in one pass over them."""
    rows = _group_stages(rows.withColumn("_floor", _floor_of(F.col("_detect.t"), F.col("_el.landed"),
                                                             F.col("_load.t"))),
                         _stage_ops(completions(ops)))
    failed = F.col("_failed").isNotNull() & _before(F.col("_failed.t"), F.col("_any_end"))
    return rows.select(
        "run", "fault", "cause", "kind", "target", "nodes", "time_ns", "heal_ms", "group",
        "partition", "old_leader", F.col("_el.leader").alias("new_leader"), F.col("_el").isNotNull().alias("moved"),
        _ms(F.col("_detect.t")).alias("detect_ms"), F.col("_detect.by").alias("detect_by"),
        _ms(F.col("_el.landed")).alias("elect_ms"), F.col("_el.reason").alias("elect_reason"),
        _ms(F.col("_load.t")).alias("load_ms"), F.col("_load.duration_ms").alias("load_duration_ms"),
        F.col("_load.replayed").alias("records_replayed"), F.col("_load.records").alias("records"),
        _ms("_commit_t").alias("first_commit_ms"),
        F.when(failed, _ms(F.col("_failed.back"), F.col("_failed.t"))).otherwise(F.lit(0.0)).alias("unavailable_ms"),
        F.when(failed, _ms(F.col("_failed.t"))).alias("unavailable_from_ms"),
        F.when(failed, _ms(F.col("_failed.back"))).alias("unavailable_to_ms"))


def _cand(t: Column, by: str) -> Column:
    return F.when(t.isNotNull(), F.struct(t.alias("t"), F.lit(by).alias("by")))


def _hit(arr: Column, broker: Column) -> Column:
    return F.coalesce(F.array_contains(arr, broker), F.lit(False))


def _fault_group_rows(faults: DataFrame, groups: DataFrame, partitions: DataFrame) -> DataFrame:
    """The fault rows of groups, up to their stages (``_PRE``)."""
    rows = faults.join(F.broadcast(groups), "run").withColumn("partition", partition_for(F.col("group"), F.col("_n")))
    rows = rows.join(F.broadcast(partitions), ["run", "partition"], "left")
    rows = _or_empty(rows, ("_st", "_ld"))
    at = _first(F.col("_st"), lambda s: s["landed"] <= F.col("time_ns"), last=True)
    rows = rows.withColumn("old_leader", at["leader"])
    rows = rows.where(F.col("old_leader").isNotNull() & F.array_contains("brokers", F.col("old_leader")))
    rows = rows.withColumns({"_lead_end": _end_for(F.col("old_leader")),
                             "_offsets_name": F.concat(F.lit(OFFSETS_TOPIC + "-"), F.col("partition").cast("string"))})
    old, end, t0 = F.col("old_leader"), F.col("_lead_end"), F.col("time_ns")

    bc = _first(F.col("_bc"), lambda e: (e["t"] > t0) & _before(e["t"], end)
                & (_hit(e["dead"], old) | _hit(e["bounced"], old)), lambda e: e["t"])
    csr = F.when(F.col("kind").isin(*SHUTDOWN_KINDS),
                 _first(F.col("_csr"), lambda e: (e["t"] > t0) & _before(e["t"], end) & (e["broker_id"] == old),
                        lambda e: e["t"]))
    ce = F.when(F.array_contains("brokers", F.col("controller")), _election_after(end, F.col("controller"))["t"])
    ro = _first(F.col("_ro"), lambda e: (e["t"] > t0) & _before(e["t"], end) & (e["broker_id"] == old)
                & F.array_contains(e["replicas"], F.col("_offsets_name")), lambda e: e["t"])
    # the partition's first change of leader after T: the fault's election if it is a failover after the detection
    change = _first(F.col("_st"), lambda s: (s["landed"] > t0) & _before(s["landed"], end) & (s["leader"] >= 0)
                    & (s["leader"] != old))
    rows = (rows.withColumn("_ce", ce)
            .withColumns({"_detect": F.least(_cand(bc, "broker_change"),
                                             _cand(csr, "controlled_shutdown_requested"),
                                             _cand(ro, "replicas_offline"), _cand(F.col("_ce"), "controller_elected")),
                          "_chg": change}))
    chg = F.col("_chg")
    rows = rows.withColumn("_el", F.when(
        F.col("_detect").isNotNull() & (chg["landed"] >= F.col("_detect.t"))
        & (chg["reason"].isNull() | ~chg["reason"].isin(*NOT_FAILOVER_REASONS)), chg))
    return rows.select(*[c for c in _PRE if c not in ("cause", "heal_ms", "_load")], F.lit(CAUSE_FAULT).alias("cause"),
                       _ms("heal_ns").alias("heal_ms"), _load_after("_el").alias("_load"))


def _unattributed_rows(inputs, taken: DataFrame, groups: DataFrame, per_run: DataFrame,
                       partitions: DataFrame) -> DataFrame:
    """The rows of the leader moves of a group's offsets partition that no fault row took (``taken``: run,
    partition, landed, mono, broker), up to their stages (``_PRE``), as in ``judge.timeline``: origin at the
    controller's last detection of the old leader since its election (else at the move), ``cause``
    ``end phase`` after the ``end`` mark (``stop`` without one), else ``none in schedule``."""
    st = state_writes(inputs).where(F.col("topic") == OFFSETS_TOPIC).select(
        "run", "partition", F.col("landed_ns").alias("landed"), F.col("mono_ns").alias("mono"), "broker", "leader",
        F.col("leader_epoch").alias("epoch"), "reason")
    seq = Window.partitionBy("run", "partition").orderBy("landed", "mono").rowsBetween(Window.unboundedPreceding, -1)
    st = st.withColumn("old_leader", F.last(F.when(F.col("leader") >= 0, F.col("leader")), ignorenulls=True).over(seq))
    change = (F.col("leader") >= 0) & (F.col("old_leader").isNull() | (F.col("leader") != F.col("old_leader")))
    st = st.withColumn("_since", F.last(F.when(change, F.col("landed")), ignorenulls=True).over(seq))
    moves = st.where(change & F.col("old_leader").isNotNull()
                     & (F.col("reason").isNull() | ~F.col("reason").isin(*NOT_FAILOVER_REASONS)))
    moves = moves.join(taken, ["run", "partition", "landed", "mono", "broker"], "left_anti")
    moves = (moves.join(F.broadcast(per_run), "run").where(F.col("_n").isNotNull())
             .join(F.broadcast(partitions.select("run", "partition", "_ld")), ["run", "partition"], "left")
             .withColumns({"_ld": F.coalesce("_ld", F.array()),
                           "_offsets_name": F.concat(F.lit(OFFSETS_TOPIC + "-"), F.col("partition").cast("string"))}))
    old, since, landed = F.col("old_leader"), F.col("_since"), F.col("landed")

    def inside(t: Column) -> Column:
        return (t > since) & (t <= landed)
    bc = _first(F.col("_bc"), lambda e: inside(e["t"]) & (_hit(e["dead"], old) | _hit(e["bounced"], old)),
                lambda e: e["t"], last=True)
    csr = _first(F.col("_csr"), lambda e: inside(e["t"]) & (e["broker_id"] == old), lambda e: e["t"], last=True)
    ro = _first(F.col("_ro"), lambda e: inside(e["t"]) & (e["broker_id"] == old)
                & F.array_contains(e["replicas"], F.col("_offsets_name")), lambda e: e["t"], last=True)
    ce = _first(F.col("_ctl"), lambda e: e["elected"] & inside(e["t"]) & (e["broker"] != old), lambda e: e["t"],
                last=True)
    end_mark = F.coalesce(F.col("_end_ns"), F.col("_stop_ns"))
    moves = (moves.withColumns({"_detect": F.greatest(_cand(bc, "broker_change"),
                                                      _cand(csr, "controlled_shutdown_requested"),
                                                      _cand(ro, "replicas_offline"),
                                                      _cand(ce, "controller_elected")),
                                "_el": F.struct(landed.alias("landed"), F.col("mono").alias("mono"),
                                                F.col("broker").alias("broker"), F.col("leader").alias("leader"),
                                                F.col("epoch").alias("epoch"), F.col("reason").alias("reason"))})
             .withColumn("time_ns", F.coalesce(F.col("_detect.t"), landed)))
    rows = (moves.join(F.broadcast(groups), "run")
            .where(partition_for(F.col("group"), F.col("_n")) == F.col("partition")))
    cause = F.when(end_mark.isNotNull() & (landed > end_mark), F.lit(CAUSE_END)).otherwise(F.lit(CAUSE_NONE))
    return rows.select(
        "run", F.lit(None).cast("int").alias("fault"),
        cause.alias("cause"),
        F.lit(None).cast("string").alias("kind"), F.lit(None).cast("string").alias("target"),
        F.array().cast("array<string>").alias("nodes"), "time_ns", F.lit(None).cast("double").alias("heal_ms"),
        "group", "partition", "old_leader", "_detect", "_el", _load_after("_el").alias("_load"),
        _first(F.col("_all"), lambda g: g["t"] > F.col("time_ns"), lambda g: g["t"]).alias("_any_end"))


def _shape(df: DataFrame) -> DataFrame:
    cols = [(F.col(c) if c in df.columns else F.lit(None)).cast(t).alias(c) for c, t in ROW_TYPES.items()]
    return df.select("run", *cols)


def failovers(inputs, tables: dict[str, DataFrame] | None = None) -> DataFrame:
    """The ``failovers`` table, in time order; within a fault the controller row first, then groups by name;
    unattributed moves (``fault`` null) before the fault rows of the same instant.  ``tables`` may hold
    ``faults``, ``ops`` and ``nemesis`` (``ops_tables.nemesis_lines``; built from ``inputs`` when not).

    Runs whose offsets topic size is unknown (no ``topic_created`` for it) get no group rows (the Python
    timeline raises instead)."""
    faults, per_run = _fault_rows(inputs, tables)
    faults = kept(faults, DataFrame.cache)  # few rows, used by both kinds of fault rows
    ops = _ops(inputs, tables)
    groups = ops.where(F.col("group").isNotNull()).select("run", "group").distinct()
    groups = kept(groups, DataFrame.cache)
    partitions = kept(_partition_arrays(inputs), DataFrame.cache)
    fault_rows = kept(_fault_group_rows(faults, groups, partitions), DataFrame.cache)   # few rows; read twice
    taken = fault_rows.where(F.col("_el").isNotNull()).select(
        "run", "partition", F.col("_el.landed").alias("landed"), F.col("_el.mono").alias("mono"),
        F.col("_el.broker").alias("broker")).distinct()
    pre = fault_rows.select(*_PRE).unionByName(
        _unattributed_rows(inputs, taken, groups, per_run, partitions).select(*_PRE))
    out = _shape(_controller_rows(faults)).unionByName(_shape(_stage_columns(ops, pre)))
    # few rows: one partition sorted, not a range-partitioned sort (whose sampling job computes it all twice)
    return out.coalesce(1).sortWithinPartitions("run", "time_ns", "fault", F.col("group").asc_nulls_first())
