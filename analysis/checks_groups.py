"""Checkers of consumer groups in Spark: committed offsets, generations, and who coordinated.

Same rules as ``judge/checks_groups.py`` (docs/chaos.md, "Checkers"), from
the ``ops`` and ``group_offsets`` tables and, for ``split-coordinator``, the
event lines ``broker_starting``, ``topic_created`` (of ``__consumer_offsets``),
``coordinator_load_started``, ``coordinator_loaded``, ``coordinator_unloaded``
and ``became_leader`` (of ``__consumer_offsets``).  "Before" between history
lines compares their ``index``; each such rule is one window over the union of
the facts and the queries, ordered by index or time (``checks_base.asof``).
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis.checks_base import (
    OFFSETS_TOPIC,
    UNBOUNDED,
    Ctx,
    anomalies,
    asof,
    asof_lookup,
    asof_steps,
    empty_anomalies,
    event_evidence,
    event_key,
    evidence,
    fmt,
    lookup_offset,
    offset_entries,
    partition_for,
)
from analysis.local_rows import local_rows
from analysis.ops_tables import tp_partition, tp_topic
from analysis.spark import union_by_name

KEY = ["run", "group", "topic", "partition"]
BIG = 2 ** 62   # the completion index of an open operation (it never completes)


def _commits(ctx: Ctx, *types: str) -> DataFrame:
    """(run, group, topic, partition) -> commit offsets (>= 0) of the given outcomes (``_commits``); the ok ones are
    read by four rules, so they are taken from ``group_offsets`` once (persisted)."""
    if types == ("ok",):
        return ctx.memo("ok_commits", lambda: _commits_of(ctx, "ok"))
    return _commits_of(ctx, *types)


def _commits_of(ctx: Ctx, *types: str) -> DataFrame:
    return (ctx.group_offsets.where((F.col("f") == "commit") & F.col("type").isin(*types) & F.col("group").isNotNull()
                                    & (F.col("offset") >= 0))
            .select(*KEY, F.col("op_index").alias("c_inv"), F.coalesce(F.col("complete_index"), F.lit(BIG))
                    .alias("c_done"), F.col("offset").alias("c_o"), "generation", "type"))


def fetches(ctx: Ctx) -> DataFrame:
    """Ok fetch-committed operations with a group: (run, group, op_index, complete_index, final, asked,
    entries): the invoke's ``partitions`` list parsed (null without one) and the answer's offsets
    (``checks_base.offset_entries``)."""
    def build() -> DataFrame:
        f = ctx.extras.where((F.col("f") == "fetch-committed") & (F.col("type") == "ok") & F.col("group").isNotNull())
        asked = F.col("fetch_partitions")
        asked = F.array_distinct(F.filter(F.transform(asked, lambda k: F.struct(
            tp_topic(k).alias("t"), tp_partition(k).alias("p"))), lambda x: x["t"].isNotNull()))
        return f.select("run", "group", F.col("index").alias("op_index"), "complete_index", "final",
                        asked.alias("asked"), offset_entries(F.col("offsets")).alias("entries"))
    return ctx.memo("fetches", build)


def fetch_told(ctx: Ctx) -> DataFrame:
    """``fetched_partitions`` of every ok fetch-committed with a group, one row per partition: (run, group,
    op_index, complete_index, final, topic, partition, got, extra).  The invoke's ``partitions`` list if it
    has one; else the partitions answered, plus (``extra``), on a ``final`` fetch, every partition the
    group has ok commits of (``known``)."""
    def build() -> DataFrame:
        fs = fetches(ctx)
        tps = F.when(F.col("asked").isNotNull(), F.col("asked")).otherwise(
            F.array_distinct(F.transform("entries", lambda e: F.struct(e["t"].alias("t"), e["p"].alias("p")))))
        told = fs.select("run", "group", "op_index", "complete_index", "final", "entries", F.explode(tps).alias("tp"))
        told = told.select("run", "group", "op_index", "complete_index", "final", F.col("tp.t").alias("topic"),
                           F.col("tp.p").alias("partition"),
                           lookup_offset(F.col("entries"), F.col("tp.t"), F.col("tp.p")).alias("got"),
                           F.lit(False).alias("extra"))
        known = F.broadcast(known_partitions(ctx))
        extra = (fs.where(F.col("asked").isNull() & F.col("final")).join(known, ["run", "group"])
                 .where(~F.exists("entries", lambda e: (e["t"] == F.col("topic")) & (e["p"] == F.col("partition"))))
                 .select("run", "group", "op_index", "complete_index", "final", "topic", "partition",
                         F.lit(None).cast("long").alias("got"), F.lit(True).alias("extra")))
        return told.unionByName(extra)
    return ctx.memo("fetch_told", build)


# ---------------------------------------------------------------------- commit-went-backwards

def check_commit_order(ctx: Ctx) -> DataFrame:
    """``commit-went-backwards``: an ok commit below the best ok commit of its group and partition that
    completed before it was invoked; a generation -1 commit is not judged and is a new baseline (the
    commits invoked before it completed no longer count)."""
    c = _commits(ctx, "ok").withColumn("admin", F.coalesce(F.col("generation") == -1, F.lit(False)))
    done_rows = c.select(*KEY, F.col("c_done").alias("idx"), "c_o", "admin", "c_inv", F.lit(True).alias("is_done"),
                         F.lit(None).cast("long").alias("q_done"))
    queries = c.where(~F.col("admin")).select(*KEY, F.col("c_inv").alias("idx"), "c_o", "admin", "c_inv",
                                               F.lit(False).alias("is_done"), F.col("c_done").alias("q_done"))
    rows = done_rows.unionByName(queries)
    w1 = Window.partitionBy(*KEY).orderBy("idx").rowsBetween(UNBOUNDED, Window.currentRow)
    reset = F.col("is_done") & F.col("admin")
    rows = rows.select("*", F.sum(F.when(reset, 1).otherwise(0)).over(w1).alias("seg"),
                       F.max(F.when(reset, F.struct(F.col("idx").alias("i"), F.col("c_o").alias("o")))).over(w1)
                       .alias("R"))
    w2 = Window.partitionBy(*KEY, "seg").orderBy("idx").rowsBetween(UNBOUNDED, Window.currentRow)
    eligible = F.col("is_done") & ~F.col("admin") & (F.col("R").isNull() | (F.col("c_inv") > F.col("R.i")))
    rows = rows.select("*", F.max(F.when(eligible, F.struct(F.col("c_o").alias("o"), (-F.col("idx")).alias("n"))))
                       .over(w2).alias("D"))
    q = rows.where(~F.col("is_done"))
    use_r = F.col("R").isNotNull() & (F.col("D").isNull() | (F.col("R.o") >= F.col("D.o")))
    q = q.select("*", F.when(use_r, F.col("R.o")).otherwise(F.col("D.o")).alias("prev_o"),
                 F.when(use_r, F.col("R.i")).otherwise(-F.col("D.n")).alias("prev_done"))
    bad = q.where(F.col("prev_o").isNotNull() & (F.col("c_o") < F.col("prev_o")))
    return anomalies(
        bad, "commit-went-backwards",
        fmt("group %s committed %s/%s = %s (index %s) after a commit of %s had completed (index %s)", F.col("group"),
            F.col("topic"), F.col("partition"), F.col("c_o"), F.col("q_done"), F.col("prev_o"), F.col("prev_done")),
        ops=evidence(F.col("prev_done"), F.col("c_inv"), F.col("q_done")), group=F.col("group"), topic=F.col("topic"),
        partition=F.col("partition"), offset=F.col("c_o"), previous=F.col("prev_o"))


# ---------------------------------------------------------------------- lost-commit

def known_partitions(ctx: Ctx) -> DataFrame:
    """(run, group, topic, partition) with ok commits (offset >= 0): what a final fetch tells about."""
    return ctx.memo("known", lambda: _commits(ctx, "ok").select(*KEY).distinct())


def check_lost_commits(ctx: Ctx) -> DataFrame:
    """``lost-commit``: an ok fetch-committed, invoked after an ok commit C completed, returning less than
    C's offset (or nothing) for C's partition, unless a lower commit not failed could have landed after C.

    Per (fetch, partition): the running max of the ok commits completed before the fetch was invoked
    (one window); only the suspicious ones (below it) are joined with the commits.  For a candidate C,
    "overwritten" is ``min(invoke of D: D lower, not failed, completing after C was invoked) < the
    fetch's completion``.  The one reported is the first not overwritten in (offset desc, completion)
    order, as the Python loop."""
    ok = _commits(ctx, "ok")
    told = fetch_told(ctx).join(F.broadcast(known_partitions(ctx)), KEY)   # only partitions with ok commits matter
    q = told.select(*KEY, F.col("op_index").alias("f_inv"), F.col("complete_index").alias("f_done"), "got")
    run = asof(q, ok.select(*KEY, "c_done", F.col("c_o").alias("o")), KEY, "f_inv", "c_done",
               {"runmax": F.max("o")}, strict=True)
    sus = run.where(F.col("runmax").isNotNull() & (F.col("got").isNull() | (F.col("got") < F.col("runmax"))))
    sus = ctx.cut(sus)
    if ctx.none(sus):   # no fetch read less than a completed commit: nothing below can find one
        return empty_anomalies(ctx.spark)
    cand = (F.broadcast(sus).join(ok.select(*KEY, "c_inv", "c_done", "c_o"), KEY)
            .where((F.col("c_done") < F.col("f_inv")) & (F.col("got").isNull() | (F.col("c_o") > F.col("got")))))
    nf = _commits(ctx, "ok", "info", "open").select(*KEY, F.col("c_inv").alias("d_inv"),
                                                     F.col("c_done").alias("d_done"), F.col("c_o").alias("d_o"))
    cand = ctx.cut(cand)
    if ctx.none(cand):
        return empty_anomalies(ctx.spark)
    cs = cand.select(*KEY, "c_inv", "c_done", "c_o").distinct()
    e = (F.broadcast(cs).join(nf, KEY).where((F.col("d_o") < F.col("c_o")) & (F.col("d_done") > F.col("c_inv")))
         .groupBy(*KEY, "c_inv", "c_done", "c_o").agg(F.min("d_inv").alias("e")))
    cand = cand.join(e, [*KEY, "c_inv", "c_done", "c_o"], "left")
    real = cand.where(F.col("e").isNull() | (F.col("e") >= F.col("f_done")))
    first = (real.groupBy(*KEY, "f_inv", "f_done", "got")
             .agg(F.min(F.struct((-F.col("c_o")).alias("no"), F.col("c_done").alias("d"))).alias("c")))
    got_s = F.when(F.col("got").isNull(), F.lit("no offset")).otherwise(F.col("got").cast("string"))
    return anomalies(
        first, "lost-commit",
        fmt("group %s: fetch-committed (index %s) returned %s for %s/%s after a commit of %s had completed (index %s)",
            F.col("group"), F.col("f_done"), got_s, F.col("topic"), F.col("partition"), -F.col("c.no"), F.col("c.d")),
        ops=evidence(F.col("c.d"), F.col("f_inv"), F.col("f_done")), group=F.col("group"), topic=F.col("topic"),
        partition=F.col("partition"), offset=-F.col("c.no"), fetched=F.col("got"))


def unknown_lost_commits(ctx: Ctx) -> DataFrame:
    """Groups whose last ok commit of a partition no fetch-committed invoked after it read back."""
    last = _commits(ctx, "ok").groupBy(*KEY).agg(F.max("c_done").alias("last"))
    told = fetch_told(ctx).groupBy(*KEY).agg(F.max("op_index").alias("read_back"))
    unread = last.join(told, KEY, "left").where(F.col("read_back").isNull() | (F.col("read_back") < F.col("last")))
    per = unread.groupBy("run", "group").agg(F.array_sort(F.collect_list(F.struct(
        "topic", "partition", F.format_string("%s/%s", "topic", "partition").alias("s")))).alias("l"))
    return per.select("run", F.concat(
        fmt("lost-commit: group %s had acknowledged commits but no final fetch-committed: nothing read ",
            F.col("group")), F.concat_ws(", ", F.transform("l", lambda x: x["s"])),
        F.lit(" back after the last commit")).alias("reason"))


# ---------------------------------------------------------------------- fenced-generation-commit

def ok_group_ops(ctx: Ctx) -> DataFrame:
    """The ok commits and syncs of a group, with the columns ``fenced-generation-commit`` and
    ``split-coordinator`` read: taken from ``ops`` once (persisted; a seventh of its rows in the synthetic runs)
    instead of a scan of every operation for each of their five uses."""
    return ctx.memo("ok_group_ops", lambda: ctx.ops.where(
        (F.col("type") == "ok") & F.col("group").isNotNull() & F.col("f").isin("commit", "sync")).select(
        "run", "group", "f", "generation", "index", "complete_index", "node", "invoke_ns", "complete_ns"))


def check_fenced_generations(ctx: Ctx) -> DataFrame:
    """``fenced-generation-commit``: an ok commit of generation g >= 0 invoked after an ok sync of its
    group with a generation above g had completed."""
    ok = ok_group_ops(ctx)
    syncs = (ok.where((F.col("f") == "sync") & F.col("generation").isNotNull())
             .select("run", "group", F.col("complete_index").alias("s_done"), F.col("generation").alias("g")))
    commits = (ok.where((F.col("f") == "commit") & (F.col("generation") >= 0))
               .select("run", "group", F.col("index").alias("c_inv"), F.col("complete_index").alias("c_done"),
                       F.col("generation").alias("gen")))
    # the syncs are few: looked up by broadcast joins (``asof``'s window would sort every commit)
    steps = asof_steps(syncs.select("run", "group", F.col("s_done").alias("_t"), F.lit(1).alias("_k"), "g"),
                       ["run", "group"], {"maxg": F.col("g")})
    judged = asof_lookup(commits, steps, ["run", "group"], "c_inv", 0, ["maxg"])
    bad = judged.where(F.col("maxg") > F.col("gen"))
    s = (bad.join(syncs, ["run", "group"]).where((F.col("g") > F.col("gen")) & (F.col("s_done") < F.col("c_inv")))
         .groupBy("run", "group", "c_inv", "c_done", "gen")
         .agg(F.min(F.struct("s_done", "g")).alias("s")))
    return anomalies(
        s, "fenced-generation-commit",
        fmt("group %s: a commit of generation %s (index %s) was acknowledged though generation %s had synced "
            "(index %s) before it was invoked", F.col("group"), F.col("gen"), F.col("c_done"), F.col("s.g"),
            F.col("s.s_done")),
        ops=evidence(F.col("s.s_done"), F.col("c_inv"), F.col("c_done")), group=F.col("group"),
        generation=F.col("gen"), synced=F.col("s.g"))


# ---------------------------------------------------------------------- split-coordinator

def offsets_partition_counts(ctx: Ctx) -> DataFrame:
    """(run, n): the ``__consumer_offsets`` partition count (the first ``topic_created`` for it, or the
    ``offsets_partitions`` option)."""
    if ctx.offsets_partitions is not None:
        return local_rows(ctx.spark, [(r, ctx.offsets_partitions) for r in ctx.runs], "run string, n int")
    tc = ctx.ev("topic_created").where((F.col("topic") == OFFSETS_TOPIC) & F.col("partitions").isNotNull())
    return tc.groupBy("run").agg(F.min_by("partitions", F.struct("mono_ns", F.col("broker").cast("string"), "seq"))
                                 .alias("n"))


def _commits_with_node(ctx: Ctx) -> DataFrame:
    return (ok_group_ops(ctx).where((F.col("f") == "commit") & F.col("node").isNotNull())
            .select("run", "group", F.col("node").alias("b"), F.col("index").alias("c_inv"),
                    F.col("complete_index").alias("c_done"), F.col("invoke_ns").alias("t_inv"),
                    F.col("complete_ns").alias("t_done")))


def _held(ctx: Ctx) -> DataFrame:
    """(run, b, p, h_ns, h_epoch, h_type, h_reload): loads of offsets partition p by broker b, and the
    ``became_leader`` lines of p in a process of b that had loaded p before (an epoch bump)."""
    loads = ctx.ev("coordinator_load_started", "coordinator_loaded").where(
        F.col("partition").isNotNull() & F.col("leader_epoch").isNotNull())
    bl = ctx.ev("became_leader").where((F.col("topic") == OFFSETS_TOPIC) & F.col("partition").isNotNull()
                                       & F.col("leader_epoch").isNotNull())
    both = loads.unionByName(bl)
    w = (Window.partitionBy("run", "broker", "proc", "partition").orderBy("mono_ns", "seq")
         .rowsBetween(UNBOUNDED, Window.currentRow))
    is_load = F.col("type") != "became_leader"
    both = both.select("*", F.sum(F.when(is_load, 1).otherwise(0)).over(w).alias("_loads"))
    return (both.where(is_load | (F.col("_loads") > 0))
            .select("run", F.col("broker").alias("b"), F.col("partition").alias("p"), F.col("mono_ns").alias("h_ns"),
                    F.col("leader_epoch").alias("h_epoch"), F.col("type").alias("h_type"),
                    is_load.alias("h_reload")))


def _loaded(ctx: Ctx) -> DataFrame:
    loaded = ctx.ev("coordinator_loaded").where(F.col("partition").isNotNull() & F.col("leader_epoch").isNotNull())
    return loaded.select("run", F.col("partition").alias("p"), F.col("broker").alias("l_b"),
                         F.col("mono_ns").alias("l_ns"), F.col("leader_epoch").alias("l_epoch"), "seq")


def _coordinator_asof(ctx: Ctx, c: DataFrame) -> DataFrame:
    """Each commit (run, b, p, t_inv, t_done, ...) with what its rules need, as of its invoke and its
    completion, from the coordinator events of (run, b, p) (replicated to the (b, p) pairs of the commits:
    they are few), looked up by broadcast joins (``checks_base.asof_lookup``: the commits are not shuffled):

    * at the invoke: ``proc_ns`` (B's last ``broker_starting`` at or before it), ``m_all`` (the highest
      epoch of a ``coordinator_loaded`` of p by anyone before it: any above B's own epoch is another
      broker's, since B's loads before the invoke are in ``top``), ``unload_ns`` (B's last unload of p
      before it);
    * at the completion: ``held_ns``, ``top`` (B's highest (epoch, ns) holding p before it) and
      ``reload_ns`` (B's last load of p before it)."""
    keys = F.broadcast(c.select("run", "b", "p").distinct())
    e = ctx.events
    none = F.lit(None)
    starts = (e.where(F.col("type") == "broker_starting").select("run", F.col("broker").alias("b"), "mono_ns")
              .join(keys, ["run", "b"]).select("run", "b", "p", "mono_ns", F.lit(0).alias("_k"), F.lit("s").alias("x"),
                                                none.cast("int").alias("epoch"), none.cast("string").alias("h_type")))
    loaded = (_loaded(ctx).join(keys, ["run", "p"])
              .select("run", "b", "p", F.col("l_ns").alias("mono_ns"), F.lit(2).alias("_k"), F.lit("l").alias("x"),
                      F.col("l_epoch").alias("epoch"), none.cast("string").alias("h_type")))
    unloads = (e.where((F.col("type") == "coordinator_unloaded") & F.col("partition").isNotNull())
               .select("run", F.col("broker").alias("b"), F.col("partition").alias("p"), "mono_ns")
               .join(keys, ["run", "b", "p"])
               .select("run", "b", "p", "mono_ns", F.lit(2).alias("_k"), F.lit("u").alias("x"),
                       none.cast("int").alias("epoch"), none.cast("string").alias("h_type")))
    held = (_held(ctx).join(keys, ["run", "b", "p"])
            .select("run", "b", "p", F.col("h_ns").alias("mono_ns"), F.lit(2).alias("_k"),
                    F.when(F.col("h_reload"), "r").otherwise("h").alias("x"), F.col("h_epoch").alias("epoch"),
                    "h_type"))
    facts = union_by_name([starts, loaded, unloads, held]).withColumn("_t", F.col("mono_ns"))
    x = F.col("x")
    steps = ctx.cut(asof_steps(facts, ["run", "b", "p"], {
        "proc_ns": F.when(x == "s", F.col("mono_ns")), "m_all": F.when(x == "l", F.col("epoch")),
        "unload_ns": F.when(x == "u", F.col("mono_ns")), "held_ns": F.when(x.isin("h", "r"), F.col("mono_ns")),
        "top": F.when(x.isin("h", "r"), F.struct(F.col("epoch").alias("h_epoch"), F.col("mono_ns").alias("h_ns"),
                                                  "h_type")),
        "reload_ns": F.when(x == "r", F.col("mono_ns"))}))
    # a query ranks between the facts of its time: after a broker_starting (0), before the others (2)
    at_inv = asof_lookup(c, steps, ["run", "b", "p"], "t_inv", 1, ["proc_ns", "m_all", "unload_ns"])
    return asof_lookup(at_inv, steps, ["run", "b", "p"], "t_done", 1, ["held_ns", "top", "reload_ns"])


def check_split_coordinator(ctx: Ctx) -> DataFrame:
    """``split-coordinator``: an ok commit answered by broker B (its ``node``) that was not the group's
    coordinator: ``deposed``, ``no-load`` or ``unloaded`` (docs/chaos.md); see ``_coordinator_asof``."""
    c = _commits_with_node(ctx)
    if ctx.none(c, fold=True):   # no ok commit names its broker (a filter of a kept frame: no job to know it)
        return empty_anomalies(ctx.spark)
    # the hash is a per-character loop in SQL: computed once per (run, group), not once per commit
    groups = c.select("run", "group").distinct().join(F.broadcast(offsets_partition_counts(ctx)), "run")
    groups = groups.select("run", "group", partition_for(F.col("group"), F.col("n")).alias("p"))
    groups = ctx.cut(groups)
    if ctx.none(groups):   # no commit named its broker: every row below would join with none
        return empty_anomalies(ctx.spark)
    c = c.join(F.broadcast(groups), ["run", "group"])
    c = _coordinator_asof(ctx, c)
    no_load = F.col("held_ns").isNull() | (F.col("proc_ns").isNotNull() & (F.col("held_ns") < F.col("proc_ns")))
    deposed = ~no_load & (F.col("m_all") > F.col("top.h_epoch"))
    unloaded = (~no_load & ~deposed.eqNullSafe(True) & F.col("unload_ns").isNotNull()
                & (F.col("reload_ns").isNull() | (F.col("reload_ns") <= F.col("unload_ns"))))
    c = c.select("*", F.when(no_load, "no-load").when(deposed, "deposed").when(unloaded, "unloaded").alias("reason"))
    bad = ctx.cut(c.where(F.col("reason").isNotNull()))   # few: the three kinds below read it
    if ctx.none(bad):
        return empty_anomalies(ctx.spark)
    ops = evidence(F.col("c_inv"), F.col("c_done"))

    nl = bad.where(F.col("reason") == "no-load")
    no_load_rows = anomalies(
        nl, "split-coordinator",
        fmt("group %s: broker %s acknowledged a commit (index %s) without having loaded offsets partition %s",
            F.col("group"), F.col("b"), F.col("c_done"), F.col("p")), ops=ops,
        events=event_evidence(F.when(F.col("proc_ns").isNotNull(), event_key(F.col("b"), F.col("proc_ns"),
                                                                               F.lit("broker_starting")))),
        group=F.col("group"), reason=F.col("reason"), broker=F.col("b"), partition=F.col("p"))

    dp = bad.where(F.col("reason") == "deposed")
    dp = (dp.join(F.broadcast(_loaded(ctx)), ["run", "p"])
          .where((F.col("l_ns") < F.col("t_inv")) & (F.col("l_b") != F.col("b"))
                 & (F.col("l_epoch") > F.col("top.h_epoch")))
          .groupBy(*[x for x in dp.columns if x != "top"], F.col("top.h_epoch").alias("epoch_b"),
                   F.col("top.h_ns").alias("ns_b"), F.col("top.h_type").alias("type_b"))
          .agg(F.min_by(F.struct("l_b", "l_epoch", "l_ns"), F.struct("l_ns", F.col("l_b").cast("string"), "seq"))
               .alias("dep")))
    deposed_rows = anomalies(
        dp, "split-coordinator",
        fmt("group %s: broker %s (offsets partition %s, leader epoch %s) acknowledged a commit (index %s) invoked "
            "after broker %s had loaded it at leader epoch %s", F.col("group"), F.col("b"), F.col("p"),
            F.col("epoch_b"), F.col("c_done"), F.col("dep.l_b"), F.col("dep.l_epoch")), ops=ops,
        events=event_evidence(event_key(F.col("dep.l_b"), F.col("dep.l_ns"), F.lit("coordinator_loaded")),
                              event_key(F.col("b"), F.col("ns_b"), F.col("type_b"))),
        group=F.col("group"), reason=F.col("reason"), epoch=F.col("epoch_b"), deposer=F.col("dep.l_b"),
        deposer_epoch=F.col("dep.l_epoch"), broker=F.col("b"), partition=F.col("p"))

    ul = bad.where(F.col("reason") == "unloaded")
    unloaded_rows = anomalies(
        ul, "split-coordinator",
        fmt("group %s: broker %s acknowledged a commit (index %s) invoked after it had unloaded offsets partition %s, "
            "without loading it again", F.col("group"), F.col("b"), F.col("c_done"), F.col("p")), ops=ops,
        events=event_evidence(event_key(F.col("b"), F.col("unload_ns"), F.lit("coordinator_unloaded"))),
        group=F.col("group"), reason=F.col("reason"), broker=F.col("b"), partition=F.col("p"))
    return union_by_name([no_load_rows, deposed_rows, unloaded_rows])


def unknown_split_coordinator(ctx: Ctx) -> DataFrame:
    """Runs with ok commits that name their broker, but no events or no offsets-topic partition count."""
    runs = _commits_with_node(ctx).select("run").distinct()
    has_events = ctx.runs_with_events().withColumn("ev", F.lit(True))
    n = offsets_partition_counts(ctx)
    r = runs.join(has_events, "run", "left").join(n, "run", "left")
    why = (F.when(F.col("ev").isNull(), F.lit("split-coordinator: no broker events"))
           .when(F.col("n").isNull(), F.lit("split-coordinator: the number of __consumer_offsets partitions is "
                                            "unknown (no topic_created event; pass offsets_partitions)")))
    return r.select("run", why.alias("reason")).where(F.col("reason").isNotNull())
