"""Checkers of the topic logs in Spark: lost writes, inconsistent offsets and duplicates, unseen messages.

Same rules as ``judge/checkers.py``'s ``check_lost_writes``, ``check_offsets``
and ``check_unseen`` (docs/chaos.md, "Checkers"), from the ``ops`` and
``observations`` tables (and the groups' fetch-committed answers); of the events only
``log_segments_deleted`` (:func:`log_starts`: records below a log start offset were deleted by
retention, not lost).
The observations are shuffled once (:func:`observed`: one row per distinct
(topic, partition, offset, value) with what each rule needs); everything else
is a broadcast join with the few candidates or a small per-partition table.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from analysis.checks_base import Ctx, anomalies, empty_anomalies, evidence, fmt, lookup_offset, pylist
from analysis.checks_groups import fetch_told, fetches
from analysis.local_rows import local_rows
from analysis.ops_tables import tp_topic
from analysis.spark import spread, union_by_name

TP = ["run", "topic", "partition"]


def not_acks_all(ctx: Ctx) -> DataFrame:
    """(run, send_index) of the sends whose invoke asked for acks other than all/-1 (few, if any): such
    sends are not judged by ``lost-write``."""
    def build() -> DataFrame:
        acks = F.col("acks")
        return (ctx.extras.where((F.col("f") == "send") & acks.isNotNull() & ~acks.isin("-1", "all"))
                .select("run", F.col("index").alias("send_index")))
    return ctx.memo("not_acks_all", build)


def sends(ctx: Ctx) -> DataFrame:
    """Ok sends with a topic, an integer partition and offset (``sent_record``); ``acks_all`` false when
    the invoke asked for acks other than all/-1 (such sends are not judged by ``lost-write``)."""
    ok = (ctx.ops.where((F.col("f") == "send") & (F.col("type") == "ok") & F.col("topic").isNotNull()
                        & F.col("partition").isNotNull() & F.col("offset").isNotNull())
          .select(*TP, "offset", "value", F.col("index").alias("send_index"), F.col("complete_index")
                  .alias("send_done")))
    bad = not_acks_all(ctx).withColumn("_bad", F.lit(True))
    return (ok.join(F.broadcast(bad), ["run", "send_index"], "left")
            .select(*ok.columns, F.col("_bad").isNull().alias("acks_all")))


def final_reads(ctx: Ctx) -> DataFrame:
    """Per partition with a final read (an ok ``final`` poll naming it in its invoke or its records): the
    last one's completion index and the largest ``high_watermark`` of those polls."""
    def build() -> DataFrame:
        fin = (ctx.extras.where((F.col("f") == "poll") & (F.col("type") == "ok") & F.col("final"))
               .select("run", F.col("index").alias("op_index"), "complete_index", F.col("high_watermark").alias("hw"),
                       F.col("poll_topic").alias("topic"), F.col("poll_partition").alias("partition")))
        from_records = (ctx.observations.where(F.col("source") == "final")
                        .groupBy(*TP, "op_index").agg(F.max("complete_index").alias("complete_index"))
                        .join(F.broadcast(fin.select("run", "op_index", "hw")), ["run", "op_index"]))
        both = fin.where(F.col("topic").isNotNull()).unionByName(from_records)
        return both.groupBy(*TP).agg(F.max("complete_index").alias("final_done"), F.max("hw").alias("hw"))
    return ctx.memo("final_reads", build)


def poll_groups(ctx: Ctx) -> tuple[DataFrame, int]:
    """(run, group, gid) of the groups whose polls returned records, numbered from 0 within each run, and
    how many 64-bit masks hold one bit per group (a small collect: the groups of the runs)."""
    def build() -> tuple[DataFrame, int]:
        rows = sorted(tuple(r) for r in ctx.observations.where((F.col("source") == "poll") & F.col("group").isNotNull())
                      .select("run", "group").distinct().collect())
        ids, per_run = [], {}
        for run, group in rows:
            ids.append((run, group, per_run.setdefault(run, 0)))
            per_run[run] += 1
        masks = max(1, -(-max(per_run.values(), default=1) // 64))
        return local_rows(ctx.spark, ids, "run string, `group` string, gid int"), masks
    return ctx.once("poll_groups", build)


def polled_by(gid: str, masks: int) -> Column:
    """Whether the observed row's masks (``m0``, ``m1``, ...) have the bit of group id column ``gid`` (false
    when it is null: a group that never polled)."""
    hit = F.lit(False)
    for j in range(masks):
        bit = F.expr(f"(shiftright(coalesce(m{j}, 0L), {gid} % 64) & 1L) = 1L")
        hit = hit | ((F.col(gid) / 64).cast("int") == j) & bit
    return F.coalesce(hit, F.lit(False))


def observed(ctx: Ctx) -> DataFrame:
    """One row per distinct (run, topic, partition, offset, value) observed (null values too), with fixed-width
    aggregates only (a hash aggregation, no lists): its first observer in the Python checker's order (``fi``,
    the smallest invoke index, and ``fdone``, that op's completion: the record's position only orders the
    records of one op, which share both), whether a final read returned it (``in_final``), how many ok sends
    observed it (``n_sends``) and the earliest completion among them (``send_done``), and one bit per group
    whose non-final polls returned it there (``m0``, ``m1``, ..., ``poll_groups``).  The observations are
    shuffled by (run, topic, partition, offset), so the per-offset rules need no other shuffle."""
    def build() -> DataFrame:
        ids, masks = poll_groups(ctx)
        src = F.col("source")
        o = ctx.observations.join(F.broadcast(ids), ["run", "group"], "left")
        gid = F.col("gid")
        parts = spread(ctx.spark, max(16, 8 * ctx.spark.sparkContext.defaultParallelism))
        return (o.repartition(parts, *TP, "offset").groupBy(*TP, "offset", "value")
                .agg(F.min("op_index").alias("fi"), F.min_by("complete_index", "op_index").alias("fdone"),
                     F.max(src == "final").alias("in_final"),
                     F.sum(F.when(src == "send", 1).otherwise(0)).alias("n_sends"),
                     F.min(F.when(src == "send", F.col("complete_index"))).alias("send_done"),
                     *[F.bit_or(F.when((src == "poll") & ((gid / 64).cast("int") == j),
                                       F.expr("shiftleft(1L, gid % 64)"))).alias(f"m{j}")
                       for j in range(masks)]))
    return ctx.memo("observed", build)


def _sends_at(ctx: Ctx, keys: DataFrame) -> DataFrame:
    """The ok sends observed at ``keys`` (few rows of run, topic, partition, offset, value, and any other
    columns, kept): one row per send with ``send_index`` and ``send_done`` (values compared null-safe)."""
    s = (ctx.observations.where(F.col("source") == "send")
         .select(F.col("run").alias("_r"), F.col("topic").alias("_t"), F.col("partition").alias("_p"),
                 F.col("offset").alias("_o"), F.col("value").alias("_v"), F.col("op_index").alias("send_index"),
                 F.col("complete_index").alias("send_done")))
    on = ((F.col("_r") == F.col("run")) & (F.col("_t") == F.col("topic")) & (F.col("_p") == F.col("partition"))
          & (F.col("_o") == F.col("offset")) & F.col("_v").eqNullSafe(F.col("value")))
    return s.join(F.broadcast(keys), on).drop("_r", "_t", "_p", "_o", "_v")


def log_starts(ctx: Ctx) -> DataFrame:
    """(run, topic, partition, lso): each partition's highest log start offset from retention
    (``log_segments_deleted``), as ``judge.check_model.log_start_offsets``; few rows."""
    return ctx.memo("log_starts", lambda: ctx.ev("log_segments_deleted").groupBy(*TP)
                    .agg(F.max("log_start_offset").alias("lso")))


def _not_retained(df: DataFrame, ctx: Ctx, also: Column | None = None) -> DataFrame:
    """``df``'s rows except those below their partition's log start offset (and, with ``also``, meeting it)."""
    gone = F.col("offset") < F.coalesce(F.col("lso"), F.lit(-1))
    if also is not None:
        gone = gone & also
    return df.join(F.broadcast(log_starts(ctx)), TP, "left").where(~gone).drop("lso")


def check_lost_writes(ctx: Ctx) -> DataFrame:
    """``lost-write``: an ok send (acks all) that no final read of its partition has (its value at its
    offset, null-safe: the observed row of the send has no final source)."""
    cand = observed(ctx).where((F.col("n_sends") > 0) & ~F.col("in_final")).select(*TP, "offset", "value")
    if ctx.none(cand, fold=True):   # every value sent was in a final read (a filter of a kept frame: no job)
        return empty_anomalies(ctx.spark)
    lost = ctx.cut(_sends_at(ctx, cand).join(F.broadcast(final_reads(ctx)), TP))
    if ctx.none(lost):   # every acknowledged send with a final read of its partition was read: none lost
        return empty_anomalies(ctx.spark)
    lost = lost.join(F.broadcast(not_acks_all(ctx)), ["run", "send_index"], "left_anti")
    fobs = (ctx.observations.where(F.col("source") == "final")
            .select(*TP, "offset", F.coalesce(F.col("value"), F.lit("None")).alias("fv"))
            .join(F.broadcast(lost.select(*TP, "offset").distinct()), [*TP, "offset"])
            .groupBy(*TP, "offset").agg(F.collect_set("fv").alias("found")))
    found = _not_retained(lost.join(fobs, [*TP, "offset"], "left"), ctx,
                          F.coalesce(F.size("found"), F.lit(0)) <= 0)  # retention deleted it, none replaced it
    shown = F.array_sort(F.coalesce(F.col("found"), F.array().cast("array<string>")))
    why = (F.when(F.size(shown) > 0, F.concat(F.lit("the final read has "), pylist(shown), F.lit(" there")))
           .when(F.col("hw").isNotNull() & (F.col("offset") >= F.col("hw")),
                 fmt("beyond the final high watermark %s", F.col("hw")))
           .otherwise(F.lit("the final read has no record at that offset")))
    msg = F.concat(fmt("acknowledged send '%s' to %s/%s at offset %s is not in the final read: ", F.col("value"),
                       F.col("topic"), F.col("partition"), F.col("offset")), why)
    return anomalies(found, "lost-write", msg, ops=evidence(F.col("send_done"), F.col("final_done")),
                     topic=F.col("topic"), partition=F.col("partition"), offset=F.col("offset"),
                     value=F.col("value"))


def unknown_lost_writes(ctx: Ctx) -> DataFrame:
    """Partitions with acknowledged sends and no final read (when final reads are required)."""
    if not ctx.final_reads_required:
        return local_rows(ctx.spark, [], "run string, reason string")
    unjudged = (sends(ctx).where("acks_all").join(F.broadcast(final_reads(ctx).select(*TP)), TP, "left_anti")
                .groupBy(*TP).count())
    per_run = unjudged.groupBy("run").agg(F.array_sort(F.collect_list(F.struct(
        "topic", "partition", fmt("%s/%s (%s sends)", F.col("topic"), F.col("partition"), F.col("count"))
        .alias("s")))).alias("l"))
    return per_run.select("run", F.concat(F.lit("lost-write: no final read of "),
                                          F.concat_ws(", ", F.transform("l", lambda x: x["s"])),
                                          F.lit(", which had acknowledged sends")).alias("reason"))


# ---------------------------------------------------------------------- inconsistent offsets, duplicates

def first_observers(ctx: Ctx) -> DataFrame:
    """Per (topic, partition, offset, value) observed, value not null or empty (a null value says nothing
    of uniqueness): its first observer, ``first`` (``i``: invoke index, ``done``: completion index)."""
    return observed(ctx).where(F.col("value").isNotNull() & (F.col("value") != "")).select(
        *TP, "offset", "value", F.struct(F.col("fi").alias("i"), F.col("fdone").alias("done")).alias("first"))


def check_offsets(ctx: Ctx) -> DataFrame:
    """``inconsistent-offset``: two values at one offset; ``duplicate-value``: one value at two offsets.
    Counted first (fixed-width aggregations; the per-offset one in the observations' partitioning); the
    few offsets and values seen more than once are then gathered."""
    firsts = first_observers(ctx)
    multi = firsts.groupBy(*TP, "offset").agg(F.count(F.lit(1)).alias("_n")).where(F.col("_n") > 1).drop("_n")
    at = (firsts.join(F.broadcast(multi), [*TP, "offset"]).groupBy(*TP, "offset")
          .agg(F.array_sort(F.collect_list(F.struct("first", "value"))).alias("vals")))
    shown = F.array_sort(F.transform("vals", lambda x: x["value"]))
    inconsistent = anomalies(
        at, "inconsistent-offset",
        F.concat(fmt("%s/%s offset %s was observed with %s values: ", F.col("topic"), F.col("partition"),
                     F.col("offset"), F.size("vals")), pylist(shown)),
        ops=F.slice(F.array_distinct(F.transform("vals", lambda x: x["first"]["done"])), 1, 4),
        topic=F.col("topic"), partition=F.col("partition"), offset=F.col("offset"), values=shown)
    again = firsts.groupBy("run", "value").agg(F.count(F.lit(1)).alias("_n")).where(F.col("_n") > 1).drop("_n")
    where = (firsts.join(F.broadcast(again), ["run", "value"]).groupBy("run", "value")
             .agg(F.array_sort(F.collect_list(F.struct("first", "topic", "partition", "offset"))).alias("places"),
                  F.min(F.struct("topic", "partition", "offset")).alias("low")))
    places = F.array_sort(F.transform("places", lambda x: F.format_string("%s/%s@%s", x["topic"], x["partition"],
                                                                          x["offset"])))
    duplicate = anomalies(
        where, "duplicate-value",
        F.concat(fmt("value '%s' was observed at %s offsets: ", F.col("value"), F.size("places")), pylist(places)),
        ops=F.slice(F.array_distinct(F.transform("places", lambda x: x["first"]["done"])), 1, 4),
        topic=F.col("low.topic"), partition=F.col("low.partition"), value=F.col("value"), places=places,
        offset=F.col("low.offset"))
    return inconsistent.unionByName(duplicate)


# ---------------------------------------------------------------------- unseen messages

def consumed_topics(ctx: Ctx) -> DataFrame:
    """(run, group, topic): from ok syncs' assignments, member commits (generation >= 0), non-final polls."""
    ok = ctx.extras.where((F.col("type") == "ok") & F.col("group").isNotNull())
    a = ok.where(F.col("f") == "sync").select(
        "run", "group", F.explode(F.col("assignment")).alias("k"))
    as_list = F.from_json(F.col("k"), "array<string>")
    topic = F.when(F.col("k").startswith("["), F.when(F.size(as_list) == 2, as_list[0])).otherwise(tp_topic(F.col("k")))
    from_syncs = a.select("run", "group", topic.alias("topic"))
    from_commits = (ctx.group_offsets.where((F.col("f") == "commit") & (F.col("type") == "ok")
                                            & F.col("group").isNotNull() & (F.col("generation") >= 0))
                    .select("run", "group", "topic"))
    from_polls = (ctx.observations.where((F.col("source") == "poll") & F.col("group").isNotNull())
                  .select("run", "group", "topic").distinct())
    return union_by_name([from_syncs, from_commits, from_polls]).where(F.col("topic").isNotNull()).distinct()


def final_lookup(ctx: Ctx) -> DataFrame:
    """``FinalCommitted.lookup`` for every (group, partition) whose group consumes a topic with ok sends:
    (run, group, topic, partition, committed, fetch_index, fetch_done); fetch_index null when no final
    fetch tells.  A run with ``final`` fetches (ok, with a group) uses each group's last one (committed
    null for a partition it lacks); one without uses, per partition, the group's last ok fetch that told
    about it."""
    def build() -> DataFrame:
        sent = sends(ctx).select(*TP).distinct()
        pairs = F.broadcast(consumed_topics(ctx)).join(sent, ["run", "topic"])
        fs = fetches(ctx)
        marked_runs = fs.where("final").select("run").distinct()
        last_final = (fs.where("final").groupBy("run", "group")
                      .agg(F.max_by(F.struct("op_index", "complete_index", "entries"), F.col("complete_index"))
                           .alias("l")))
        marked = (pairs.join(F.broadcast(last_final), ["run", "group"])
                  .select("run", "group", "topic", "partition",
                          lookup_offset(F.col("l.entries"), F.col("topic"), F.col("partition")).alias("committed"),
                          F.col("l.op_index").alias("fetch_index"), F.col("l.complete_index").alias("fetch_done")))
        told = fetch_told(ctx).where(~F.col("extra")).join(F.broadcast(marked_runs), "run", "left_anti")
        latest = (told.groupBy("run", "group", "topic", "partition")
                  .agg(F.max_by(F.struct("got", "op_index", "complete_index"), F.col("complete_index")).alias("l"))
                  .select("run", "group", "topic", "partition", F.col("l.got").alias("committed"),
                          F.col("l.op_index").alias("fetch_index"), F.col("l.complete_index").alias("fetch_done")))
        found = marked.unionByName(pairs.join(latest, ["run", "group", "topic", "partition"]))
        return pairs.join(found, ["run", "group", "topic", "partition"], "left")
    return ctx.memo("final_lookup", build)


def check_unseen(ctx: Ctx) -> DataFrame:
    """``unseen-message``: an ok send to a topic a group consumes that no non-final poll of the group
    returned, judged against the group's final committed offset (``unseen`` / ``not-drained``).

    Candidates: sends completed before the group's final fetch was invoked whose observed row has no poll
    of the group (its bit); the group may still have polled the value elsewhere (a duplicate), which a
    broadcast join of the few candidates with the group's polls rules out, as Python's "seen" set."""
    ids, masks = poll_groups(ctx)
    looked = final_lookup(ctx).where(F.col("fetch_index").isNotNull()).join(F.broadcast(ids), ["run", "group"],
                                                                              "left")
    keys = (observed(ctx).where(F.col("n_sends") > 0).join(F.broadcast(looked), TP)
            .where((F.col("send_done") < F.col("fetch_index")) & ~polled_by("gid", masks))
            .select(*TP, "offset", "value", "group", "committed", "fetch_index", "fetch_done"))
    cand = ctx.cut(_sends_at(ctx, keys).where(F.col("send_done") < F.col("fetch_index")))
    if ctx.none(cand):   # every send the groups' final fetches judge was polled: nothing unseen
        return empty_anomalies(ctx.spark)
    keys = cand.select("run", "group", "value").distinct()
    polled = (ctx.observations.where((F.col("source") == "poll") & F.col("group").isNotNull())
              .select(F.col("run").alias("s_run"), F.col("group").alias("s_group"), F.col("value").alias("seen")))
    seen = (polled.join(F.broadcast(keys), (F.col("run") == F.col("s_run")) & (F.col("group") == F.col("s_group"))
                        & F.col("value").eqNullSafe(F.col("seen")))
            .select("s_run", "s_group", "seen").distinct())
    unseen = ctx.cut(_not_retained(cand.join(F.broadcast(seen), (F.col("run") == F.col("s_run"))
                                             & (F.col("group") == F.col("s_group"))
                                             & F.col("value").eqNullSafe(F.col("seen")), "left_anti"), ctx))
    if ctx.none(unseen):
        return empty_anomalies(ctx.spark)
    is_unseen = F.col("committed").isNotNull() & (F.col("committed") >= F.col("offset") + 1)
    one = anomalies(unseen.where(is_unseen), "unseen-message",
                    fmt("group %s committed %s/%s up to %s but never polled '%s' (offset %s): unseen", F.col("group"),
                        F.col("topic"), F.col("partition"), F.col("committed"), F.col("value"), F.col("offset")),
                    ops=evidence(F.col("send_done"), F.col("fetch_done")), group=F.col("group"),
                    topic=F.col("topic"), partition=F.col("partition"), reason=F.lit("unseen"),
                    offset=F.col("offset"), value=F.col("value"), committed=F.col("committed"))
    nd = (unseen.where(~is_unseen)
          .groupBy("run", "group", "topic", "partition", "committed", "fetch_done")
          .agg(F.count(F.lit(1)).alias("count"), F.min("offset").alias("low"), F.max("offset").alias("high"),
               F.array_sort(F.collect_list(F.struct("send_index", "send_done"))).alias("s")))
    first3 = F.transform(F.slice(F.col("s"), 1, 3), lambda x: x["send_done"])
    drained = anomalies(
        nd, "unseen-message",
        fmt("group %s never polled %s acknowledged messages of %s/%s (offsets %s..%s) and its final committed "
            "offset is %s: not-drained (the drain did not finish)", F.col("group"), F.col("count"), F.col("topic"),
            F.col("partition"), F.col("low"), F.col("high"), F.coalesce(F.col("committed").cast("string"),
                                                                         F.lit("none"))),
        ops=F.slice(F.array_distinct(F.concat(first3, F.array(F.col("fetch_done")))), 1, 4), group=F.col("group"),
        topic=F.col("topic"), partition=F.col("partition"), reason=F.lit("not-drained"), offset=F.col("low"),
        count=F.col("count"), committed=F.col("committed"))
    return one.unionByName(drained)


def unknown_unseen(ctx: Ctx) -> DataFrame:
    """Groups consuming a partition with ok sends that no final fetch tells about."""
    missing = final_lookup(ctx).where(F.col("fetch_index").isNull())
    per = missing.groupBy("run", "group").agg(F.array_sort(F.collect_list(F.struct(
        "topic", "partition", F.format_string("%s/%s", "topic", "partition").alias("s")))).alias("l"))
    return per.select("run", F.concat(
        fmt("unseen-message: group %s consumes ", F.col("group")),
        F.concat_ws(", ", F.transform("l", lambda x: x["s"])),
        F.lit(" but has no final fetch-committed telling its committed offset there")).alias("reason"))

