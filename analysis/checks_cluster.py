"""Checkers of the control plane and replication in Spark, from the brokers' event logs alone.

Same rules as ``judge/checks_cluster.py`` (docs/chaos.md, "Checkers"):

* ``multiple-controllers``: ``controller_elected``;
* ``zombie-controller-write``: ``controller_elected``, ``partition_state_written`` with the plan's
  ``partition_states_written`` (ZooKeeper side), and ``became_leader``/``became_follower``/
  ``isr_updated`` (``request_controller_epoch``) with ``leader_and_isr_unchanged`` (broker side);
* ``unclean-election``: ``partition_state_written`` (and ``unclean_leader_election`` as evidence);
* ``hw-regression``: ``hw_changed`` and ``replica_stopped``, per broker process.

Every rule is a window per run (and broker process where the rule says so).
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis.checks_base import UNBOUNDED, Ctx, anomalies, asof, empty_anomalies, event_evidence, event_key, fmt
from analysis.local_rows import local_rows

BROKER_PARTITION_EVENTS = ("became_leader", "became_follower", "isr_updated")
ROUNDING_SLACK_NS = 1_000


def _order() -> list:
    """The merged logs' order (``read_run_events``: mono_ns, then the files' name order, then the line)."""
    return [F.col("mono_ns"), F.col("broker").cast("string").alias("file"), F.col("seq"), F.col("broker")]


def check_multiple_controllers(ctx: Ctx) -> DataFrame:
    """``multiple-controllers``: two brokers logged ``controller_elected`` with one epoch."""
    el = ctx.ev("controller_elected").where(F.col("epoch").isNotNull())
    first = el.groupBy("run", "epoch", "broker").agg(F.min(F.struct(*_order())).alias("o"))
    per = (first.groupBy("run", "epoch")
           .agg(F.array_sort(F.collect_list(F.struct("o", "broker"))).alias("w"))
           .where(F.size("w") > 1))
    brokers = F.array_sort(F.transform("w", lambda x: x["broker"]))
    evs = F.slice(F.transform("w", lambda x: event_key(x["broker"], x["o"]["mono_ns"], F.lit("controller_elected"))),
                  1, 4)
    return anomalies(per, "multiple-controllers",
                     F.concat(fmt("controller epoch %s was won by brokers [", F.col("epoch")),
                              F.concat_ws(", ", brokers), F.lit("]")),
                     events=evs, epoch=F.col("epoch"), brokers=brokers)


def _states_with_summary(ctx: Ctx) -> DataFrame:
    """Each ``partition_state_written`` with its plan's ``partition_states_written`` (the next one logged by
    the same broker process), or a null ``s``."""
    rows = ctx.ev("partition_state_written", "partition_states_written")
    w = (Window.partitionBy("run", "broker", "proc").orderBy(F.desc("mono_ns"), F.desc("seq"))
         .rowsBetween(UNBOUNDED, -1))
    summary = F.when(F.col("type") == "partition_states_written",
                     F.struct(F.col("mono_ns").alias("ns"), "epoch", "mono_ns_written", "write_ms"))
    return (rows.select("*", F.last(summary, ignorenulls=True).over(w).alias("s"))
            .where(F.col("type") == "partition_state_written"))


def check_zombie_writes(ctx: Ctx) -> DataFrame:
    """``zombie-controller-write``, both sides (``details.side``: ``zookeeper`` or ``broker``)."""
    el = ctx.ev("controller_elected").where(F.col("epoch").isNotNull()).select(
        "run", F.col("mono_ns").alias("e_ns"), F.col("epoch").alias("e_epoch"), F.col("broker").alias("e_b"))
    st = _states_with_summary(ctx).where(F.col("s.mono_ns_written").isNotNull() & F.col("s.write_ms").isNotNull())
    began = F.col("s.mono_ns_written") - F.bround(F.col("s.write_ms") * 1e6).cast("long") - ROUNDING_SLACK_NS
    st = st.select("run", "broker", "mono_ns", "topic", "partition", "s", began.alias("began"),
                   F.greatest("controller_epoch", "s.epoch").alias("writer")).where(F.col("writer").isNotNull())
    judged = asof(st, el.drop("e_b"), ["run"], "began", "e_ns", {"maxe": F.max("e_epoch")}, strict=True)
    bad = (judged.where(F.col("maxe") > F.col("writer")).join(el, "run")
           .where((F.col("e_ns") < F.col("began")) & (F.col("e_epoch") > F.col("writer")))
           .groupBy("run", "broker", "mono_ns", "topic", "partition", "s", "began", "writer")
           .agg(F.min(F.struct("e_ns", "e_epoch", "e_b")).alias("newer")))
    zk = anomalies(
        bad, "zombie-controller-write",
        fmt("%s/%s: broker %s wrote a state as controller epoch %s after broker %s had been elected with epoch %s",
            F.col("topic"), F.col("partition"), F.col("broker"), F.col("writer"), F.col("newer.e_b"),
            F.col("newer.e_epoch")),
        events=event_evidence(event_key("broker", "mono_ns", F.lit("partition_state_written")),
                              event_key(F.col("newer.e_b"), F.col("newer.e_ns"), F.lit("controller_elected")),
                              event_key(F.col("broker"), F.col("s.ns"), F.lit("partition_states_written"))),
        side=F.lit("zookeeper"), topic=F.col("topic"), partition=F.col("partition"), epoch=F.col("writer"),
        newer_epoch=F.col("newer.e_epoch"))

    rows = ctx.ev("leader_and_isr_unchanged", *BROKER_PARTITION_EVENTS)
    val = F.when(F.col("type") == "leader_and_isr_unchanged", F.col("controller_epoch")).otherwise(
        F.col("request_controller_epoch"))
    rows = rows.select("*", val.alias("val")).where(F.col("val").isNotNull())
    w = (Window.partitionBy("run", "broker", "proc").orderBy("mono_ns", "seq").rowsBetween(UNBOUNDED, -1))
    latest = F.max(F.struct(F.col("val").alias("v"), (-F.col("mono_ns")).alias("n"), (-F.col("seq")).alias("q"),
                            F.col("type").alias("t"))).over(w)
    rows = rows.select("*", latest.alias("latest"))
    stale = rows.where(F.col("type").isin(*BROKER_PARTITION_EVENTS) & (F.col("val") < F.col("latest.v")))
    broker = anomalies(
        stale, "zombie-controller-write",
        fmt("broker %s applied a %s for %s/%s from controller epoch %s after applying epoch %s", F.col("broker"),
            F.col("type"), F.col("topic"), F.col("partition"), F.col("val"), F.col("latest.v")),
        events=event_evidence(event_key("broker", "mono_ns", "type"),
                              event_key(F.col("broker"), -F.col("latest.n"), F.col("latest.t"))),
        side=F.lit("broker"), topic=F.col("topic"), partition=F.col("partition"), epoch=F.col("val"),
        newer_epoch=F.col("latest.v"))
    return zk.unionByName(broker)


def check_unclean_elections(ctx: Ctx) -> DataFrame:
    """``unclean-election``: a state with reason ``unclean_election``, or a new leader outside the previous ISR."""
    if ctx.unclean_election:
        return empty_anomalies(ctx.spark)
    w = ctx.ev("partition_state_written")
    leader, prev_isr = F.col("leader"), F.col("previous_isr")
    changed = leader.isNotNull() & (leader >= 0) & prev_isr.isNotNull() & ~F.col("previous_leader").eqNullSafe(leader)
    bad = w.where((F.col("reason") == "unclean_election") | (changed & ~F.array_contains(prev_isr, leader)))
    ann = (ctx.ev("unclean_leader_election")
           .groupBy("run", "topic", "partition", "leader_epoch")
           .agg(F.max(F.struct(*_order())).alias("a"))
           .select(F.col("run").alias("a_run"), F.col("topic").alias("a_topic"),
                   F.col("partition").alias("a_partition"),
                   F.col("leader_epoch").alias("a_epoch"), F.col("a.mono_ns").alias("a_ns"),
                   F.col("a.broker").cast("int").alias("a_b")))
    bad = bad.join(ann, (F.col("run") == F.col("a_run")) & F.col("topic").eqNullSafe(F.col("a_topic"))
                   & F.col("partition").eqNullSafe(F.col("a_partition"))
                   & F.col("leader_epoch").eqNullSafe(F.col("a_epoch")), "left")
    isr = F.when(prev_isr.isNull(), F.lit("None")).otherwise(
        F.concat(F.lit("["), F.concat_ws(", ", F.transform(prev_isr, lambda x: x.cast("string"))), F.lit("]")))
    return anomalies(
        bad, "unclean-election",
        F.concat(fmt("%s/%s: broker %s became leader (epoch %s, reason %s) though it was not in the previous ISR ",
                     F.col("topic"), F.col("partition"), leader, F.col("leader_epoch"), F.col("reason")), isr),
        events=event_evidence(event_key("broker", "mono_ns", F.lit("partition_state_written")),
                              F.when(F.col("a_ns").isNotNull(),
                                     event_key(F.col("a_b"), F.col("a_ns"), F.lit("unclean_leader_election")))),
        topic=F.col("topic"), partition=F.col("partition"), leader=leader, previous_isr=prev_isr)


def check_hw(ctx: Ctx) -> DataFrame:
    """``hw-regression``: within one broker process, an ``hw_changed`` whose ``new`` is below the previous
    line's ``new`` for that partition (the Python baseline is always the last line's ``new``: a
    ``decreased`` line, a regression or a rise all set it), unless it says ``decreased``; a
    ``replica_stopped`` resets the partition."""
    rows = ctx.ev("hw_changed", "replica_stopped").where(
        (F.col("type") == "replica_stopped") | F.col("new").isNotNull())
    w = Window.partitionBy("run", "broker", "proc", "topic", "partition").orderBy("mono_ns", "seq")
    rows = rows.select("*", F.lag(F.struct(F.col("type").alias("t"), F.col("new").alias("v"),
                                           F.col("mono_ns").alias("ns"))).over(w).alias("prev"))
    bad = rows.where((F.col("type") == "hw_changed") & ~F.coalesce(F.col("decreased"), F.lit(False))
                     & (F.col("prev.t") == "hw_changed") & (F.col("new") < F.col("prev.v")))
    return anomalies(
        bad, "hw-regression",
        fmt("broker %s: the HW of %s/%s went from %s back to %s (not flagged as a follower's decrease)",
            F.col("broker"), F.col("topic"), F.col("partition"), F.col("prev.v"), F.col("new")),
        events=event_evidence(event_key("broker", "mono_ns", "type"),
                              event_key(F.col("broker"), F.col("prev.ns"), F.lit("hw_changed"))),
        broker=F.col("broker"), topic=F.col("topic"), partition=F.col("partition"), new=F.col("new"),
        previous=F.col("prev.v"))


def unknown_no_events(ctx: Ctx) -> DataFrame:
    """Runs without a single event line: the controller, election and HW checks have nothing to read."""
    have = ctx.runs_with_events()
    runs = local_rows(ctx.spark, [(r,) for r in ctx.runs], "run string").join(have, "run", "left_anti")
    names = ["controllers"] + ([] if ctx.unclean_election else ["unclean-election"]) + ["hw"]
    return runs.select("run", F.posexplode(F.array(*[F.lit(f"{n}: no broker events") for n in names]))
                       .alias("sub", "reason"))
