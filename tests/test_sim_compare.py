"""A compare scenario in the simulator (sim/compare_run.py) and the third side of ``sim fidelity --compare``
(sim/compare_fidelity.py): the simulated ZooKeeper's transaction log (``ZkModel.on_write``), the step driver on
small scenarios, what it refuses, and the pairwise comparison read from a compare run's directory.  Unit tier:
virtual time only (each run is a fraction of a second); tests/test_sim_compare_kafka.py runs Kafka 2.8.2."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cli.main import main
from compare.diff import Difference, unlisted
from compare.normalize import Entry, Labels, zk_entries
from compare.scenario import find_compare, load_compare, parse_compare
from sim.compare_fidelity import SIM_KNOWN, compare_with_sim, three_sides
from sim.compare_run import UNSUPPORTED, SimCompareError, SimCompareRun, check
from sim.zk_model import Create, SetData, ZkModel

ROOT = Path(__file__).resolve().parent.parent


def _scenario(steps: list[str], **extra) -> object:
    doc = {"name": "tiny", "cluster": {"brokers": 3, "controller": 1, **extra.pop("cluster", {})},
           "topics": [{"name": "__consumer_offsets", "replicas": [[1, 2, 3], [2, 3, 1], [3, 1, 2]]},
                      {"name": "events", "replicas": [[1, 2, 3], [2, 3, 1]]}],
           "settle.ms": 500, "steps": steps, **extra}
    return parse_compare(doc, "tiny")


# ---------------------------------------------------------------------------- the model's transaction log

def test_the_model_reports_each_committed_write_once_with_its_zxid_and_nothing_for_a_failed_one() -> None:
    m = ZkModel(tick_ms=100)
    got: list[tuple] = []
    m.on_write = lambda *w: got.append(w)
    sid, _ = m.connect(0, 4000)
    m.create(sid, "/a", b"1", makepath=False)
    m.set(sid, "/a", b"2")
    with pytest.raises(Exception):
        m.set(sid, "/a", b"3", version=7)                # BadVersion: a zxid spent, nothing written
    m.create(sid, "/a/e", b"x", ephemeral=True)
    m.multi(sid, [Create("/b", b"0"), SetData("/b", b"9"), SetData("/a", b"4")])
    m.multi(sid, [Create("/c", b""), SetData("/nope", b"")])   # rolled back: no write
    m.expire(sid, 10_000)
    # the parent's child list and counters are not writes (ZooKeeper's log has none for them)
    assert got == [(2, "/a", b"1", True), (3, "/a", b"2", False), (5, "/a/e", b"x", True),
                   (6, "/b", b"9", True), (6, "/a", b"4", False), (8, "/a/e", None, False)]


def test_without_a_listener_the_model_runs_as_before() -> None:
    def run(listen: bool) -> tuple:
        m = ZkModel(tick_ms=100)
        if listen:
            m.on_write = lambda *w: None
        sid, _ = m.connect(0, 4000)
        m.create(sid, "/x/y", b"1", makepath=True)
        m.set(sid, "/x/y", b"2")
        return m.zxid, sorted(m.nodes), m.get(sid, "/x/y")[0][1]
    assert run(True) == run(False)


# ---------------------------------------------------------------------------- the step driver

def test_a_controller_kill_in_the_simulator_is_recorded_as_compare_reads_a_real_side() -> None:
    s = _scenario(["produce 3 to events", "kill controller", "start broker:1", "wait isr full"])
    obs = SimCompareRun(s, seed=3).run()
    assert obs["error"] is None
    assert [st["index"] for st in obs["steps"]] == [0, 1, 2, 3, 4] and all(st["settled"] for st in obs["steps"])
    assert obs["steps"][1]["outcome"] == {"events/0": {"error": None, "base_offset": 0},
                                          "events/1": {"error": None, "base_offset": 0}}
    starts = [st["start_ms"] for st in obs["steps"]]
    assert starts == sorted(starts) and all(st["end_ms"] - st["start_ms"] >= 500 for st in obs["steps"])
    es = {}
    for e in zk_entries(obs, Labels(obs)):
        es.setdefault(e.stream, []).append((e.phase, e.value))
    # broker 1 (the controller) leaves at the kill (phase 2) and registers again at its start (phase 3)
    assert [(p, v is None) for p, v in es["zk /brokers/ids/1"]] == [(0, False), (2, True), (3, False)]
    assert [(p, v["brokerid"]) for p, v in es["zk /controller"] if v] == [(0, "c1"), (2, "c2")]
    assert [p for p, v in es["zk /controller"] if v is None] == [2]
    # Kafka's failover: the dead broker's partition first leaderless, then elected; then it rejoins the ISR
    states = [(p, v["leader"], v["leader_epoch"], v["isr"]) for p, v in es["zk /brokers/topics/events/partitions/0/state"]]
    assert states[0] == (0, 1, 0, [1, 2, 3])
    assert [x[1:3] for x in states[1:3]] == [(-1, 1), (2, 2)] and {x[0] for x in states[1:3]} == {2}
    assert states[-1][0] == 3 and sorted(states[-1][3]) == [1, 2, 3]
    ids = json.loads(next(w["data"] for w in obs["zk"] if w["path"] == "/brokers/ids/2"))
    assert ids["endpoints"] == ["PLAINTEXT://127.0.0.1:19002"] and es["zk /brokers/ids/2"][0][1]["port"] == "<kafka:2>"


def test_a_group_joins_and_commits_and_a_paused_broker_and_an_expired_session_are_driven() -> None:
    s = _scenario(["join group g1 to events with range members 2", "commit group g1", "pause broker:3 for 1s",
                   "expire session broker:2", "wait isr full"], cluster={"config": {"zookeeper.session.timeout.ms": 4000}})
    obs = SimCompareRun(s, seed=1).run()
    assert obs["error"] is None, obs["steps"][-1]
    commit = obs["steps"][2]["outcome"]
    assert sorted(commit) == ["g1/1", "g1/2"] and all(v == ("ok", None) for v in commit.values())
    ids2 = [w for w in obs["zk"] if w["path"] == "/brokers/ids/2"]
    phase4 = next(st["start_ms"] for st in obs["steps"] if st["index"] == 4)
    assert [w["data"] is None for w in ids2 if w["time_ms"] >= phase4] == [True, False]   # expired, back


def test_the_same_seed_records_the_same_writes() -> None:
    s = _scenario(["produce 2 to events", "kill broker:2", "start broker:2"])
    a, b = SimCompareRun(s, seed=5).run(), SimCompareRun(s, seed=5).run()
    assert a["zk"] == b["zk"] and a["steps"] == b["steps"]


def test_a_step_or_setting_the_simulator_cannot_do_is_refused_by_name() -> None:
    with pytest.raises(SimCompareError, match=r"step 2 'terminate broker:2': not in the simulator: .*controlled"):
        check(_scenario(["produce 1 to events", "terminate broker:2"]))
    with pytest.raises(SimCompareError, match=r"java"):
        check(_scenario(["join group g to events members 1 java"]))
    with pytest.raises(SimCompareError, match=r"cluster.config.leader.imbalance.check.interval.seconds"):
        check(_scenario(["wait 1s"], cluster={"config": {"leader.imbalance.check.interval.seconds": 5}}))
    unpinned = parse_compare({"name": "u", "cluster": {"brokers": 3},
                              "topics": [{"name": "__consumer_offsets", "replicas": [[1, 2, 3]]},
                                         {"name": "events", "partitions": 2}], "steps": ["wait 1s"]}, "u")
    with pytest.raises(SimCompareError, match=r"events has no replicas given"):
        check(unpinned)
    assert set(UNSUPPORTED) == {"terminate", "create", "delete", "partitions", "config", "metadata", "add", "leave",
                                "restart"}


def test_which_shipped_scenarios_run_in_the_simulator() -> None:
    runs, refused = [], []
    for f in sorted((ROOT / "scenarios" / "compare").glob("*.yaml")):
        try:
            check(load_compare(f))
            runs.append(f.stem)
        except SimCompareError:
            refused.append(f.stem)
    # docs/simulation.md lists the same
    assert runs == ["acks-all-min-isr", "controller-kill", "coordinator-kill", "coordinator-pause", "follower-lag",
                    "preferred-api", "reassignment", "session-expire", "unclean-off", "unclean-on"]
    doc = (ROOT / "docs" / "simulation.md").read_text()
    for name in runs + refused:
        assert f"`{name}`" in doc, name


# ---------------------------------------------------------------------------- the comparison

def _E(stream: str, value) -> Entry:
    return Entry(stream, 0, value)


def test_the_simulators_own_listed_differences_cover_the_root_and_nothing_else() -> None:
    def diff(stream, a, b) -> Difference:
        return Difference(stream, 0, _E(stream, a) if a is not None else None, _E(stream, b) if b is not None else None,
                          None)
    assert any(k.covers(diff("zk /", "", None)) for k in SIM_KNOWN)
    assert any(k.covers(diff("zk-paths", ["/", "/a"], ["/a"])) for k in SIM_KNOWN)
    assert not any(k.covers(diff("zk-paths", ["/", "/a", "/b"], ["/a"])) for k in SIM_KNOWN)
    assert not any(k.covers(diff("zk /controller", {"brokerid": "c1"}, None)) for k in SIM_KNOWN)
    page = (ROOT / "docs" / "deviations.md").read_text()
    assert all(f"## {k.where}" in page for k in SIM_KNOWN)


def test_three_sides_reads_a_compare_run_and_compares_the_simulator_with_it(tmp_path: Path) -> None:
    s = load_compare(find_compare("controller-kill"))
    real = SimCompareRun(s, seed=1).run()
    d = tmp_path / "runs" / s.name / "kafka"
    d.mkdir(parents=True)
    (d / "observations.json").write_text(json.dumps(real))
    out = tmp_path / "out"
    r = three_sides(s, out, seed=1, from_dir=tmp_path / "runs")
    assert [p.real for p in r.pairs] == ["kafka"] and r.unlisted() == 0 and r.pairs[0].diffs == []
    assert "SAME: " in r.text and json.loads((out / "fidelity.json").read_text())["pairs"][0]["unlisted"] == 0
    assert (out / "sim" / "observations.json").exists()
    # with --kafkasim the simulator is compared with each real side, each pair on its own
    d2 = tmp_path / "runs" / s.name / "kafkasim"
    d2.mkdir()
    (d2 / "observations.json").write_text(json.dumps(SimCompareRun(s, seed=2).run()))
    r2 = three_sides(s, tmp_path / "out2", seed=1, from_dir=tmp_path / "runs", kafkasim=True)
    assert [p.row()["pair"] for p in r2.pairs] == ["sim vs kafka", "sim vs kafkasim"] and r2.unlisted() == 0
    # a real side whose controller did not move: the simulator's failover is a difference, unlisted
    moved = dict(real, zk=[w for w in real["zk"] if not (w["path"] == "/controller" and w["data"] and '"brokerid":3' in w["data"])])
    pair = compare_with_sim(s, "kafka", moved, real)
    assert "zk /controller" in [d.stream for d in unlisted(pair.diffs)]
    assert "\n    kafka: " in pair.text and "\n    sim:   " in pair.text


def test_the_command_refuses_a_scenario_it_cannot_run_and_a_missing_side(tmp_path: Path, capsys) -> None:
    assert main(["sim", "fidelity", "--compare", "controlled-shutdown", "--out", str(tmp_path / "a")]) == 3
    assert "step 4 'terminate broker:2': not in the simulator" in capsys.readouterr().err
    assert main(["sim", "fidelity", "--compare", "controller-kill", "--from", str(tmp_path / "none"),
                 "--out", str(tmp_path / "b")]) == 3
    assert "no kafka run of controller-kill" in capsys.readouterr().err
    assert main(["sim", "fidelity", "--out", str(tmp_path / "c")]) == 3
