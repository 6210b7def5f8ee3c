"""Shared fixtures: one real ZooKeeper for the whole run, a chroot per test; and the test tiers.

Brokers are real OS processes started through launcher.cluster.Cluster, the same
launcher `kafkasim cluster up` uses.  ZooKeeper runs with a 100 ms tick so
session timeouts of a few seconds are allowed and failovers stay quick.

Tiers (markers registered in pyproject.toml): a test is marked ``cluster``
when it starts processes (ZooKeeper, brokers, proxies, the CLI, any
subprocess), ``chaos`` when it runs a chaos run, ``spark`` when it starts
Spark, ``kafka`` (and ``cluster``) when it runs real Kafka 2.8.2 brokers, or Kafka's
Java client and tools (tests/test_java_clients.py).
The marks come from the fixtures a test uses (below), and from a
module-level ``pytestmark`` where a module starts processes itself.  The unit
tier is ``-m "not cluster and not chaos and not spark"``; in it, a test that
starts a process anyway fails, naming the mark it lacks.
"""
from __future__ import annotations

import faulthandler
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml

from launcher.cluster import Cluster
from node.config import load_config
from zk.server import FORCE_SYNC_ENV, EmbeddedZooKeeper, free_port

# the public pytest plugin, as users get it from the package's pytest11 entry point; named as that entry point
# (the module's own name), so this is a no-op once the package is installed with it
pytest_plugins = ["kafkasim.pytest_plugin"]

ZK_TICK_MS = 100
# Sessions of a few seconds cannot outlive a multi-second fsync on a busy disk, so the tests' ZooKeepers
# (and those of the `kafkasim` commands they run, which inherit this) do not fsync their logs.
os.environ.setdefault(FORCE_SYNC_ENV, "no")

# fixtures (here and in test modules) that start processes, run chaos runs or start Spark; a test using
# one, directly or through another fixture, gets the mark
FIXTURE_MARKS: dict[str, tuple[str, ...]] = {
    "zookeeper": ("cluster",), "make_cluster": ("cluster",),
    "ensemble": ("cluster",), "own_zk": ("cluster",),          # test_zk_server, test_zk_stall
    "cli": ("cluster",), "lab": ("cluster",),                  # test_cli, test_cli_data
    "demo_dir": ("cluster",),                                  # test_demo
    "proxy": ("cluster",),                                     # test_chaos_proxy
    "net": ("cluster",), "servers": ("cluster",),              # test_chaos_netns
    "short_chaos_results": ("chaos", "cluster"),
    "spark": ("spark",), "standalone": ("spark", "cluster"),   # test_analysis_cluster
    "kafka": ("kafka", "cluster"),                             # test_reference: real Kafka 2.8.2 brokers
    "kafkasim": ("cluster",), "kafkasim_session": ("cluster",),  # the pytest plugin's (kafkasim/pytest_plugin.py)
    "app_runs": ("chaos", "cluster"),                          # test_chaos_app
}
TIER_MARKS = ("cluster", "chaos", "spark")


# session fixtures worth computing once: under pytest-xdist (scripts/test.sh runs two workers) every test that
# uses one goes to the same worker; any other test goes with the rest of its module, so a module's own
# module-scoped cluster is started once too
SHARED_SESSION_FIXTURES = frozenset({"spark", "short_chaos_results", "short_chaos_runs", "analysed"})
SHARED_SETUP_TIMEOUT_S = 1800


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        for name in names:
            for mark in FIXTURE_MARKS.get(name, ()):
                item.add_marker(mark)
        shared = SHARED_SESSION_FIXTURES.intersection(names)
        item.add_marker(pytest.mark.xdist_group("session-spark" if shared else item.nodeid.split("::")[0]))
        if shared and not item.get_closest_marker("timeout"):
            # the first of these tests also sets up the chaos runs and their analysis (some minutes, and more
            # while the other worker's clusters share the two cores); the others inherit it done
            item.add_marker(pytest.mark.timeout(SHARED_SETUP_TIMEOUT_S))
    if getattr(config.option, "loadgroup", False):
        items[:] = heaviest_groups_first(items)


def group_of(item: pytest.Item) -> str:
    return next(m.args[0] for m in item.iter_markers("xdist_group"))


def heaviest_groups_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The items, each group's together and in its own order, the groups likely to take longest first.

    scripts/test.sh runs pytest-xdist with ``--no-loadscope-reorder``, so a worker takes the groups in this
    order as it frees up (its own default order is the most tests first, which puts a module of one or two
    long chaos runs at the very end, with the other worker idle).  Longest first, the many short unit tests
    come last and even out the workers' ends.  A group's weight is its costliest tier: the shared Spark
    session and chaos runs, then chaos runs, Kafka 2.8.2, other processes, then the unit tier; then its
    number of tests."""
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        groups.setdefault(group_of(item), []).append(item)

    def weight(name: str) -> tuple[int, int]:
        members = groups[name]
        tier = next((rank for rank, mark in enumerate(("chaos", "kafka", "cluster", "spark"), start=1)
                     if any(i.get_closest_marker(mark) for i in members)), 5)
        return (0 if name == "session-spark" else tier, -len(members))

    return [item for name in sorted(groups, key=weight) for item in groups[name]]


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """On an xdist worker under ``--dist loadgroup``, xdist names each test's group in its node id (a suffix
    ``@group``).  If that stops working (pytest 9.2 broke it), tests of one module scatter over the workers,
    each starting the module's cluster, and tests that follow one another race: fail the run at once."""
    if getattr(session.config.option, "loadgroup", False):
        ungrouped = [i.nodeid for i in session.items if "@" not in i.nodeid]
        if ungrouped:
            raise pytest.UsageError(f"pytest-xdist did not group {ungrouped[0]} (and {len(ungrouped) - 1} "
                                    "more): use the pytest and pytest-xdist versions pyproject.toml pins")


#: past pytest-timeout's limit (pyproject.toml, 600 s): a test whose process cannot run Python any more
STUCK_AFTER_S = 660


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test that pytest-timeout cannot stop is killed with its process, every thread's stack written to stderr
    first, so that the suite fails with the stacks instead of hanging until CI stops it.  pytest-timeout's
    alarm runs Python, which a C library holding the GIL forever (librdkafka's close once: chaos/rdkafka_close.py)
    never lets run; faulthandler's watchdog is a thread of C.  pytest-xdist reports the test failed with its
    worker and starts another worker."""
    faulthandler.dump_traceback_later(STUCK_AFTER_S, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(autouse=True)
def _unit_tests_start_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test with no tier mark may not start a process: the unit tier stays fast and self-contained."""
    if any(request.node.get_closest_marker(m) for m in TIER_MARKS):
        return
    test = request.node.nodeid

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError(f"{test} started a process: mark it cluster (or chaos/spark), "
                             "or give it a fixture that does (tests/conftest.py)")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(os, "posix_spawn", refuse)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedZooKeeper]:
    zk = EmbeddedZooKeeper(tmp_path_factory.mktemp("zookeeper"), servers=1, tick_ms=ZK_TICK_MS)
    zk.start(timeout=60)
    yield zk
    zk.stop()


def write_cluster_yaml(path: Path, connect: str, brokers: int, **settings: Any) -> Path:
    doc: dict[str, Any] = {
        "run.dir": str(path.parent / "run"),
        "zookeeper.connect": connect,
        "zookeeper.session.timeout.ms": 3000,
        "offsets.topic.num.partitions": 50,
        "offsets.topic.replication.factor": min(3, brokers),
        "transaction.state.log.replication.factor": min(3, brokers),
        "transaction.state.log.min.isr": min(2, brokers),
        "controller.socket.timeout.ms": 3000,
        "controlled.shutdown.retry.backoff.ms": 50,
        # every broker registers before the offsets topic is placed, however slow a start under load
        # (placement over the first three alone put the controller in every partition's replicas)
        "kafkasim.offsets.topic.create.grace.ms": 30_000,
        "brokers": [{"id": i, "host": "127.0.0.1", "port": free_port(),
                     "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"} for i in range(1, brokers + 1)],
    }
    doc.update(settings)
    if doc.get("kafkasim.offsets.topic.eager.create") is False:
        doc.pop("kafkasim.offsets.topic.create.grace.ms", None)  # with lazy creation the key is an error
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture
def make_cluster(zookeeper: EmbeddedZooKeeper, tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """make_cluster(brokers=3, start=True, **flat_settings) -> a Cluster on its own chroot."""
    made: list[Cluster] = []

    def make(brokers: int = 3, start: bool = True, **settings: Any) -> Cluster:
        d = tmp_path / f"cluster{len(made)}"
        d.mkdir()
        connect = f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}"
        flat = {k.replace("__", "."): v for k, v in settings.items()}
        path = write_cluster_yaml(d / "cluster.yaml", connect, brokers, **flat)
        cluster = Cluster(load_config(path), path)
        made.append(cluster)
        if start:
            cluster.up(timeout=60)
        return cluster

    yield make
    for c in made:
        c.down()


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the whole test run (starting one costs seconds)."""
    from analysis.spark import session
    s = session("local[2]", app="kafkasim-tests")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def short_chaos_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, str]]:
    """Two short real chaos runs, shared by the chaos and analysis tests: ``clean``, the shipped
    coordinator-kill scenario as tests/test_chaos_runs.py runs every scenario (seed 1, 10 s), and
    ``planted``, consumer-stalls without faults or crashes and with the fenced-generation-commit bug
    planted (seed 59, 12 s).  name -> (the ChaosRun, what it printed).

    The planted run's stalls are drawn so that one is alone: with seed 59 and a stall every 3-12 s, slot 1
    stalls at 3.6 s for 6 s while slots 0 and 2 run on until 11.8 s, so they rebalance without it (its
    session, 3 s, ends by 6.6 s) well before it wakes and commits in its old generation.  Overlapping
    stalls (seed 1's) leave nobody to rebalance, and whether a zombie commit follows a newer sync is then
    a race.
    """
    import copy
    import io

    from chaos.runner import ChaosRun
    from chaos.scenario import SCENARIO_DIR, load_scenario, parse_scenario

    base = tmp_path_factory.mktemp("chaos-runs")
    stalls = copy.deepcopy(yaml.safe_load((SCENARIO_DIR / "consumer-stalls.yaml").read_text()))
    stalls["faults"] = {"mix": []}
    group = stalls["workload"]["groups"][0]
    del group["crash.interval.ms"], group["restart.after.ms"]
    group.update({"session.timeout.ms": 3000, "stall.interval.ms": [3000, 12000], "stall.ms": 6000})
    out = {}
    for name, scenario, seed, duration, bugs in (
            ("clean", load_scenario(SCENARIO_DIR / "coordinator-kill.yaml"), 1, 10.0, ()),
            ("planted", parse_scenario(stalls, "consumer-stalls (tailored)"), 59, 12.0,
             ("fenced-generation-commit",))):
        printed = io.StringIO()
        r = ChaosRun(scenario, seed, base / name, duration_s=duration, planted_bugs=bugs, stream=printed,
                     progress=False).run()
        out[name] = (r, printed.getvalue())
    return out


@pytest.fixture(scope="session")
def short_chaos_runs(short_chaos_results) -> dict[str, Path]:
    """The run directories of ``short_chaos_results``."""
    return {name: r.out for name, (r, _printed) in short_chaos_results.items()}


@pytest.fixture(scope="session")
def analysed(spark, short_chaos_runs, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One ``kafkasim analyze DIR`` (``analysis.main.run``) over a directory of every run the analysis tests
    look at, as a user runs it over many runs: the two real runs (linked into it), the clean one doctored (tests/analysis_cases.py), the
    synthetic checker cases, and two generated runs (``analysis.synthetic``: clean, every kind planted).
    Gives ``dirs`` (run id -> directory), ``out``, ``summary``, ``printed`` and ``tables`` (name -> the
    Parquet table read back)."""
    import io

    from analysis_cases import CASES, doctor, write_run

    from analysis import report
    from analysis.main import run
    from analysis.synthetic import generate

    base = tmp_path_factory.mktemp("analysed")
    dirs = {name: Path(p) for name, p in short_chaos_runs.items()}
    dirs["doctored"] = doctor(dirs["clean"], base / "runs" / "doctored")
    for name, (build, _kinds, _verdict) in CASES.items():
        ops, events = build(base / "built" / name)
        write_run(base / "runs" / name, ops, events)
        dirs[name] = base / "runs" / name
    for name, ops, plant, seed, instances in (("gen-clean", 3000, [], 11, 1), ("gen-planted", 12000, ["all"], 2, 2)):
        d, = generate(base / name, ops, plant=plant, seed=seed, instances=instances)
        dirs[name] = d.rename(base / "runs" / name)
    printed = io.StringIO()
    out = base / "out"
    detail, report.MAX_DETAIL_RUNS = report.MAX_DETAIL_RUNS, 2   # the report's own tests draw the two real runs
    try:
        for name in short_chaos_runs:   # one directory of runs, read as one dataset (kafkasim analyze DIR)
            (base / "runs" / name).symlink_to(dirs[name], target_is_directory=True)
        before = {job for job, _ in job_descriptions(spark)}
        summary = run([str(base / "runs")], "local[2]", out, stream=printed)
        jobs = [d for job, d in job_descriptions(spark) if job not in before]
    finally:
        report.MAX_DETAIL_RUNS = detail
    tables = {name: spark.read.parquet(str(out / "tables" / name)) for name in summary["tables"]}
    return {"dirs": dirs, "out": out, "summary": summary, "printed": printed.getvalue(), "tables": tables,
            "jobs": jobs}


def job_descriptions(spark) -> list[tuple[int, str | None]]:
    """(job id, description) of the jobs Spark's status store holds (every job the listener bus has
    delivered: it is drained first)."""
    sc = spark.sparkContext._jsc.sc()
    sc.listenerBus().waitUntilEmpty()
    jobs = sc.statusStore().jobsList(None)
    out = []
    for i in range(jobs.length()):
        j = jobs.apply(i)
        d = j.description()
        out.append((j.jobId(), d.get() if d.isDefined() else None))
    return out
