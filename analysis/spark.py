"""The pipeline's SparkSession: local by default, a cluster when given ``spark://``."""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import DataFrame, SparkSession

LOOPBACK = "127.0.0.1"


def submitted_master() -> str | None:
    """The master spark-submit was given (its ``--master``, else its default) when this Python runs under
    spark-submit, which starts the JVM first and tells PySpark its port (``PYSPARK_GATEWAY_PORT``); None
    otherwise.  Connecting to that JVM starts none."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkConf, SparkContext
    SparkContext._ensure_initialized()
    return SparkConf().get("spark.master", None)


def session(master: str | None = None, app: str = "kafkasim-analyze", input_bytes: int | None = None) -> SparkSession:
    """A SparkSession with the pipeline's settings; reuses the active one if there is one.  ``master`` None:
    spark-submit's under spark-submit, else ``local[*]``.  ``input_bytes``: the size of what it will read,
    when known before it starts (``settings``: a JVM for a small input compiles less)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        _import_short_names(active)
        return active
    if master is None:
        master = submitted_master() or "local[*]"
    if master.startswith("local"):
        # one machine: the driver and its block manager on loopback.  Spark picks its address from the
        # hostname before it reads any setting (and warns when that resolves to loopback, then binds the
        # machine's outside interface instead); SPARK_LOCAL_IP, read by the JVM PySpark starts, is the setting
        # that decides it.  On a cluster the user's own settings are kept.
        os.environ["SPARK_LOCAL_IP"] = LOOPBACK
    builder = SparkSession.builder.master(master).appName(app)
    for key, value in settings(master, input_bytes).items():
        builder = builder.config(key, value)
    event_log = os.environ.get("KAFKASIM_SPARK_EVENT_LOG")
    if event_log:   # Spark's event log of the run (every job and stage, with their times), into this directory
        builder = builder.config("spark.eventLog.enabled", "true").config("spark.eventLog.dir", event_log)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _import_short_names(spark)
    return spark


def settings(master: str, input_bytes: int | None = None) -> dict[str, str]:
    """The Spark settings the pipeline's session is made with, for ``master`` (and ``input_bytes``, the size of
    the input when known).  Each key is one Spark defines (tests/test_analysis_spark.py checks it: Spark takes
    an unknown key without a word, and ignores it)."""
    # local mode: one JVM holds the caches (10M ops' paired lines are gigabytes) and runs every task; with
    # 4g it thrashed in GC until a broadcast timed out.  Half the RAM, 4-16g, unless told
    memory = os.environ.get("KAFKASIM_SPARK_DRIVER_MEMORY") or f"{max(4, min(16, _ram_gib() // 2))}g"
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        SHUFFLE_KEY: str(default_partitions()),
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": memory,
        "spark.sql.broadcastTimeout": "1200",   # 2 busy cores: 300 s is not "never"
        # Spark's generated code has methods above HotSpot's 8000-byte JIT limit: left interpreted, the
        # checkers' stages ran about 15 % slower (bench/analysis.py)
        # and the throughput collector: a batch job on few cores gains from the least GC work per byte
        # (G1, the default, spends CPU on concurrent marking that a 2-core machine does not have); and
        # HotSpot's optimizing compiler later (``LATE_C2_OPTIONS``)
        "spark.driver.extraJavaOptions": "-XX:-DontCompileHugeMethods -XX:+UseParallelGC " + LATE_C2_OPTIONS,
        "spark.sql.execution.arrow.pyspark.enabled": "false",
        # a JSON object with a repeated key keeps the last, as Python's dict (offsets maps)
        "spark.sql.mapKeyDedupPolicy": "LAST_WIN",
        # the JSON reader would check the filters pushed into it (a history line needs an index and a type)
        # at every field of every line; Spark applies them after the scan anyway (about 3 % of the parse)
        "spark.sql.json.filterPushdown.enabled": "false",
        # cached DataFrames (the parsed event lines, the checkers' per-offset table) are kept as plain columns:
        # gathering compression statistics for each cached batch cost more CPU than the memory it saved
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        # a partitioned write (analysis.main: the paired rows split by kind) keeps one open file per value
        # in each task instead of sorting its rows by the value first: no sort planned before the write,
        # and up to 8 writers open in a task (beyond that, the task sorts the rest)
        "spark.sql.optimizer.plannedWrite.enabled": "false",
        "spark.sql.maxConcurrentOutputFileWriters": "8",
        # generated classes kept for reuse (default 100): the pipeline plans a few hundred stages, and a
        # class evicted and generated again is compiled again, by Janino and then by the JIT (about 4 %
        # less CPU at 1M operations)
        "spark.sql.codegen.cache.maxEntries": "2000",
        # groups an object aggregate (percentile_approx, collect_list) keeps in a hash map per task before
        # it sorts its whole input instead (default 128): the report's latency series has up to 600 time
        # buckets a run, and sorting 10M operations for them cost more than the buffers
        "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "1024",
    }
    if master.startswith("local"):
        # one machine: shuffle and spill files stay on its disk (and mostly in its page cache), so compressing
        # them only spends CPU; across a cluster's network the default (compressed) is kept.  The window's
        # buffer is sized by the driver's heap, which runs the tasks only here (a cluster's executors have
        # their own, 1 GiB by default: there Spark's default, 4096 rows, is kept).  Rows a window keeps in a
        # plain in-memory buffer before it moves them to a spillable sorter: the pairing window's partitions
        # are up to 2^17 lines (ops_tables.PAIR_BUCKET; whole processes, millions of lines, before it was
        # bounded); beyond the default 4096 each row was copied once more.  About 1/8 of the heap at ~512
        # bytes a row.
        # the input files are named one by one (analysis.files.scan_runs listed the run directories once);
        # Spark stats each named file, and from 32 paths up it does so in a listing job of its own (22 s for
        # 117 segment files of 6 runs on a loaded machine, one task per file): on one machine's disk the
        # driver's stats take microseconds each.  A cluster's shared storage keeps Spark's parallel listing.
        conf["spark.sql.sources.parallelPartitionDiscovery.threshold"] = str(1 << 30)
        if input_bytes is not None and input_bytes < INTERPRETED_BELOW:
            # a small input's JVM lives a minute or two, mostly planning (no generated code, ``sized_to``):
            # HotSpot's quick compiler only; its optimizing one took a quarter of the JVM's CPU on 2 cores
            conf["spark.driver.extraJavaOptions"] += " " + SMALL_JVM_OPTIONS
            # memory pages of 1 MiB (Spark's default: 64 MiB here, 1/16 of a core's share of the heap): each
            # aggregate, sort and hash join of a task takes a page on its first row, and a 30-s run's ~500
            # tasks of a few rows each allocated (and zeroed) gigabytes of them; the collector copied and
            # marked them (its pauses: 3.0 s a run, 1.5 s with 1 MiB pages; bench/RESULTS.md).  A row larger
            # than a page gets a page of its own size
            conf["spark.buffer.pageSize"] = SMALL_PAGE
        conf.update({"spark.driver.host": LOOPBACK, "spark.driver.bindAddress": LOOPBACK,
                     "spark.shuffle.compress": "false", "spark.shuffle.spill.compress": "false",
                     "spark.sql.windowExec.buffer.in.memory.threshold": str(max(4096, _bytes(memory) // 4096))})
    return conf


# The JVM classes PySpark names by their short names (``sc._jvm.functions`` for every ``pyspark.sql.functions``
# call, ``sc._jvm.PythonUtils`` for every list of columns, ...), each the class the JVM view's star imports
# resolve that name to.
SHORT_NAMES = ("org.apache.spark.sql.functions", "org.apache.spark.sql.Column", "org.apache.spark.sql.SparkSession",
               "org.apache.spark.api.python.PythonUtils", "org.apache.spark.sql.api.python.PythonSQLUtils")


def _import_short_names(spark: SparkSession) -> None:
    """Import ``SHORT_NAMES`` one by one into PySpark's JVM view.  py4j resolves a short name by trying the
    view's star imports in order, and each package without the class costs a search of every jar on Spark's
    class path: ``functions`` missed six packages before ``org.apache.spark.sql``.  A single import is
    looked up first.  Building the checkers' DataFrames at 10M operations (about 2,400 ``functions`` calls):
    7.1 s and 7.6 JVM CPU s on average instead of 9.2 s and 9.5 (bench/RESULTS.md, "2026-11-26, late
    afternoon").  Dotted paths (``sc._jvm.org.apache...``, as PySpark builds lambdas) still miss per part."""
    from py4j.java_gateway import java_import
    jvm = spark.sparkContext._jvm
    for name in SHORT_NAMES:
        java_import(jvm, name)
        # and the class kept in the view, looked up once: py4j asks the JVM for a name each time it is read
        # (``sc._jvm.functions`` in every ``pyspark.sql.functions`` call, some 5,000 in a small run), and the JVM
        # looks a short name up as a class of the default package before its imports: a search of every jar
        # on the class path that finds nothing, each time (about a tenth of the JVM's sampled Java frames of
        # a small run, bench/RESULTS.md)
        short = name.rsplit(".", 1)[1]
        if short not in vars(jvm):
            vars(jvm)[short] = getattr(jvm, short)
    _cache_packages(jvm)


class _CachedPackage:
    """A py4j ``JavaPackage`` whose sub-packages and classes are looked up in the JVM once, then kept.
    PySpark names ``sc._jvm.org.apache.spark.sql.catalyst.expressions`` afresh for every higher-order function
    and every lambda variable (``F.filter(arr, lambda e: ...)``: three times), and py4j asks the JVM for
    each part: ``org`` through each of the view's star imports, then ``org.apache``, ... each a class-path
    search that finds nothing (about 8 % of the JVM's CPU samples of a small run, bench/RESULTS.md)."""

    def __init__(self, package) -> None:
        self._package = package

    def __getattr__(self, name: str):
        from py4j.java_gateway import JavaPackage
        found = getattr(self._package, name)
        if isinstance(found, JavaPackage):
            found = _CachedPackage(found)
        if not name.startswith("_"):
            self.__dict__[name] = found
        return found


def _cache_packages(jvm) -> None:
    """Name ``org`` in PySpark's JVM view as a :class:`_CachedPackage` (once per view)."""
    if "org" not in vars(jvm):
        vars(jvm)["org"] = _CachedPackage(getattr(jvm, "org"))


# Input bytes per shuffle partition below which an analysis uses fewer shuffle partitions than the session's
# (``sized_to``): a 30-s chaos run is a few MB, and each of its ~250 stages ran 4 tasks (16 for the pairing
# window and the per-offset table) of a few rows each: scheduling them, not the rows, was the time.
BYTES_PER_PARTITION = 32 << 20
SHUFFLE_KEY = "spark.sql.shuffle.partitions"
# Below this much input an analysis evaluates its plans without generating code (``sized_to``): a 30-s run's
# ~250 stages each compiled Java source (Janino, then HotSpot's JIT) for a few thousand rows; interpreted
# they are computed from the plans as they are.  Larger inputs keep Spark's code generation.
INTERPRETED_BELOW = 64 << 20
SMALL_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
SMALL_PAGE = "1m"
# HotSpot's optimizing compiler (C2, tier 4) takes a method at 4x its default counts: in a 1M-operation
# benchmark it spent 59 s compiling (JFR; 2,362 methods; C1 took 17 s for 23,485), nearly all on Spark's own
# driver code (Janino, the optimizer, task serialization) that runs thousands of times, not millions; a
# task's per-row code still reaches it within its first rows (bench/RESULTS.md, issue 35, "large runs").
LATE_C2_OPTIONS = ("-XX:Tier4InvocationThreshold=20000 -XX:Tier4MinInvocationThreshold=2400 "
                   "-XX:Tier4CompileThreshold=60000 -XX:Tier4BackEdgeThreshold=160000")
# The optimizer's constraint propagation (the constraints of every operator, for ``InferFiltersFromConstraints``
# and ``PruneFilters``), off as well: on the failover timeline's and the checkers' plans (large expressions,
# few rows) it was a sixth of the optimizer's time and added nothing to a few thousand rows.
# ``RemoveRedundantAliases`` is left out too: a tenth of the optimizer's time there, for a handful of aliases.
# And no runtime Bloom filters on joins: on a 30-s run Spark's optimizer put 12 into two of the checkers' plans
# (their inputs are a few thousand rows; Spark sized its filters from its estimates), each computed by a
# subquery of its own and shipped, megabytes, in every task of the plan: task binaries of 16-49 MiB, each
# deserialized by every task (bench/RESULTS.md).  At 10M operations Spark put none into any plan.
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN",
               "spark.sql.constraintPropagation.enabled": "false",
               "spark.sql.optimizer.runtime.bloomFilter.enabled": "false",
               "spark.sql.optimizer.excludedRules": "org.apache.spark.sql.catalyst.optimizer.RemoveRedundantAliases"}


def default_partitions() -> int:
    """The session's shuffle partitions (``settings``): twice the cores, at least 2."""
    return max(2, 2 * (os.cpu_count() or 2))


@contextmanager
def sized_to(spark: SparkSession, input_bytes: int) -> Iterator[int]:
    """While the block runs, shuffle partitions sized to the input: one per ``BYTES_PER_PARTITION`` of it,
    at most the session's setting (restored after); yields the count.  ``spread`` scales the pipeline's own
    explicit partition counts alike."""
    before = {k: spark.conf.get(k, None) for k in (SHUFFLE_KEY, *INTERPRETED)}
    n = max(1, min(int(before[SHUFFLE_KEY] or default_partitions()), -(-int(input_bytes) // BYTES_PER_PARTITION)))
    spark.conf.set(SHUFFLE_KEY, str(n))
    if input_bytes < INTERPRETED_BELOW:
        for k, v in INTERPRETED.items():
            spark.conf.set(k, v)
    try:
        yield n
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def spread(spark: SparkSession, wanted: int) -> int:
    """Partitions for a shuffle the pipeline sizes itself (``wanted``, for a large input): the shuffle
    partitions in force when ``sized_to`` lowered them for a small input, else ``wanted``."""
    n = int(spark.conf.get(SHUFFLE_KEY, str(default_partitions())))
    return n if n < default_partitions() else wanted


def small_input(spark: SparkSession) -> bool:
    """Whether ``sized_to`` has set the session up for a small input (its plans interpreted, not compiled)."""
    return all(spark.conf.get(k, None) == v for k, v in INTERPRETED.items())


def gathered(df: DataFrame) -> DataFrame:
    """``df``'s last stage in one task for a small input (``small_input``), else ``df``.  A union of small scans
    or aggregates is otherwise a task per part, and each task deserializes the whole union's plan before its
    first row: the 30-s run's checkers ran 19 tasks of about 60 ms of that each, their counts 17."""
    return df.coalesce(1) if small_input(df.sparkSession) else df


def union_by_name(frames: list[DataFrame]) -> DataFrame:
    """``reduce(DataFrame.unionByName, frames)`` built as one DataFrame: one n-ary ``Union`` by name over the
    frames' analysed plans, analysed once by the JVM.  The chain builds a DataFrame per part, and the JVM analyses
    each with the whole union so far (the checkers' union holds their ten plans; ``DeduplicateRelations`` walks all
    of it every time).  The plan node is Spark's own (``Dataset.unionByName`` builds it, two children at a time,
    and the analyzer resolves its columns by name pairwise from the first child, as the chain did)."""
    if len(frames) == 1:
        return frames[0]
    spark = frames[0].sparkSession
    jvm = spark._jvm
    plans = jvm.java.util.ArrayList()
    for df in frames:
        plans.add(df._jdf.queryExecution().analyzed())
    children = jvm.scala.collection.JavaConverters.asScalaBuffer(plans).toList()
    union = jvm.org.apache.spark.sql.catalyst.plans.logical.Union(children, True, False)
    return DataFrame(jvm.org.apache.spark.sql.Dataset.ofRows(spark._jsparkSession, union), spark)


def collect_many(frames: dict[str, DataFrame]) -> dict[str, list[dict]]:
    """Collect several small frames in one Spark job: every row as JSON, tagged with its frame's name."""
    from pyspark.sql import functions as F
    out: dict[str, list[dict]] = {name: [] for name in frames}
    parts = [df.select(F.lit(name).alias("_k"), F.to_json(F.struct(*df.columns), {"ignoreNullFields": "false"})
                       .alias("_j")) for name, df in frames.items()]
    if parts:
        for r in gathered(union_by_name(parts)).collect():
            out[r["_k"]].append(json.loads(r["_j"]))
    return out


def kept(df: DataFrame, otherwise: Callable[[DataFrame], DataFrame] | None = None, *,
         many: bool = False) -> DataFrame:
    """``df`` computed once and kept for the steps that read it again (``release`` frees it).  For a small
    input (``small_input``): its rows computed now and held as a local relation (``local``), a leaf, so each
    plan built on it is analysed, optimized and shipped to its tasks without ``df``'s lineage.  A small run's
    driver spent most of its time on that lineage, analysed again for every ``select`` or ``withColumn`` built
    on it (the analyzer's ``DeduplicateRelations`` walks the whole plan each time; bench/RESULTS.md).  With
    ``many`` (thousands of rows, which every plan over a local relation would carry: the parsed event lines,
    the segments' records), an eager local checkpoint of one partition in local mode instead, as before.
    Else (a large input, or ``many`` on a cluster) ``otherwise(df)``, by default persisted (memory and disk,
    Spark's columnar cache: its scans read only the columns they need)."""
    from pyspark import StorageLevel
    spark = df.sparkSession
    if local_leaves(spark) and not many:
        return local(df)
    if local_leaves(spark) and spark.sparkContext.master.startswith("local"):
        return _checkpointed(df)
    return otherwise(df) if otherwise is not None else df.persist(StorageLevel.MEMORY_AND_DISK)


def _checkpointed(df: DataFrame) -> DataFrame:
    """An eager local checkpoint of ``df`` in one partition (each stage that reads it, one task), its RDD noted
    for ``release``."""
    out = df.coalesce(1).localCheckpoint(eager=True)
    out._kafkasim_rdd = out._jdf.queryExecution().analyzed().rdd()
    return out


def local_leaves(spark: SparkSession) -> bool:
    """Whether the frames the analysis keeps are held as local relations (``local``): a small input
    (``small_input``), on one machine or a cluster (the rows are the driver's: no executor's loss loses them)."""
    return small_input(spark)


# rows a local relation holds at most (``local``); a 30-s run's largest kept frame, its event lines, has 4,495
LOCAL_ROWS = 20_000


def local(df: DataFrame) -> DataFrame:
    """``df``'s rows computed now (one job) and held in the driver's JVM as a local relation (Spark's
    ``LocalRelation``, as ``createDataFrame`` of a list makes), the leaf of every plan built on it.  Unlike a
    local checkpoint or a cache (blocks that each plan reads in a job of its own), the optimizer sees the rows:
    a filter or a projection of them is computed while a plan is optimized, and an empty one empties the joins,
    aggregates and unions above it (``PropagateEmptyRelation``), so a checker whose candidates are none plans
    and runs nothing more (bench/RESULTS.md, issue 49, ``an49g``).  Every plan carries the rows, so beyond
    ``LOCAL_ROWS`` they are kept as before (a local checkpoint of one partition in local mode, else persisted),
    from the rows collected: ``df`` is computed once either way.  ``release`` frees it."""
    from pyspark import StorageLevel
    spark = df.sparkSession
    rows = df._jdf.toDF().collectAsList()   # as rows (``spark.range``'s are longs); the same query execution
    out = DataFrame(spark._jsparkSession.createDataFrame(rows, df._jdf.schema()), spark)
    if rows.size() <= LOCAL_ROWS:
        out = out.coalesce(1)   # one task for each stage that reads it (Spark's split: one per core)
        out._kafkasim_local = True
        out._kafkasim_rows = int(rows.size())
        return out
    if not spark.sparkContext.master.startswith("local"):
        return out.persist(StorageLevel.MEMORY_AND_DISK)
    return _checkpointed(out)


def known_empty(df: DataFrame, fold: bool = False) -> bool:
    """Whether ``df`` is a local relation (``local``) known to hold no rows: then every inner join, filter,
    aggregate by key and union of nothing but it is empty too, and a checker whose candidates it holds can
    stop there (``checks_base.Ctx.none``) instead of building the frames that would find nothing.  With
    ``fold``, also a frame whose optimized plan is an empty local relation (a projection or filter of a local
    relation, which the optimizer computes; no job): for a small input only (``local_leaves``), the only one
    whose kept frames are local relations."""
    if getattr(df, "_kafkasim_rows", None) == 0:
        return True
    if not fold or not local_leaves(df.sparkSession):
        return False
    plan = df._jdf.queryExecution().optimizedPlan()
    while plan.getClass().getSimpleName() == "Repartition":   # the coalesce(1) above a local relation
        plan = plan.child()
    return plan.getClass().getSimpleName() == "LocalRelation" and plan.data().isEmpty()


def release(df: DataFrame | None) -> None:
    """Free what ``kept`` kept (nothing for None)."""
    if df is None or getattr(df, "_kafkasim_local", False):
        return
    rdd = getattr(df, "_kafkasim_rdd", None)
    if rdd is not None:
        rdd.unpersist(False)
    else:
        df.unpersist()


@contextmanager
def adaptive_off(spark: SparkSession) -> Iterator[None]:
    """Adaptive query execution off while the block runs; the session's setting is restored after."""
    aqe = spark.conf.get("spark.sql.adaptive.enabled", "true")
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        yield
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", aqe)


def _ram_gib() -> int:
    """Physical memory in GiB (0 when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 30)
    except (ValueError, OSError):
        return 0


def _bytes(size: str) -> int:
    """A JVM memory size (``4g``, ``512m``, ``1024k`` or bytes) in bytes."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    s = size.strip().lower().rstrip("b")
    return int(float(s[:-1]) * units[s[-1]]) if s and s[-1] in units else int(s)


class Background:
    """``fn()`` in another driver thread (PySpark's ``InheritableThread``: it gets this thread's job
    properties, and its JVM thread is released when it ends); ``result()`` waits for it (from any thread)."""

    def __init__(self, fn, name: str) -> None:
        from pyspark import InheritableThread
        self._out: dict[str, Any] = {}

        def target() -> None:
            from pyspark import SparkContext
            SparkContext.getOrCreate().setJobDescription(name)   # its jobs, named in Spark's event log
            try:
                self._out["value"] = fn()
            except BaseException as e:  # handed to the caller by result()
                self._out["error"] = e

        self._thread = InheritableThread(target=target, name=f"kafkasim-{name}", daemon=True)
        self._thread.start()

    def result(self) -> Any:
        self._thread.join()
        if "error" in self._out:
            raise self._out["error"]
        return self._out["value"]

    def wait(self) -> Any:
        """Wait for it; its value, or None when it failed (the caller is already failing)."""
        self._thread.join()
        return self._out.get("value")
