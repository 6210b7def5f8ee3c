"""What the Spark checkers share: their context, the anomaly row, the parsed event logs, helpers.

Every checker takes a :class:`Ctx` and returns rows of the ``anomalies``
table (docs/analysis.md): ``run, kind, message, group, topic, partition,
op_indexes array<long>, event_types array<string>, details`` (JSON).
``op_indexes`` are the ``index`` values of the history lines that
``judge.checkers`` puts in ``Anomaly.ops``, in the same order (distinct, at
most 4); ``details`` holds the Python anomaly's ``details`` plus ``events``:
``[{broker, mono_ns, type}]`` of the evidence event lines that are cheap to
name.  Everything is keyed by ``run``.
"""
from __future__ import annotations

import operator
import threading
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from analysis.local_rows import local_rows
from analysis.ops_tables import as_int, tp_partition, tp_topic
from analysis.spark import kept, known_empty, local, local_leaves, release

OFFSETS_TOPIC = "__consumer_offsets"
MAX_EVIDENCE = 4
ANOMALY_COLUMNS = ["run", "kind", "message", "group", "topic", "partition", "op_indexes", "event_types", "details"]
ANOMALY_SCHEMA = ("run string, kind string, message string, group string, topic string, partition int, "
                  "op_indexes array<long>, event_types array<string>, details string")
EVENT_KEY = "struct<broker:int,mono_ns:bigint,type:string>"

UNBOUNDED = Window.unboundedPreceding


@dataclass
class Ctx:
    spark: SparkSession
    runs: list[str]
    ops: DataFrame
    observations: DataFrame
    group_offsets: DataFrame
    pairing_errors: DataFrame
    events: DataFrame                       # inputs.parsed_events(): every line, its fields parsed (analysis.events)
    extras: DataFrame                       # ops_tables.extras_of(...): the few ops rows with value parts
    unclean_election: bool = False
    final_reads_required: bool = True
    offsets_partitions: int | None = None
    cached: list[DataFrame] = field(default_factory=list)
    shared: dict[str, Any] = field(default_factory=dict)   # once(): what several checkers share
    cuts: list = field(default_factory=list)   # (DataFrame cut, the JVM RDD behind its leaf): cut()
    # once()'s lock per name: the checkers may be built by two driver threads (checks.plan_checks)
    _locks: dict[str, threading.Lock] = field(default_factory=dict, repr=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def persist(self, df: DataFrame) -> DataFrame:
        """``df`` kept until ``release`` (``analysis.spark.kept``: persisted, or for a small input a leaf)."""
        df = kept(df)
        self.cached.append(df)
        return df

    def cut(self, df: DataFrame) -> DataFrame:
        """``df`` computed once, by the first job that reads it, and kept until ``release``; for the few rows
        several parts of a checker read (its candidates, the as-of steps).  Unlike ``persist``, the DataFrame
        returned is a leaf (a lazy local checkpoint): each DataFrame built on it is analysed without ``df``'s
        lineage, which the JVM's analyzer otherwise walks again for every one (a checker's plans hold it once
        per reader; ``split-coordinator``'s took seconds to build on a run of 10k operations).  Its physical
        plan is made here, and the broadcasts in it start here.  ``df`` itself is kept until ``release``: its
        physical plan owns the SQL metrics the leaf's tasks report to (once collected, each task logged an
        error for each metric).  A lost executor loses its part of the rows (local checkpoints are not
        recomputed): the analysis then fails rather than being wrong.  A small input's (``local_leaves``) is
        computed now, a local relation (``analysis.spark.local``: an empty one empties what is built on it)."""
        if local_leaves(self.spark):
            return local(df)
        out = df.localCheckpoint(eager=False)
        self.cuts.append((df, out._jdf.queryExecution().analyzed().rdd()))
        return out

    def none(self, df: DataFrame, fold: bool = False) -> bool:
        """Whether ``df`` (a frame ``cut`` or ``persist`` returned; with ``fold``, also a filter or projection of
        one) is known to hold no rows: a small input's local relation with none (``analysis.spark.known_empty``;
        a large input's rows are not counted, so it is never known there).  A checker whose candidates are none
        returns ``empty_anomalies`` then: the same rows (none) as the frames it would build on them, without
        building them (each a DataFrame the JVM analyses; a valid run's candidates are almost always none)."""
        return known_empty(df, fold)

    def once(self, name: str, build) -> Any:
        """``build()``'s value, built once per context, by whichever thread asks first; a thread that asks
        while another builds it waits for that one's value.  (One lock per name: a build that asks for another
        name waits only for that one, and no two builds can wait for each other, since a name's build never
        needs its own value.)"""
        with self._guard:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self.shared:
                self.shared[name] = build()
        return self.shared[name]

    def memo(self, name: str, build, persist: bool = True) -> DataFrame:
        """A DataFrame several checkers share, built once per context (and persisted)."""
        return self.once(name, (lambda: self.persist(build())) if persist else build)

    def release(self) -> None:
        for df in self.cached:
            release(df)
        for _df, rdd in self.cuts:
            rdd.unpersist(False)
        self.cached.clear()
        self.cuts.clear()
        self.shared.clear()

    def runs_with_events(self) -> DataFrame:
        """(run) of the runs with at least one event line, of any type."""
        return self.memo("runs_with_events", lambda: self.events.select("run").distinct())

    def ev(self, *types: str) -> DataFrame:
        return self.events.where(F.col("type").isin(*types))


def event_key(broker: Column | str = "broker", mono_ns: Column | str = "mono_ns",
              type_: Column | str = "type") -> Column:
    b = F.col(broker) if isinstance(broker, str) else broker
    m = F.col(mono_ns) if isinstance(mono_ns, str) else mono_ns
    t = F.col(type_) if isinstance(type_, str) else type_
    return F.struct(b.cast("int").alias("broker"), m.cast("long").alias("mono_ns"), t.cast("string").alias("type"))


def evidence(*cols: Column) -> Column:
    """The non-null values of ``cols`` in order, distinct, at most 4 (``check_model._distinct``)."""
    return F.slice(F.array_distinct(F.filter(F.array(*[c.cast("long") for c in cols]), lambda x: x.isNotNull())),
                   1, MAX_EVIDENCE)


def event_evidence(*keys: Column) -> Column:
    arr = F.array(*[k.cast(EVENT_KEY) for k in keys]) if keys else F.array().cast(f"array<{EVENT_KEY}>")
    return F.slice(F.array_distinct(F.filter(arr, lambda x: x.isNotNull() & x["type"].isNotNull())), 1, MAX_EVIDENCE)


def anomalies(df: DataFrame, kind: str, message: Column, *, ops: Column | None = None,
              events: Column | None = None, group: Column | None = None, topic: Column | None = None,
              partition: Column | None = None, **details: Column) -> DataFrame:
    """Rows of the anomalies table from ``df`` (one per anomaly), in one projection (one DataFrame, one analysis
    by the JVM: a checker's plans are large, and each DataFrame built on them is analysed whole)."""
    evs = events if events is not None else event_evidence()
    null = F.lit(None)
    d = {k: v for k, v in (("group", group), ("topic", topic), ("partition", partition)) if v is not None}
    d.update(details)
    det = F.struct(*[v.alias(k) for k, v in d.items()], evs.alias("events"))
    return df.select("run", F.lit(kind).alias("kind"), message.alias("message"),
                     (group if group is not None else null).cast("string").alias("group"),
                     (topic if topic is not None else null).cast("string").alias("topic"),
                     (partition if partition is not None else null).cast("int").alias("partition"),
                     (ops if ops is not None else F.array().cast("array<long>")).cast("array<long>")
                     .alias("op_indexes"), F.transform(evs, lambda e: e["type"]).alias("event_types"),
                     F.to_json(det).alias("details"))


def fmt(template: str, *cols: Column) -> Column:
    """``format_string`` with null shown as ``None`` (as Python's f-strings show it)."""
    return F.format_string(template, *[F.coalesce(c.cast("string"), F.lit("None")) for c in cols])


def pylist(arr: Column) -> Column:
    """An array of strings shown as Python shows a list of str: ``['a', 'b']``."""
    return F.concat(F.lit("["), F.concat_ws(", ", F.transform(arr, lambda x: F.concat(F.lit("'"), x, F.lit("'")))),
                    F.lit("]"))


def partition_for(group: Column, n: Column) -> Column:
    """Kafka's ``abs(groupId.hashCode) % n`` (``kafkacommon.hashing.partition_for``) as a Spark expression:
    Java's String.hashCode over the UTF-16 code units, int32 wraparound, ``abs(MIN_VALUE) = 0``; null
    unless ``n > 0``.  A per-character loop in SQL: apply it to distinct groups, not to every row."""
    units = F.hex(F.encode(group, "UTF-16BE"))          # 4 hex digits per UTF-16 code unit
    count = (F.length(units) / 4).cast("int")
    h = F.aggregate(F.sequence(F.lit(0), F.greatest(count - 1, F.lit(0))), F.lit(0).cast("long"),
                    lambda acc, i: (acc * 31 + F.conv(units.substr(i * 4 + 1, F.lit(4)), 16, 10).cast("long"))
                    % F.lit(4294967296))
    h = F.when(count == 0, F.lit(0).cast("long")).otherwise(h)
    signed = F.when(h >= 2147483648, h - 4294967296).otherwise(h)
    a = F.when(signed == -2147483648, F.lit(0).cast("long")).otherwise(F.abs(signed))
    return F.when(n > 0, (a % n.cast("long")).cast("int"))


def asof(queries: DataFrame, facts: DataFrame, keys: list[str], q_time: str, f_time: str,
         aggs: dict[str, Column], strict: bool) -> DataFrame:
    """For each query row, aggregates over the fact rows of the same ``keys`` whose ``f_time`` is below
    (``strict``) or at most ``q_time``: one window over the union of both, ordered by time (no join).
    ``aggs`` are order-insensitive aggregates (max, count, ...) over fact columns, which are null on
    query rows; the result is ``queries`` plus those columns."""
    qcols = queries.columns
    fonly = [c for c in facts.columns if c not in qcols]
    q = queries.select(*qcols, *[F.lit(None).cast(facts.schema[c].dataType).alias(c) for c in fonly],
                       F.col(q_time).alias("_t"), F.lit(0 if strict else 2).alias("_k"))
    f = facts.select(*[F.col(c) if c in facts.columns else F.lit(None).cast(queries.schema[c].dataType).alias(c)
                       for c in qcols], *fonly, F.col(f_time).alias("_t"), F.lit(1).alias("_k"))
    w = Window.partitionBy(*keys).orderBy("_t", "_k").rowsBetween(UNBOUNDED, Window.currentRow)
    u = q.unionByName(f)
    return (u.select(*qcols, "_k", *[a.over(w).alias(name) for name, a in aggs.items()])
            .where(F.col("_k") != 1).drop("_k"))


def asof_steps(facts: DataFrame, keys: list[str], values: dict[str, Column]) -> DataFrame:
    """The running maxima of a small fact table per ``keys``, as steps for :func:`asof_lookup`.

    ``facts`` has ``keys``, ``_t`` (a long time) and ``_k`` (a rank among rows of one time: a query of rank
    q sees the facts of its time whose rank is below q); ``values`` are the columns whose maximum over the
    facts up to a point is looked up (null where a fact has none).  Facts without a time are left out.  One
    row per distinct (keys, ``_t``, ``_k``) (facts tied there are one step) and per time bucket the step
    spans: ``_b``, with the key's first time ``_lo``, bucket width ``_w`` and bucket count ``_nb`` (about two
    buckets per step, so a query meets about one step of its bucket besides its own)."""
    ties = (facts.where(F.col("_t").isNotNull()).groupBy(*keys, "_t", "_k")
            .agg(*[F.max(v).alias(n) for n, v in values.items()]))
    order = Window.partitionBy(*keys).orderBy("_t", "_k")
    whole = Window.partitionBy(*keys)
    steps = ties.select(*keys, "_t", "_k", *[F.max(n).over(order.rowsBetween(UNBOUNDED, Window.currentRow)).alias(n)
                                             for n in values],
                        F.lead("_t").over(order).alias("_nt"), F.lead("_k").over(order).alias("_nk"),
                        F.min("_t").over(whole).alias("_lo"), F.max("_t").over(whole).alias("_hi"),
                        F.count(F.lit(1)).over(whole).alias("_n"))
    steps = steps.withColumn("_w", F.expr("(_hi - _lo) div (2 * _n) + 1"))
    steps = steps.withColumn("_nb", F.expr("(_hi - _lo) div _w + 1"))
    first = F.expr("least(_nb - 1, greatest(0L, (_t - _lo) div _w))")
    last = F.expr("if(_nt is null, _nb - 1, least(_nb - 1, greatest(0L, (_nt - _lo) div _w)))")
    return steps.select(*keys, "_t", "_k", "_nt", "_nk", "_lo", "_w", "_nb", *values,
                        F.explode(F.sequence(first, last)).alias("_b"))


def asof_lookup(queries: DataFrame, steps: DataFrame, keys: list[str], q_time: str, q_rank: int,
                names: list[str]) -> DataFrame:
    """``queries`` plus the columns ``names`` of :func:`asof_steps`: the maxima over the facts of the same
    ``keys`` (compared null-safe, as a window's partitions) before (``q_time``, ``q_rank``); null when there
    are none, or ``q_time`` is null.  The same as :func:`asof` with max aggregates, without a shuffle of the
    queries: two broadcast joins (the steps are few: a few per fact), each query meeting the steps of
    its time bucket only."""
    s = steps.select(*[F.col(k).alias(f"_s{i}") for i, k in enumerate(keys)], "_t", "_k", "_nt", "_nk", "_lo",
                     "_w", "_nb", "_b", *names)
    spans = s.select(*[f"_s{i}" for i in range(len(keys))], "_lo", "_w", "_nb").distinct()
    same = [F.col(k).eqNullSafe(F.col(f"_s{i}")) for i, k in enumerate(keys)]
    q = queries.join(F.broadcast(spans), reduce(operator.and_, same), "left").select(
        *queries.columns, F.expr(f"least(_nb - 1, greatest(0L, (`{q_time}` - _lo) div _w))").alias("_qb"))
    t, r = F.col(q_time), F.lit(q_rank)
    after = (F.col("_t") < t) | ((F.col("_t") == t) & (F.col("_k") < r))
    before = F.col("_nt").isNull() | (t < F.col("_nt")) | ((t == F.col("_nt")) & (r < F.col("_nk")))
    on = reduce(operator.and_, same) & (F.col("_qb") == F.col("_b")) & after & before
    return q.join(F.broadcast(s.drop("_lo", "_w", "_nb")), on, "left").select(*queries.columns, *names)


def empty_anomalies(spark: SparkSession) -> DataFrame:
    return local_rows(spark, [], ANOMALY_SCHEMA)


def offset_entries(m: Column) -> Column:
    """A value's ``offsets`` map as array<struct<t, p, o>>: parsed keys only, ``o`` null unless an int >= 0
    (``offsets_of``)."""
    ent = F.transform(F.map_entries(m), lambda e: F.struct(
        tp_topic(e["key"]).alias("t"), tp_partition(e["key"]).alias("p"),
        F.when(as_int(e["value"]) >= 0, as_int(e["value"])).alias("o")))
    return F.filter(ent, lambda x: x["t"].isNotNull())


def lookup_offset(entries: Column, topic: Column, partition: Column) -> Column:
    """The offset of (topic, partition) in ``offset_entries`` (the last such key, as a dict keeps it)."""
    return F.element_at(F.filter(entries, lambda e: (e["t"] == topic) & (e["p"] == partition)), -1)["o"]
