"""analysis/failovers.py against judge/timeline.py on constructed runs: the attribution of coordinator moves
(issue 30 item 8: a short pause does not take the end phase's controlled shutdown) and random runs, every
row the same to the microsecond.  One Spark job over every run at once."""
from __future__ import annotations

import random

import pytest
from analysis_cases import write_run
from test_chaos_timeline import (
    Run,
    base_run,
    issue30_run,
)

from judge.timeline import ROW_FIELDS

KINDS = ("kill", "terminate", "pause", "partition", "expire-session")


def random_run(seed: int) -> Run:
    """The shape of test_chaos_timeline's property test, from a seed: faults on brokers 1-3, each maybe
    followed by a detection of its broker, a move of P2 (g1's) and a load; noise; g1's commits; end marks."""
    rnd = random.Random(seed)
    r = base_run(groups=("g1", "g5"))
    used: set[int] = set()

    def detection(at: int, b: int) -> None:
        kind = rnd.choice(("bc", "csr", "elected", "stopping"))
        if kind == "bc":
            r.ev(at, 3, "broker_change", controller_epoch=1, new=[], dead=[b], bounced=[], epochs={})
        elif kind == "csr":
            r.ev(at, 3, "controlled_shutdown_requested", controller_epoch=1, broker_id=b, broker_epoch=1,
                 moved=1, remaining=0)
        elif kind == "elected":
            r.ev(at, rnd.randint(1, 3), "controller_elected", epoch=2, epoch_zk_version=2, elect_ms=1.0)
        else:
            r.ev(at, b, "broker_stopping")

    def state(at: int, leader: int) -> None:
        if at not in used:
            used.add(at)
            r.states(at, 3, at, (2, leader, rnd.choice(("offline_election", "controlled_shutdown",
                                                         "preferred_admin")), None))

    def load(at: int, b: int) -> None:
        r.ev(at, b, "coordinator_loaded", partition=2, leader_epoch=rnd.choice((None, 0, 1)), records=1,
             replayed=1, skipped_records=0, bytes=1, end_offset=1, groups=1, duration_ms=1.0)

    for i, start in enumerate(sorted(rnd.sample(range(1000, 18_000), rnd.randint(0, 4)))):
        b = rnd.choice((1, 1, 2, 3))
        r.fault(i, rnd.choice(KINDS), "broker", [b], start, heal_ms=start + rnd.randint(100, 3000))
        if rnd.random() < 0.75:
            detected = start + rnd.randint(-50, 3000)
            detection(detected, b)
            if rnd.random() < 0.75:
                moved, new = detected + rnd.randint(-20, 50), rnd.randint(-1, 3)
                state(moved, new)
                if rnd.random() < 0.5:
                    load(moved + rnd.randint(-5, 100), new)
    for _ in range(rnd.randint(0, 3)):
        detection(rnd.randint(1000, 20_000), rnd.randint(1, 3))
    for _ in range(rnd.randint(0, 3)):
        state(rnd.randint(1000, 20_000), rnd.randint(-1, 3))
    for _ in range(rnd.randint(0, 3)):
        load(rnd.randint(1000, 20_000), rnd.randint(1, 3))
    for _ in range(rnd.randint(0, 8)):
        done = rnd.randint(1000, 20_000)
        r.client(rnd.choice(("g1", "g5")), rnd.choice(("commit", "commit", "heartbeat")), done - 5, done,
                 rnd.choice(("ok", "ok", "fail")), node=rnd.randint(1, 3))
    if rnd.random() < 0.5:
        end = rnd.randint(1000, 20_000)
        r.end_phase("end", end)
        r.end_phase("stop", end + rnd.randint(0, 2000))
    # drawn last, so the draws above (and the seeds' kinds of rows) stay as they were: log directories failing,
    # the controller listing the replicas it lost (a disk fault's detection when P2 is listed)
    for _ in range(rnd.randint(0, 2)):
        r.ev(rnd.randint(1000, 20_000), 3, "replicas_offline", controller_epoch=1, broker_id=rnd.randint(1, 3),
             led=[], replicas=[f"__consumer_offsets-{rnd.choice((2, 3))}"])
    return r


def disk_run() -> Run:
    """A disk fault on g1's coordinator detected by ``replicas_offline``, and a later move detected the same way
    that no fault explains."""
    r = base_run(groups=("g1", "g5"))
    r.fault(0, "disk-full", "coordinator:g1", [1], 1000, heal_ms=6000)
    r.ev(1050, 3, "replicas_offline", controller_epoch=1, broker_id=1, replicas=["__consumer_offsets-0"], led=[])
    r.ev(1060, 3, "replicas_offline", controller_epoch=1, broker_id=1, replicas=["__consumer_offsets-2"], led=[])
    r.states(1061, 3, 1062, (2, 2, "offline_election", 1))
    r.ev(1070, 2, "coordinator_loaded", partition=2, leader_epoch=1, records=3, replayed=3, skipped_records=0,
         bytes=10, end_offset=3, groups=2, duration_ms=1.0)
    r.client("g1", "commit", 1080, 1090, node=2)
    r.ev(9000, 3, "replicas_offline", controller_epoch=1, broker_id=2, replicas=["__consumer_offsets-2"], led=[])
    r.states(9001, 3, 9002, (2, 3, "offline_election", 2))
    return r


RUNS = {"issue30": issue30_run(), "issue30-unmarked": issue30_run(marks=False), "disk": disk_run(),
        # few runs (Spark reads each run apart): seeds whose rows have every kind (the test below)
        **{f"random-{seed}": random_run(seed) for seed in (0, 1, 2, 3, 5, 15, 108)}}


@pytest.fixture(scope="module")
def spark_rows(spark, tmp_path_factory) -> dict[str, list[dict]]:
    from analysis.failovers import failovers
    from analysis.load import load_runs

    base = tmp_path_factory.mktemp("failover-runs")
    for name, r in RUNS.items():
        write_run(base / name, r.ops, r.events)
    inputs = load_runs(spark, [str(base / name) for name in RUNS], with_segments=False)
    # the runs' files read once, their lineage cut (many small runs make a deep union of reads)
    inputs.ops = inputs.ops.localCheckpoint()
    inputs.parsed = inputs.parsed_events().localCheckpoint()
    out: dict[str, list[dict]] = {name: [] for name in RUNS}
    for row in failovers(inputs).collect():
        d = row.asDict(recursive=True)
        d["nodes"] = [int(n) if n.lstrip("-").isdigit() else n for n in d["nodes"]]
        out[d.pop("run")].append({k: d[k] for k in ROW_FIELDS})
    return out


def test_the_random_runs_have_every_kind_of_row():
    rows = [row for r in RUNS.values() for row in r.timeline()]
    kinds = {(row["cause"], row["moved"], row["load_ms"] is not None) for row in rows if row["group"]}
    assert {("fault", True, True), ("fault", True, False), ("fault", False, False), ("end phase", True, True),
            ("end phase", True, False), ("none in schedule", True, True), ("none in schedule", True, False)} <= kinds
    assert any(row["group"] is None and row["moved"] for row in rows)                 # a controller failover
    assert any(row["load_ms"] is not None and row["first_commit_ms"] is not None for row in rows)
    assert any(row["unavailable_from_ms"] is not None for row in rows)
    assert any(row["detect_by"] == "replicas_offline" for row in rows)               # a log directory failed


@pytest.mark.parametrize("name", list(RUNS))
def test_spark_failovers_are_the_python_timeline(spark_rows, name):
    expected = RUNS[name].timeline()
    assert spark_rows[name] == expected
    if name.startswith("issue30"):
        assert [(r["fault"], r["cause"], r["group"]) for r in expected][-2:] == [
            (27, "fault", "g1"), (None, "end phase" if name == "issue30" else "none in schedule", "g1")]
