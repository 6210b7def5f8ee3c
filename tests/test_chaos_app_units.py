"""The user's application in chaos runs, its pure parts: app targets, the ``command:`` workload's keys, the app
checkers (judge/checks_app.py) and the timeline of a group whose commits are only observed."""
from __future__ import annotations

import random

import pytest

from chaos.scenario import ScenarioError, parse_scenario
from chaos.targets import View, parse_target, resolve
from judge.checkers import check
from judge.checks_app import check_app_output, check_observed_commits
from judge.history import HistoryWriter, read_history
from judge.registry import APP_CHECKERS, APP_KINDS, KINDS
from judge.timeline import failover_timeline
from kafkacommon.hashing import partition_for

GROUP, N = "orders-app", 10
P = partition_for(GROUP, N)


# ------------------------------------------------------------------ targets

def test_app_targets_resolve_to_the_application_processes():
    v = View([1, 2, 3], {1, 2, 3}, [1], controller=1, apps=[1, 2])
    assert resolve("app", v, random.Random(0)) == ["app1", "app2"]
    assert resolve("app:2", v, random.Random(0)) == ["app2"]
    assert resolve("app:3", v, random.Random(0)) == []                 # not running: a recorded no-op
    assert resolve("app", View([1], {1}, [1]), random.Random(0)) == []  # no command: workload
    assert str(parse_target("app:2")) == "app:2"
    assert resolve("rest", v, random.Random(0), exclude=frozenset({"b1"})) == ["b2", "b3", "zk1", "client"]


# ------------------------------------------------------------------ the command: workload

def _doc(**command):
    cmd = {"run": "python3 app.py --fast", "group": GROUP, "input": "orders", "output.topic": "processed", **command}
    return {"name": "t", "topics": [{"name": "orders"}, {"name": "processed"}],
            "workload": {"producers": {"topic": "orders"}, "command": cmd},
            "faults": {"mix": [{"kind": "kill", "target": "app:1"}, {"kind": "kill", "target": f"coordinator:{GROUP}"}]}}


def test_the_command_workload_is_parsed():
    s = parse_scenario(_doc(instances=2, env={"A": 1}, delivery="exactly-once"))
    c = s.command
    assert c.run == (("python3", "app.py", "--fast"),) * 2 and c.instances == 2
    assert (c.group, c.input, c.output_topic, c.delivery, c.env) == (GROUP, "orders", "processed", "exactly-once",
                                                                      (("A", "1"),))
    two = parse_scenario(_doc(run=["a --x", "b"])).command
    assert two.run == (("a", "--x"), ("b",))


@pytest.mark.parametrize("change, message", [
    ({"inptu": "orders"}, "workload.command.inptu: unknown key (did you mean input?)"),
    ({"input": "nope"}, "workload.command.input: 'nope' is not in topics"),
    ({"output.topic": "orders"}, "workload.command.output.topic: must differ from input"),
    ({"output.file": "out.txt"}, "give output.topic or output.file, not both"),
    ({"delivery": "at-most-once"}, "workload.command.delivery: 'at-most-once' is not one of"),
    ({"run": "a 'unclosed"}, "workload.command.run: cannot split"),
    ({"run": []}, "workload.command.run: expected a command line"),
])
def test_a_bad_command_key_is_an_error_naming_it(change, message):
    with pytest.raises(ScenarioError) as e:
        parse_scenario(_doc(**change))
    assert message in str(e.value)


@pytest.mark.parametrize("fault, message", [
    ({"kind": "kill", "target": "app:2"}, "app:2: the command runs app:1..app:1"),
    ({"kind": "partition", "target": "app:1"}, "partition cannot be aimed at the application"),
    ({"kind": "expire-session", "target": "app"}, "expire-session cannot be aimed at the application"),
])
def test_faults_on_the_app_are_checked(fault, message):
    doc = _doc()
    doc["faults"]["mix"] = [fault]
    with pytest.raises(ScenarioError) as e:
        parse_scenario(doc)
    assert message in str(e.value)
    doc["workload"].pop("command")
    doc["faults"]["mix"] = [{"kind": "kill", "target": "app"}]
    with pytest.raises(ScenarioError, match="the workload has no command"):
        parse_scenario(doc)


# ------------------------------------------------------------------ histories

class _Clock:
    def __init__(self) -> None:
        self.t = 0

    def __call__(self) -> int:
        self.t += 1_000_000   # 1 ms a line
        return self.t


def _history(tmp_path, build):
    clock = _Clock()
    with HistoryWriter(tmp_path / "history.jsonl", clock=clock) as h:
        build(h, clock)
    return read_history(tmp_path / "history.jsonl")


def _fetch(h, offsets, process=1, final=False, ok=True):
    op = h.invoke(process, "fetch-committed", {"partitions": [f"orders/{p}" for p in offsets]}, group=GROUP,
                  **({"final": True} if final else {}))
    if ok:
        h.complete(op, "ok", {"offsets": {f"orders/{p}": o for p, o in offsets.items()}}, node=1)
    else:
        h.complete(op, "fail", error="COORDINATOR_NOT_AVAILABLE")


def _send(h, p, o, value, process=0):
    op = h.invoke(process, "send", {"topic": "orders", "value": value})
    h.complete(op, "ok", {"topic": "orders", "partition": p, "offset": o, "value": value})


def _loaded(ns, broker=2):
    return {"type": "coordinator_loaded", "broker": broker, "partition": P, "leader_epoch": 1, "mono_ns": ns}


APP = {"group": GROUP, "input": "orders", "delivery": "at-least-once"}


def test_observed_commits_going_down_across_a_failover_are_a_lost_commit(tmp_path):
    ops = _history(tmp_path, lambda h, c: (_fetch(h, {0: 5}), _fetch(h, {0: 9}), _fetch(h, {0: 7})))
    loaded_between = [_loaded(ops[3]["time"] + 1)]   # after the fetch that saw 9 was invoked
    lost = check_observed_commits(ops, loaded_between, app=APP, offsets_partitions=N)
    assert [a.kind for a in lost.anomalies] == ["app-commit-lost"]
    assert lost.anomalies[0].details == {"group": GROUP, "topic": "orders", "partition": 0, "offset": 9,
                                         "fetched": 7}
    back = check_observed_commits(ops, [], app=APP, offsets_partitions=N)
    assert [a.kind for a in back.anomalies] == ["app-commit-went-backwards"]
    assert check_observed_commits(ops, [], app=None).anomalies == []
    assert check_observed_commits(ops, [], app={**APP, "group": "other"}).anomalies == []


def test_a_reset_the_user_asked_for_explains_a_lower_offset(tmp_path):
    def build(h, c):
        _fetch(h, {0: 9})
        reset = h.invoke(2, "commit", {"generation": -1, "offsets": {"orders/0": 3}}, group=GROUP)
        h.complete(reset, "ok")
        _fetch(h, {0: 3})
        _fetch(h, {0: 2})            # below the reset's baseline: reported
    r = check_observed_commits(_history(tmp_path, build), [], app=APP)
    assert [(a.kind, a.details["offset"], a.details["fetched"]) for a in r.anomalies] == [
        ("app-commit-went-backwards", 3, 2)]
    assert r.stats["observed-commits"]["explained_by_reset"] == 1


def test_app_output_reports_records_committed_past_but_never_written(tmp_path):
    def build(h, c):
        for o, v in enumerate(["a", "b", "c", "d"]):
            _send(h, 0, o, v)
        _fetch(h, {0: 3}, final=True)
    ops = _history(tmp_path, build)
    app = {**APP, "output": {"topic": "processed"}, "output_records": ["a", "c", "c", "zz"], "output_error": None}
    r = check_app_output(ops, [], app=app)
    assert [(a.kind, a.details["value"]) for a in r.anomalies] == [("app-record-lost", "b")]
    s = r.stats["app-output"]
    assert (s["records_judged"], s["not_committed"], s["duplicates"], s["unexpected"]) == (3, 1, 1, 1)
    assert r.unknowns and "did not drain" in r.unknowns[0]      # d (offset 3) lies at the committed offset
    once = check_app_output(ops, [], app={**app, "delivery": "exactly-once"})
    assert sorted(a.kind for a in once.anomalies) == ["app-record-duplicated", "app-record-lost"]
    assert check_app_output(ops, [], app={**app, "output_records": None, "output_error": "x"}).unknowns
    (tmp_path / "no-final").mkdir()
    no_final = _history(tmp_path / "no-final", lambda h, c: _send(h, 0, 0, "a"))
    assert "no final fetch-committed" in check_app_output(no_final, [], app=app).unknowns[0]


def test_check_runs_the_app_checkers_only_with_an_app(tmp_path):
    ops = _history(tmp_path, lambda h, c: (_send(h, 0, 0, "a"), _fetch(h, {0: 1}, final=True)))
    app = {**APP, "output": {"topic": "processed"}, "output_records": [], "output_error": None}
    assert check(ops, [], offsets_partitions=N).verdict != "invalid"
    assert check(ops, [], offsets_partitions=N, app=app).kinds() == {"app-record-lost"}
    assert set(APP_KINDS).isdisjoint(KINDS) and list(APP_CHECKERS) == ["observed-commits", "app-output"]


def test_the_timeline_of_an_observed_group_takes_its_first_commit_from_the_fetches(tmp_path):
    """Kill the coordinator: fetches fail until the new one has loaded; its first commit is the first change
    seen between two ok fetches invoked after the load."""
    def build(h, c):
        _fetch(h, {0: 5})
        h.nemesis("kill", {"fault": 0, "phase": "start", "kind": "kill", "target": f"coordinator:{GROUP}",
                           "nodes": [1]})
        _fetch(h, {0: 5}, ok=False)
        c.t += 100_000_000          # the load happens in this gap
        _fetch(h, {0: 5})           # the baseline after the load
        _fetch(h, {0: 5})
        _fetch(h, {0: 8})           # a commit landed: this is the first commit
        h.nemesis("kill", {"fault": 1, "phase": "start", "kind": "kill", "target": "app:1", "nodes": ["app1"]})
    ops = _history(tmp_path, build)
    t0 = ops[2]["time"]
    events = [{"type": "partition_state_written", "broker": 3, "topic": "__consumer_offsets", "partition": P,
               "leader": 1, "leader_epoch": 0, "mono_ns": 1},
              {"type": "broker_change", "broker": 3, "dead": [1], "mono_ns": t0 + 10},
              {"type": "partition_state_written", "broker": 3, "topic": "__consumer_offsets", "partition": P,
               "leader": 2, "leader_epoch": 1, "reason": "broker_failure", "mono_ns": t0 + 20},
              _loaded(t0 + 50_000_000)]
    rows = failover_timeline(ops, events, offsets_partitions=N, observed_groups=[GROUP])
    row, = [r for r in rows if r["fault"] == 0]
    commit_done = ops[-2]["time"]
    assert row["moved"] and row["first_commit_ms"] == round((commit_done - t0) / 1e6, 3)
    assert row["unavailable_ms"] is not None and row["unavailable_ms"] > 0
    assert not [r for r in rows if r["fault"] == 1]   # the app's own fault hit no broker (nor ZooKeeper)
    plain = failover_timeline(ops, events, offsets_partitions=N)
    assert [r for r in plain if r["fault"] == 0][0]["first_commit_ms"] is None
