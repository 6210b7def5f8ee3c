"""``sim sweep --spark MASTER``: a sweep's seeds spread over a Spark cluster.

The seeds are cut into ranges, one Spark task each; a task runs its range, one seed after another, in its
executor's Python worker (``sim.sweep.run_seed``, as ``--jobs`` does in a local process) and returns each
seed's outcome: its verdict, anomaly kinds, faults, coordinator moves, times, the digest of its history and
event logs, and for a failing seed its first violation (an invariant's names the step) or, crashed, its
traceback.  The driver collects them as tasks finish.

The executors run the code of this checkout: every package of it is shipped to them as one zip
(``SparkContext.addPyFile``), which their Python workers import before anything installed; its SHA-256 is
the run's ``code`` and each task reports where it imported the simulator from.  So a seed replays locally
to the same bytes: ``kafkasim sim replay SEED --digest HEX`` runs it here and compares its digest with the
one the executor recorded.

Spark is started as PySpark starts it (a JVM from its own distribution).  For a master on loopback (a
standalone cluster on this machine, or ``local[N]``) the driver binds 127.0.0.1; otherwise the cluster's own
settings (``SPARK_LOCAL_IP``, ``spark-defaults.conf``) decide.
"""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import urlparse

from sim.run import SimOptions
from sim.sweep import Outcome, run_seed

ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"
APP = "kafkasim-sim-sweep"
SKIP_DIRS = frozenset({"tests", "examples", "scripts", "bench", "__pycache__"})
MAX_PER_TASK = 200      # seeds per task at most: a lost task is redone in minutes, and progress stays visible


@dataclass(frozen=True)
class SparkInfo:
    master: str
    app_id: str
    tasks: int
    seeds_per_task: int
    code: str            # SHA-256 of the shipped zip's files
    imported_from: tuple[str, ...]   # where the executors' Python workers imported the simulator from


def code_zip(dest: Path, root: Path = ROOT) -> tuple[Path, str]:
    """Every package of the checkout (each folder with an ``__init__.py``, tests and benchmarks left out), its
    ``.py`` files in a zip; -> (the zip, SHA-256 over the files' names and bytes, in name order)."""
    files = sorted(p for pkg in root.glob("*/__init__.py") if pkg.parent.name not in SKIP_DIRS
                   for p in pkg.parent.rglob("*.py") if "__pycache__" not in p.parts)
    h = hashlib.sha256()
    path = dest / "kafkasim_code.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for f in files:
            name = f.relative_to(root).as_posix()
            data = f.read_bytes()
            h.update(name.encode() + b"\0" + data + b"\0")
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            z.writestr(info, data, zipfile.ZIP_DEFLATED)
    return path, h.hexdigest()


def _loopback(master: str) -> bool:
    if master.startswith("local"):
        return True
    host = urlparse(master).hostname or ""
    return host in ("127.0.0.1", "localhost") or host.startswith("127.")


def context(master: str):
    """A SparkContext on ``master`` for the sweep (the one running in this process, if any)."""
    from pyspark import SparkConf, SparkContext
    if SparkContext._active_spark_context is not None:
        return SparkContext._active_spark_context
    conf = SparkConf().setMaster(master).setAppName(APP)
    if _loopback(master):
        # the driver (and its block manager) on loopback: SPARK_LOCAL_IP is read by the JVM PySpark starts
        os.environ["SPARK_LOCAL_IP"] = LOOPBACK
        conf.set("spark.driver.host", LOOPBACK).set("spark.driver.bindAddress", LOOPBACK)
    if "PYSPARK_PYTHON" not in os.environ:
        conf.set("spark.pyspark.python", sys.executable)   # the executors' workers: this interpreter
    conf.set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
    # one seed after another in a task: a task's outcome is small, and Spark need not retry a slow one
    conf.set("spark.task.maxFailures", "4").set("spark.speculation", "false")
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    return sc


def ranges(seeds: range, tasks: int) -> list[tuple[int, int]]:
    """``seeds`` cut into at most ``tasks`` consecutive [lo, hi) ranges, each at most MAX_PER_TASK long."""
    n = len(seeds)
    per = max(1, min(MAX_PER_TASK, -(-n // max(1, tasks))))
    return [(seeds[i], seeds[min(i + per, n) - 1] + 1) for i in range(0, n, per)]


def run_range(base: SimOptions, lo: int, hi: int) -> Iterator[dict[str, Any]]:
    """A task's work (in an executor's Python worker): every seed of [lo, hi), each one's outcome as a dict."""
    import sim
    where = str(Path(sim.__file__).resolve().parent.parent)
    for seed in range(lo, hi):
        o = run_seed(replace(base, seed=seed))
        yield {**asdict(o), "imported_from": where}


def _task(items: Iterable[tuple[SimOptions, int, int]]) -> Iterator[dict[str, Any]]:
    for base, lo, hi in items:
        yield from run_range(base, lo, hi)


def spark_sweep(master: str, base: SimOptions, seeds: range, tasks: int | None = None,
                on_done: Callable[[Outcome], None] | None = None) -> tuple[list[Outcome], SparkInfo]:
    """Run every seed on ``master``'s executors; outcomes in seed order, and what ran them."""
    sc = context(master)
    with tempfile.TemporaryDirectory(prefix="kafkasim-spark-sweep-") as tmp:
        path, digest = code_zip(Path(tmp))
        sc.addPyFile(str(path))
        parts = ranges(seeds, tasks or max(2, sc.defaultParallelism) * 4)
        rdd = sc.parallelize([(base, lo, hi) for lo, hi in parts], len(parts)).mapPartitions(_task)
        out: list[Outcome] = []
        where: set[str] = set()
        for d in rdd.toLocalIterator(prefetchPartitions=True):
            where.add(d.pop("imported_from"))
            d["kinds"] = tuple(d["kinds"])
            o = Outcome(**d)
            out.append(o)
            if on_done is not None:
                on_done(o)
        info = SparkInfo(master, sc.applicationId, len(parts), parts[0][1] - parts[0][0] if parts else 0, digest,
                         tuple(sorted(where)))
    return sorted(out, key=lambda o: o.seed), info


def stop() -> None:
    from pyspark import SparkContext
    sc = SparkContext._active_spark_context
    if sc is not None:
        sc.stop()

