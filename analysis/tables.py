"""The events-derived tables of docs/analysis.md, built with Spark from ``analysis.load.Inputs``.

``build_event_tables(inputs)`` returns ``faults``, ``controller_epochs``,
``leader_changes``, ``isr_changes``, ``hw_samples``, ``coordinator_loads``,
``rebalances`` and ``commits`` (lazy DataFrames, ``run`` first, the documented
columns in the documented order).  Everything is joins and window functions
over the raw inputs; Python sees no row here (``commits`` reads the segments,
which ``analysis.decode`` decodes inside Spark tasks).

Event ordering follows ``node.events.read_run_events``: per broker file, lines
are in ``mono_ns`` order, and when two lines of one file share an instant the
type decides (a ``partition_state_written`` before the plan's
``partition_states_written``, a ``coordinator_load_started`` before its
``coordinator_loaded``).
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

OFFSETS_TOPIC = "__consumer_offsets"

TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "faults": ("run", "fault", "kind", "target", "nodes", "peers", "start_ns", "heal_ns", "duration_ms", "skipped"),
    "controller_epochs": ("run", "epoch", "broker", "elected_ns", "resigned_ns", "resign_reason"),
    "leader_changes": ("run", "time_ns", "controller", "controller_epoch", "topic", "partition", "reason", "leader",
                       "previous_leader", "leader_epoch", "isr", "previous_isr", "zk_version"),
    "isr_changes": ("run", "time_ns", "broker", "source", "topic", "partition", "leader_epoch", "old_isr", "isr"),
    "hw_samples": ("run", "time_ns", "broker", "process_start_ns", "topic", "partition", "old", "new", "decreased",
                   "reason"),
    "coordinator_loads": ("run", "broker", "partition", "leader_epoch", "started_ns", "loaded_ns", "unloaded_ns",
                          "records", "replayed", "duration_ms", "groups"),
    "rebalances": ("run", "group", "generation", "broker", "started_ns", "completed_ns", "stable_ns", "duration_ms",
                   "members", "leader", "protocol", "reason"),
    "commits": ("run", "partition", "offset", "group", "topic", "tpartition", "committed_offset", "leader_epoch",
                "metadata", "commit_ts", "expire_ts", "tombstone", "replicas"),
}

_PRECEDING = (Window.unboundedPreceding, -1)      # every row before this one (a growing frame: linear)
_UP_TO_HERE = (Window.unboundedPreceding, Window.currentRow)


def event_fields(inputs, *types: str) -> DataFrame:
    """The events of ``types``, parsed once for every table (``analysis.events``): ``run, broker, mono_ns,
    type, seq, proc`` and their fields."""
    return inputs.parsed_events().where(F.col("type").isin(*types))


def _rank(order: dict[str, int]) -> Column:
    """Tie-break of lines of one file logged at the same instant, by type."""
    expr = F.lit(0)
    for t, r in order.items():
        expr = F.when(F.col("type") == t, F.lit(r)).otherwise(expr)
    return expr


def _ms(later: Column, earlier: Column) -> Column:
    return (later - earlier) / F.lit(1e6)


def _select(df: DataFrame, name: str) -> DataFrame:
    return df.select(*TABLE_COLUMNS[name])


# ---------------------------------------------------------------- faults

def faults(inputs, nemesis: DataFrame | None = None) -> DataFrame:
    """One row per nemesis start, with the first heal of the same fault after it.  ``nemesis``: the nemesis
    lines (``build_ops_tables``'s), else taken from ``inputs.ops``."""
    if nemesis is None:
        nemesis = inputs.ops.where(F.col("process") == "nemesis")
    nem = nemesis.select("run", "index", "time", "f", F.col("value").alias("v"))  # load.VALUE_DDL has its fields
    starts = nem.where(F.col("v.phase") == "start").select(
        "run", F.col("index").alias("_start_index"), F.col("v.fault").alias("fault"),
        F.coalesce(F.col("v.kind"), F.col("f")).alias("kind"), F.col("v.target").alias("target"),
        F.coalesce(F.col("v.nodes"), F.array().cast("array<string>")).alias("nodes"),
        F.coalesce(F.col("v.peers"), F.array().cast("array<string>")).alias("peers"),
        F.col("time").alias("start_ns"), F.col("v.skipped").alias("skipped"))
    heals = nem.where(F.col("v.phase") == "heal").select(
        F.col("run").alias("_hrun"), F.col("v.fault").alias("_hfault"), F.col("index").alias("_hindex"),
        F.col("time").alias("_htime"))
    joined = starts.join(heals, (F.col("run") == F.col("_hrun")) & (F.col("fault") == F.col("_hfault"))
                         & (F.col("_hindex") > F.col("_start_index")), "left")
    keys = [c for c in starts.columns]
    out = joined.groupBy(*keys).agg(F.min_by("_htime", "_hindex").alias("heal_ns"))
    out = out.withColumn("duration_ms", _ms(F.col("heal_ns"), F.col("start_ns")))
    return _select(out, "faults")


# ---------------------------------------------------------------- controller

def controller_epochs(inputs) -> DataFrame:
    """A tenure per ``controller_elected``; it ends at that broker's ``controller_resigned`` of the epoch."""
    elected = event_fields(inputs, "controller_elected").select(
        "run", "broker", "epoch", F.col("mono_ns").alias("elected_ns"))
    resigned = event_fields(inputs, "controller_resigned").select(
        F.col("run").alias("_r"), F.col("broker").alias("_b"), F.col("epoch").alias("_e"),
        F.col("mono_ns").alias("_t"), F.col("reason").alias("_reason"))
    j = elected.join(resigned, (F.col("run") == F.col("_r")) & (F.col("broker") == F.col("_b"))
                     & (F.col("epoch") == F.col("_e")) & (F.col("_t") >= F.col("elected_ns")), "left")
    out = j.groupBy("run", "broker", "epoch", "elected_ns").agg(
        F.min("_t").alias("resigned_ns"), F.min_by("_reason", "_t").alias("resign_reason"))
    return _select(out, "controller_epochs")


def state_writes(inputs) -> DataFrame:
    """Every ``partition_state_written`` with ``landed_ns``: the ``mono_ns_written`` of the next
    ``partition_states_written`` of the same broker (its own ``mono_ns`` when there is none, or it has none)."""
    ev = event_fields(inputs, "partition_state_written", "partition_states_written")
    ev = ev.withColumn("_rank", _rank({"partition_states_written": 1}))
    later_first = (Window.partitionBy("run", "broker")
                   .orderBy(F.col("mono_ns").desc(), F.col("_rank").desc()).rowsBetween(*_PRECEDING))
    plan = F.when(F.col("type") == "partition_states_written", F.struct(F.col("mono_ns_written").alias("w")))
    ev = ev.withColumn("_plan", F.last(plan, ignorenulls=True).over(later_first))
    states = ev.where(F.col("type") == "partition_state_written")
    return states.select(*[c for c in states.columns if c not in ("_plan", "_rank")],
                         F.coalesce(F.col("_plan.w"), F.col("mono_ns")).alias("landed_ns"))


def leader_changes(inputs, states: DataFrame | None = None) -> DataFrame:
    s = state_writes(inputs) if states is None else states
    named = {"time_ns": F.col("landed_ns"), "controller": F.col("broker")}
    return s.select(*[named[c].alias(c) if c in named else c for c in TABLE_COLUMNS["leader_changes"]])


def isr_changes(inputs, states: DataFrame | None = None) -> DataFrame:
    """``replica_isr_changed`` lines (``source`` ``broker``) and the controller's writes whose ISR differs
    from the previous one as a set, or that created the partition (``source`` ``controller``)."""
    seen = event_fields(inputs, "replica_isr_changed")
    seen = seen.select("run", F.col("mono_ns").alias("time_ns"), "broker", F.lit("broker").alias("source"),
                       "topic", "partition", "leader_epoch", "old_isr", "isr")
    s = state_writes(inputs) if states is None else states
    changed = s.where(F.col("previous_isr").isNull() | (F.array_sort("isr") != F.array_sort("previous_isr")))
    written = changed.select("run", F.col("landed_ns").alias("time_ns"), "broker", F.lit("controller").alias("source"),
                             "topic", "partition", "leader_epoch", F.col("previous_isr").alias("old_isr"), "isr")
    return _select(seen.unionByName(written), "isr_changes")


# ---------------------------------------------------------------- replication

def hw_samples(inputs) -> DataFrame:
    """``hw_changed`` lines, each with the ``broker_starting`` of the process that logged it: the processes
    (few) are intervals joined to the lines (many), so no broker's lines have to be sorted in one task."""
    starts = event_fields(inputs, "broker_starting").select(
        F.col("run").alias("_r"), F.col("broker").alias("_b"), F.col("mono_ns").alias("process_start_ns"))
    starts = starts.withColumn("_next", F.lead("process_start_ns").over(
        Window.partitionBy("_r", "_b").orderBy("process_start_ns")))
    hw = event_fields(inputs, "hw_changed")
    during = ((F.col("run") == F.col("_r")) & (F.col("broker") == F.col("_b"))
              & (F.col("mono_ns") >= F.col("process_start_ns"))
              & (F.col("_next").isNull() | (F.col("mono_ns") < F.col("_next"))))
    out = hw.join(F.broadcast(starts), during, "left").withColumn("time_ns", F.col("mono_ns"))
    return _select(out, "hw_samples")


# ---------------------------------------------------------------- group coordinator

def coordinator_loads(inputs) -> DataFrame:
    """A load per ``coordinator_load_started``, with the ``coordinator_loaded`` and ``coordinator_unloaded``
    that follow it on the same broker for the same partition, before the next load starts."""
    types = {"coordinator_load_started": 0, "coordinator_loaded": 1, "coordinator_unloaded": 2}
    ev = event_fields(inputs, *types)
    w = (Window.partitionBy("run", "broker", "partition").orderBy("mono_ns", _rank(types))
         .rowsBetween(*_UP_TO_HERE))
    started = F.col("type") == "coordinator_load_started"
    ev = ev.withColumn("_load", F.sum(F.when(started, 1).otherwise(0)).over(w)).where(F.col("_load") > 0)
    loaded_t = F.when(F.col("type") == "coordinator_loaded", F.col("mono_ns"))

    def at_loaded(c: str) -> Column:
        return F.min_by(F.col(c), loaded_t).alias(c)

    out = ev.groupBy("run", "broker", "partition", "_load").agg(
        F.min_by(F.when(started, F.col("leader_epoch")), F.when(started, F.col("mono_ns"))).alias("leader_epoch"),
        F.min(F.when(started, F.col("mono_ns"))).alias("started_ns"), F.min(loaded_t).alias("loaded_ns"),
        F.min(F.when(F.col("type") == "coordinator_unloaded", F.col("mono_ns"))).alias("unloaded_ns"),
        at_loaded("records"), at_loaded("replayed"), at_loaded("duration_ms"), at_loaded("groups"))
    return _select(out, "coordinator_loads")


def rebalances(inputs) -> DataFrame:
    """A row per ``group_generation``: the ``PreparingRebalance`` that began it (after the previous
    generation, on the same broker) and the ``Stable`` that followed (before the next one)."""
    from analysis.events import group_events
    ev = group_events(inputs.events.sparkSession, inputs.run_files())   # their leader is a member id
    is_gen = F.col("type") == "group_generation"
    part = Window.partitionBy("run", "broker", "group")
    before = part.orderBy("mono_ns", F.when(is_gen, 1).otherwise(0)).rowsBetween(*_PRECEDING)
    after = part.orderBy(F.col("mono_ns").desc(), F.when(is_gen, 1).otherwise(0).desc()).rowsBetween(*_PRECEDING)
    prep = F.when(F.col("to") == "PreparingRebalance",
                  F.struct(F.col("mono_ns").alias("t"), F.col("reason").alias("r")))
    ev = (ev.withColumn("_prev_gen", F.last(F.when(is_gen, F.col("mono_ns")), ignorenulls=True).over(before))
          .withColumn("_prep", F.last(prep, ignorenulls=True).over(before))
          .withColumn("_next_gen", F.last(F.when(is_gen, F.col("mono_ns")), ignorenulls=True).over(after))
          .withColumn("_stable", F.last(F.when(F.col("to") == "Stable", F.col("mono_ns")), ignorenulls=True)
                      .over(after)))
    gens = ev.where(is_gen)
    began = F.col("_prep").isNotNull() & (F.col("_prev_gen").isNull() | (F.col("_prep.t") > F.col("_prev_gen")))
    settled = F.col("_stable").isNotNull() & (F.col("_next_gen").isNull() | (F.col("_stable") < F.col("_next_gen")))
    members_json = F.col("members")  # the member ids (or a count), as JSON text
    members = F.when(members_json.startswith("["), F.size(F.from_json(members_json, "ARRAY<STRING>"))) \
        .otherwise(members_json.cast("int"))
    out = gens.select(
        "run", "group", "generation", "broker", F.when(began, F.col("_prep.t")).alias("started_ns"),
        F.col("mono_ns").alias("completed_ns"), F.when(settled, F.col("_stable")).alias("stable_ns"),
        members.alias("members"), "leader", "protocol", F.when(began, F.col("_prep.r")).alias("reason"))
    out = out.withColumn("duration_ms", _ms(F.coalesce("stable_ns", "completed_ns"), F.col("started_ns")))
    return _select(out, "rebalances")


def commits(inputs) -> DataFrame:
    """Offset-commit records on disk, one row per distinct record; ``replicas`` = brokers holding it."""
    segments = inputs.segments
    if segments is None:
        from analysis.decode import read_segments
        segments = inputs.segments = read_segments(inputs.ops.sparkSession, inputs.run_files())
    keys = [c for c in TABLE_COLUMNS["commits"] if c != "replicas"]
    out = (segments.where(F.col("kind") == "offset").groupBy(*keys)
           .agg(F.countDistinct("broker").cast("int").alias("replicas")))
    return _select(out, "commits")


def build_event_tables(inputs, nemesis: DataFrame | None = None) -> dict[str, DataFrame]:
    """Every events-derived table (and ``faults``, from the history's nemesis lines; ``commits``, from the
    segments)."""
    return {"faults": faults(inputs, nemesis), **event_log_tables(inputs)}


def event_log_tables(inputs) -> dict[str, DataFrame]:
    """The tables made from the brokers' event logs and log segments alone (not the history): every table of
    ``build_event_tables`` but ``faults``."""
    states = state_writes(inputs)
    return {
        "controller_epochs": controller_epochs(inputs),
        "leader_changes": leader_changes(inputs, states),
        "isr_changes": isr_changes(inputs, states),
        "hw_samples": hw_samples(inputs),
        "coordinator_loads": coordinator_loads(inputs),
        "rebalances": rebalances(inputs),
        "commits": commits(inputs),
    }
