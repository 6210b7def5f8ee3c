"""analysis.spark: every setting is one Spark knows, and the session's py4j imports leave every PySpark call
resolving to the class it did."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from py4j.java_gateway import java_import

from analysis.spark import (INTERPRETED, LATE_C2_OPTIONS, SHORT_NAMES, SHUFFLE_KEY, SMALL_JVM_OPTIONS, gathered, kept,
                            known_empty, release, settings, sized_to, spread)

ROOT = Path(__file__).resolve().parent.parent

# pyspark.java_gateway.launch_gateway's imports into PySpark's JVM view (PySpark 3.5), in its order
PYSPARK_IMPORTS = ("org.apache.spark.SparkConf", "org.apache.spark.api.java.*", "org.apache.spark.api.python.*",
                   "org.apache.spark.ml.python.*", "org.apache.spark.mllib.api.python.*", "org.apache.spark.resource.*",
                   "org.apache.spark.sql.*", "org.apache.spark.sql.api.python.*", "org.apache.spark.sql.hive.*",
                   "scala.Tuple2")


def test_each_single_import_is_the_class_pysparks_imports_resolve_its_name_to(spark):
    plain = spark.sparkContext._gateway.new_jvm_view("pyspark-imports-only")
    for name in PYSPARK_IMPORTS:
        java_import(plain, name)
    ours = spark.sparkContext._jvm
    assert len({fqn.rsplit(".", 1)[1] for fqn in SHORT_NAMES}) == len(SHORT_NAMES)
    for fqn in SHORT_NAMES:
        short = fqn.rsplit(".", 1)[1]
        assert getattr(plain, short)._fqn == fqn
        assert getattr(ours, short)._fqn == fqn
        assert getattr(ours, short) is getattr(ours, short)   # kept, not asked of the JVM again


def test_every_setting_is_a_key_spark_defines_and_the_session_has_it(spark):
    # Spark takes any key and ignores one it does not define: spark.sql.maxConcurrentOutputFiles (for
    # spark.sql.maxConcurrentOutputFileWriters) left every partitioned write sorting its rows first
    known = spark.sparkContext._jvm.org.apache.spark.internal.config.ConfigEntry
    assert known.findEntry("spark.sql.maxConcurrentOutputFiles") is None
    local, cluster = settings("local[2]"), settings("spark://127.0.0.1:7077")
    small = settings("local[2]", input_bytes=1 << 20)   # a small input's JVM: its own page size as well
    assert set(cluster) < set(local) < set(small)
    assert settings("spark://127.0.0.1:7077", input_bytes=1 << 20) == cluster
    for key in [*small, *INTERPRETED]:
        assert known.findEntry(key) is not None, key
    conf = spark.sparkContext.getConf()
    for key, value in local.items():
        if key == "spark.driver.extraJavaOptions":   # PySpark adds its own options in front
            assert conf.get(key).endswith(" " + value)
        else:
            assert conf.get(key) == value, key
    assert spark.conf.get("spark.sql.maxConcurrentOutputFileWriters") == "8"


def test_the_jvm_holds_the_late_c2_options(spark):
    # Spark starts its JVM with -XX:+IgnoreUnrecognizedVMOptions: a misspelled option would be dropped silently
    jvm = spark.sparkContext._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    for option in LATE_C2_OPTIONS.split():
        name, value = option.removeprefix("-XX:").split("=")
        assert bean.getVMOption(name).getValue() == value, name


@pytest.mark.spark
def test_local_mode_binds_the_driver_and_block_manager_to_loopback_without_the_hostname_warning():
    # a fresh JVM: Spark picks its address once, at start-up, before it reads any setting
    code = ("from analysis.spark import session\n"
            "s = session('local[1]')\n"
            "sc = s.sparkContext\n"
            "print(sc.getConf().get('spark.driver.host'), sc._jsc.sc().env().blockManager().blockManagerId().host())\n"
            "s.stop()\n")
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env,
                       cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split() == ["127.0.0.1", "127.0.0.1"]
    assert "resolves to a loopback address" not in p.stderr


def test_a_cluster_master_keeps_the_users_addresses():
    cluster = settings("spark://127.0.0.1:7077")
    assert "spark.driver.host" not in cluster and "spark.driver.bindAddress" not in cluster
    assert settings("local[2]")["spark.driver.bindAddress"] == "127.0.0.1"


def test_a_small_input_gets_few_partitions_and_no_generated_code_until_the_block_ends(spark):
    before = {k: spark.conf.get(k, None) for k in (SHUFFLE_KEY, *INTERPRETED)}
    with sized_to(spark, 3 << 20) as n:   # a 30-s chaos run is about 1-3 MB
        assert n == 1 and spark.conf.get(SHUFFLE_KEY) == "1" and spread(spark, 16) == 1
        assert all(spark.conf.get(k) == v for k, v in INTERPRETED.items())
        from pyspark.sql import functions as F
        df = spark.range(100).groupBy((F.col("id") % 7).alias("k")).count()
        assert "WholeStageCodegen" not in df._jdf.queryExecution().executedPlan().toString()   # planned only
    assert {k: spark.conf.get(k, None) for k in before} == before
    with sized_to(spark, 10 << 30) as n:   # 10 GB: the session's own settings
        assert str(n) == before[SHUFFLE_KEY] and spread(spark, 16) == 16
        assert {k: spark.conf.get(k, None) for k in INTERPRETED} == {k: before[k] for k in INTERPRETED}
    # and its JVM, started for it, compiles with the quick compiler only (local mode; a cluster's is its own)
    assert settings("local[2]", 3 << 20)["spark.driver.extraJavaOptions"].endswith(" " + SMALL_JVM_OPTIONS)
    assert SMALL_JVM_OPTIONS not in settings("local[2]", 1 << 30)["spark.driver.extraJavaOptions"]
    assert SMALL_JVM_OPTIONS not in settings("spark://127.0.0.1:7077", 3 << 20)["spark.driver.extraJavaOptions"]


def test_a_small_inputs_unions_end_in_one_task_and_a_large_inputs_keep_theirs(spark):
    from functools import reduce

    from pyspark.sql import DataFrame
    parts = [spark.range(0, 10 * i, 1, 3).selectExpr(f"{i} AS part", "id") for i in range(1, 5)]
    union = reduce(DataFrame.unionByName, parts)
    assert union.rdd.getNumPartitions() == 12
    with sized_to(spark, 3 << 20):
        one = gathered(union)
        assert one.rdd.getNumPartitions() == 1
        assert sorted(one.collect()) == sorted(union.collect())
    with sized_to(spark, 10 << 30):
        assert gathered(union).rdd.getNumPartitions() == 12


def test_the_jvm_views_org_package_is_looked_up_once_and_names_the_same_classes(spark):
    jvm = spark.sparkContext._jvm
    plain = spark.sparkContext._gateway.new_jvm_view("no-cache")
    expressions = jvm.org.apache.spark.sql.catalyst.expressions
    assert expressions is jvm.org.apache.spark.sql.catalyst.expressions   # kept, not asked of the JVM again
    assert expressions.ArrayFilter._fqn == plain.org.apache.spark.sql.catalyst.expressions.ArrayFilter._fqn
    from pyspark.sql import functions as F
    assert spark.range(3).select(F.filter(F.array("id", F.lit(5)), lambda x: x > 1).alias("a")).first().a == [5]


def test_a_small_inputs_kept_frames_are_local_relations_and_a_large_inputs_are_cached(spark, monkeypatch):
    import analysis.spark
    from pyspark.sql import functions as F

    def leaf_of(df) -> str:
        plan = df._jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() == "Repartition":   # the coalesce(1) above a local relation
            plan = plan.child()
        return plan.getClass().getSimpleName()

    df = spark.range(20).selectExpr("id % 3 AS k").groupBy("k").count()
    with sized_to(spark, 3 << 20):
        leaf = kept(df)
        assert leaf_of(leaf) == "LocalRelation"
        assert leaf.where("k > 0").rdd.getNumPartitions() == 1   # one task per stage that reads it
        assert sorted(leaf.collect()) == sorted(df.collect())
        # an empty one empties what is built on it: a join with it is optimized into an empty relation, no job
        none = kept(df.where("k < 0"))
        joined = spark.range(1000).join(none, F.col("id") == F.col("k"))
        assert joined._jdf.queryExecution().optimizedPlan().getClass().getSimpleName() == "LocalRelation"
        assert joined.collect() == []
        # and is known to be (a checker stops there: checks_base.Ctx.none); nothing else is
        assert known_empty(none) and not known_empty(leaf) and not known_empty(joined) and not known_empty(df)
        # a filter of a kept frame is folded by the optimizer: known with ``fold``, without a job
        assert known_empty(leaf.where("k < 0"), fold=True) and not known_empty(leaf.where("k < 0"))
        assert not known_empty(leaf.where("k > 0"), fold=True) and not known_empty(df.where("k < 0"), fold=True)
        release(leaf)
        release(none)
        # many rows (the event lines): a local checkpoint of one partition, as before
        many = kept(spark.range(0, 20, 1, 4), many=True)
        assert leaf_of(many) == "LogicalRDD"
        assert many.rdd.getNumPartitions() == 1 and many.count() == 20   # one task per stage that reads it
        release(many)
        # more rows than a plan should carry: the same, from the rows collected
        monkeypatch.setattr(analysis.spark, "LOCAL_ROWS", 10)
        parts = kept(spark.range(0, 20, 1, 4))
        assert leaf_of(parts) == "LogicalRDD"
        assert parts.rdd.getNumPartitions() == 1 and parts.count() == 20
        release(parts)
    with sized_to(spark, 10 << 30):
        cached = kept(df)
        assert cached.is_cached
        none = kept(df.where("k < 0"))   # its rows not counted: never known empty
        assert not known_empty(none) and not known_empty(none, fold=True)
        release(none)
        release(cached)
        assert not cached.is_cached


def test_a_files_run_is_the_name_a_regular_expression_would_find_without_one(spark):
    """``analysis.files.run_from_path`` (string functions from the end of the path) gives what
    ``([^/]+)/<place>$`` gives, for each kind of input file, on paths that fit and paths that do not."""
    from itertools import product

    from pyspark.sql import functions as F

    from analysis.files import EVENTS_REL, HISTORY_REL, META_REL, SEGMENT_REL, run_from_path

    regex = {HISTORY_REL: r"history\.jsonl(/[^/]+)?", EVENTS_REL: r"cluster/events/[^/]+",
             SEGMENT_REL: r"cluster/data/[^/]+/[^/]+/[^/]+", META_REL: r"[^/]+"}
    names = ["history.jsonl", "cluster", "events", "data", "r 1", "", "a%20b"]
    paths = sorted({"/".join(p) for k in range(5) for p in product(names, repeat=k)})
    paths = paths + ["file:///tmp/x/" + p for p in paths[::7]]
    df = spark.createDataFrame([(p,) for p in paths], "p string")
    cols = [c for rel, rx in regex.items() for c in (run_from_path(F.col("p"), rel),
                                                     F.regexp_extract("p", f"([^/]+)/{rx}$", 1))]
    rows = df.select("p", *cols).collect()
    assert len(rows) > 3000
    bad = [(r[0], r[1 + 2 * i], r[2 + 2 * i]) for r in rows for i in range(len(regex)) if r[1 + 2 * i] != r[2 + 2 * i]]
    assert bad == []
    assert any(r[1] == "r 1" for r in rows) and any(r[1] == "" for r in rows)


def test_a_written_table_reads_back_with_the_schema_its_files_give(spark, tmp_path):
    """``analysis.main.write_table`` names the schema instead of inferring it from the files' footers: the
    frame it returns has the schema Spark infers from them (every field nullable, nested ones too) and the
    rows written."""
    from pyspark.sql import functions as F

    from analysis.main import write_table

    df = (spark.range(3).select(F.col("id").alias("n"), F.array(F.col("id"), F.lit(7)).alias("xs"),
                                F.create_map(F.lit("k"), F.struct(F.col("id").alias("v"))).alias("m"),
                                F.lit("s").alias("s")))
    assert not df.schema["n"].nullable and not df.schema["xs"].dataType.containsNull   # so it has to change
    got = write_table(spark, df, tmp_path / "t")
    assert got.schema == spark.read.parquet(str(tmp_path / "t")).schema
    assert got.schema["n"].nullable and got.schema["xs"].dataType.containsNull
    assert sorted(r["n"] for r in got.collect()) == [0, 1, 2]
