"""The analysis on a Spark cluster, through spark-submit.

A standalone Spark master and one worker run as real JVM processes on loopback, started from PySpark's own
distribution (``spark-class``).  ``spark-submit --master spark://... analysis/main.py DIR`` analyses a directory
of two of the runs the shared local analysis (tests/conftest.py ``analysed``) covered: a real chaos run and a
generated one with every anomaly kind planted.  The cluster's executor runs the tasks, its Python workers import the
``analysis`` package shipped to them as a zip (the segment decoder runs there), and every table must hold the
same rows as the local run's.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests import spark_standalone
from tests.spark_standalone import SPARK_HOME

ROOT = Path(__file__).resolve().parent.parent
RUNS = ("planted", "gen-planted")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory):
    """A standalone master and a worker (2 cores, 2 GiB), until the module's tests end: its ``url``, the
    master's ``state()`` (its JSON status page) and the ``env`` to submit with."""
    with spark_standalone.standalone(tmp_path_factory.mktemp("spark-standalone")) as cluster:
        yield cluster


def _rows(df, runs: list[str]) -> list[tuple]:
    """A table's rows of ``runs``, every column, in a canonical order (arrays and maps as Python values)."""
    from pyspark.sql import functions as F
    got = [tuple(json.dumps(v, sort_keys=True, default=str) if isinstance(v, (list, dict)) else v for v in r)
           for r in df.where(F.col("run").isin(*runs)).collect()]
    return sorted(got, key=repr)


@pytest.mark.timeout(3000)   # the shared runs' set-up (when this test is the first to need it) and the submit's 1500 s
def test_spark_submit_on_a_standalone_cluster_gives_the_local_tables(standalone, analysed, spark, tmp_path):
    shared = tmp_path / "runs"   # a directory of runs, as a sweep on shared storage
    shared.mkdir()
    for name in RUNS:
        (shared / name).symlink_to(analysed["dirs"][name].resolve(), target_is_directory=True)
    runs = sorted(analysed["dirs"][name].resolve().name for name in RUNS)
    out = tmp_path / "out"
    # no --master after the script: spark-submit's is the one used.  A deadline, not a measure: about 5 minutes
    # on a quiet machine, and more than 900 s under a load average of 25-35 on its 2 cores (2026-11-27)
    p = subprocess.run([str(SPARK_HOME / "bin" / "spark-submit"), "--master", standalone["url"], "--driver-memory",
                        "2g", str(ROOT / "analysis" / "main.py"), str(shared), "--out", str(out)],
                       cwd=tmp_path, env=standalone["env"], capture_output=True, text=True, timeout=1500)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
    assert f"analysing 2 run(s) on {standalone['url']}" in p.stdout
    apps = standalone["state"]()["completedapps"]
    assert [(a["name"], a["state"]) for a in apps] == [("kafkasim-analyze", "FINISHED")]

    summary = json.loads((out / "summary.json").read_text())
    assert summary["runs"] == runs
    local = analysed["tables"]
    assert sorted(summary["tables"]) == sorted(local) and "runs" in local and "verdicts" in local
    for name in summary["tables"]:
        here = spark.read.parquet(str(out / "tables" / name))
        assert here.columns == local[name].columns, name
        rows = _rows(here, runs)
        assert rows == _rows(local[name], runs), name
        assert rows or name == "pairing_errors", name   # not two empty lists
    planted = analysed["dirs"]["gen-planted"]
    expected = json.loads((planted / "results.json").read_text())["expected"]["anomaly_counts"]
    found = spark.read.parquet(str(out / "tables" / "anomalies")).where(f"run = '{planted.name}'")
    assert {r.kind: r["count"] for r in found.groupBy("kind").count().collect()} == expected
    assert (out / "report" / "report.html").stat().st_size > 0
