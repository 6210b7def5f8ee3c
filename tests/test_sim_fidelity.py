"""The fidelity check (issue 33, item 7): scenarios/fidelity.yaml on real processes and in the simulator gives
the same controllers, controller epochs, leaders, leader epochs, ISRs and coordinator moves.

The unit tests check the extraction and the comparison on hand-made event lines, and the scenario's
settings reaching the simulator; one chaos-tier test runs the scenario both ways and compares."""
from __future__ import annotations

import io

import pytest
import yaml

from chaos.scenario import SCENARIO_DIR, ScenarioError, load_scenario, parse_scenario
from sim import scenario as sim_scenario
from sim.fidelity import compare, report, run_both, sequence_of

FIDELITY = SCENARIO_DIR / "fidelity.yaml"


def _ev(t_ms: float, broker: int, type_: str, **fields) -> dict:
    return {"mono_ns": int(t_ms * 1e6), "broker": broker, "type": type_, **fields}


def _write(t_ms, broker, topic, p, reason, leader, epoch, isr) -> dict:
    return _ev(t_ms, broker, "partition_state_written", topic=topic, partition=p, reason=reason, leader=leader,
               leader_epoch=epoch, isr=isr)


def _nemesis(t_ms: float, f: str, value: dict) -> dict:
    return {"time": int(t_ms * 1e6), "process": "nemesis", "type": "info", "f": f, "value": value}


def _run(controller_after_kill: int, expand_isr: list[int]) -> tuple[list, list]:
    ops = [{"time": 1, "process": 0, "type": "invoke", "f": "join", "group": "g1"},
           _nemesis(1000, "kill", {"fault": 0, "phase": "start", "kind": "kill", "target": "controller",
                                   "nodes": [1]}),
           _nemesis(5000, "heal", {"fault": 0, "phase": "heal", "kind": "kill", "target": "controller",
                                   "nodes": [1]}),
           _nemesis(9000, "end", {"phase": "end"})]
    events = [_ev(0, 1, "controller_elected", epoch=1),
              _write(10, 1, "__consumer_offsets", 0, "new_partition", 1, 0, [1, 2, 3]),
              _ev(11, 1, "coordinator_loaded", partition=0, leader_epoch=0),
              _write(12, 1, "events", 0, "new_partition", 2, 0, [2, 3, 1]),
              _ev(3000, controller_after_kill, "controller_elected", epoch=2),
              _write(3001, controller_after_kill, "__consumer_offsets", 0, "offline_election", 2, 1, [2, 3]),
              _ev(3002, 2, "coordinator_loaded", partition=0, leader_epoch=1),
              _write(3003, controller_after_kill, "events", 0, "isr_shrink_dead_replica", 2, 1, [3, 2]),
              _write(6000, controller_after_kill, "events", 0, "isr_expand", 2, 1, expand_isr),
              _write(9500, controller_after_kill, "events", 0, "controlled_shutdown", 3, 2, [3])]   # after end
    return ops, sorted(events, key=lambda e: e["mono_ns"])


def test_the_sequence_has_each_stream_with_its_phase_relabels_controllers_and_stops_at_the_end_mark() -> None:
    steps = sequence_of(*_run(controller_after_kill=3, expand_isr=[3, 2, 1]))
    by = {}
    for s in steps:
        by.setdefault(s.stream, []).append((s.phase, s.what))
    assert by["faults"] == [(0, (0, "kill", "controller", (1,), None))]
    assert by["controller"] == [(-1, (1, "c1")), (0, (2, "c2"))]          # broker 3 is the second controller
    assert by["coordinator g1"] == [(-1, (1, 0)), (0, (2, 1))]
    assert by["events/0"] == [(-1, ("new_partition", 2, 0, (1, 2, 3))),
                              (0, ("isr_shrink_dead_replica", 2, 1, (2, 3))),
                              (0, ("isr_expand", 2, 1, (1, 2, 3)))]       # ISRs as sets; nothing after end


def test_which_survivor_wins_the_controller_race_is_not_a_difference_but_an_isr_is() -> None:
    real = sequence_of(*_run(controller_after_kill=3, expand_isr=[3, 2, 1]))
    assert compare(real, sequence_of(*_run(controller_after_kill=2, expand_isr=[2, 3, 1]))) == []
    sim = sequence_of(*_run(controller_after_kill=2, expand_isr=[3, 2]))
    diffs = compare(real, sim)
    assert [(d.stream, d.index) for d in diffs] == [("events/0", 2)]
    text = report(real, sim, diffs)
    assert "DIFFERENT in 1 stream(s); the first difference:" in text
    assert "real:   #0  events/0" in text and "isr [1, 2, 3]" in text and "isr [2, 3]" in text
    assert "after:   #0  events/0                 isr_shrink_dead_replica" in text


def test_the_fidelity_scenario_pins_ids_and_its_settings_reach_the_simulator() -> None:
    sc = load_scenario(FIDELITY)
    assert sc.controller == 1
    assert {t.name: t.replicas for t in sc.topics} == {"__consumer_offsets": ((3, 2, 1),),
                                                       "events": ((1, 2, 3), (1, 3, 2))}
    opts = sim_scenario.load(FIDELITY)
    lag, session = sc.cluster_config["replica.lag.time.max.ms"], sc.cluster_config["zookeeper.session.timeout.ms"]
    assert opts.config == {"session_timeout_ms": session, "replica_lag_time_max_ms": lag}
    assert opts.controller == 1 and opts.offsets_partitions == 1 and opts.assignments["events"] == ((1, 2, 3), (1, 3, 2))
    pause = next(f for f in opts.schedule if f.kind == "pause")
    assert lag < pause.heal_at_ms - pause.at_ms < session   # the pause tests the lag rule, not the session


def test_bad_pins_are_errors_naming_the_key() -> None:
    base = {"name": "x", "cluster": {"brokers": 3}, "topics": [{"name": "events", "replicas": [[1, 2, 4]]}]}
    with pytest.raises(ScenarioError, match=r"topics\[0\]\.replicas: partition 0: \[1, 2, 4\]: broker ids are 1..3"):
        parse_scenario(base)
    with pytest.raises(ScenarioError, match=r"topics\[0\]\.name: __consumer_offsets is listed only with"):
        parse_scenario({**base, "topics": [{"name": "__consumer_offsets", "partitions": 3}]})
    with pytest.raises(ScenarioError, match=r"cluster\.controller: 4 is above 3"):
        parse_scenario({**base, "cluster": {"brokers": 3, "controller": 4}, "topics": []})
    doc = {"name": "x", "topics": [{"name": "events"}], "faults": {"schedule": []}, "workload": {"producers": {"count": 0}},
           "cluster": {"config": {"log.retention.ms": 1000}}}
    with pytest.raises(sim_scenario.SimScenarioError, match=r"cluster\.config\.log\.retention\.ms: not taken"):
        sim_scenario.parse(doc)


def test_a_groups_member_settings_reach_the_simulator_and_differing_groups_are_refused() -> None:
    group = {"topic": "events", "members": 3, "session.timeout.ms": 4000, "heartbeat.interval.ms": 500,
             "commit.interval.ms": 300}
    doc = {"name": "x", "topics": [{"name": "events"}], "faults": {"schedule": []},
           "workload": {"producers": {"count": 0}, "groups": [{"id": "g1", **group}, {"id": "g2", **group}]}}
    opts = sim_scenario.parse(doc)
    assert (opts.groups, opts.members, opts.session_timeout_ms, opts.heartbeat_interval_ms,
            opts.commit_interval_ms) == (2, 3, 4000, 500, 300)
    doc["workload"]["groups"][1]["session.timeout.ms"] = 5000
    with pytest.raises(sim_scenario.SimScenarioError, match=r"workload\.groups\[1\]: the simulator's groups share"):
        sim_scenario.parse(doc)


def test_a_chaos_scenarios_log_dirs_and_disk_faults_reach_the_simulator_and_round_trip() -> None:
    from chaos.schedule import Fault
    doc = {"name": "x", "topics": [{"name": "events"}], "cluster": {"log.dirs": 2},
           "workload": {"producers": {"count": 0}},
           "faults": {"schedule": [{"at.ms": 1000, "heal.at.ms": 2000, "kind": "disk-full", "target": "random"}]}}
    opts = sim_scenario.parse(doc)
    assert opts.config == {"log_dirs": 2} and [f.kind for f in opts.schedule] == ["disk-full"]
    again = sim_scenario.parse(yaml.safe_load(sim_scenario.dump(opts, opts.schedule)))   # the chaos form
    assert again.config == {"log_dirs": 2}
    own = sim_scenario.dump(opts, [Fault(0, 1000, 2000, "slow-disk", "random", 1, latency_ms=50)])   # the sim's form
    assert sim_scenario.parse(yaml.safe_load(own)).config == {"log_dirs": 2}
    with pytest.raises(sim_scenario.SimScenarioError, match="log_dirs"):
        sim_scenario.parse({"log_dirs": 0})


@pytest.mark.chaos
@pytest.mark.cluster
def test_the_fidelity_scenario_gives_the_same_sequence_on_real_processes_and_in_the_simulator(tmp_path) -> None:
    printed = io.StringIO()
    real, sim, verdicts = run_both(FIDELITY, tmp_path, seed=1, stream=printed)
    diffs = compare(real, sim)
    assert diffs == [], report(real, sim, diffs) + "\n" + printed.getvalue()[-3000:]
    assert verdicts == {"real": "valid", "sim": "valid"}, printed.getvalue()[-3000:]
    # the scenario did what it is for: the pause shrank ISRs by the lag rule (the leaders' AlterIsr, not the
    # controller's dead-replica rule), the coordinator moved, and a second controller took over
    whats = {(s.stream, s.phase, s.what[0] if s.stream != "controller" else s.what[1]) for s in real}
    assert ("events/0", 0, "isr_shrink") in whats and ("events/0", 0, "isr_expand") in whats
    assert ("coordinator g1", 1, 2) in whats
    assert ("controller", 2, "c2") in whats and ("events/1", 2, "offline_election") in whats


def test_sim_fidelity_refuses_an_unknown_scenario_and_a_used_directory(tmp_path, capsys) -> None:
    from cli.main import main
    assert main(["sim", "fidelity", "no-such-scenario", "--out", str(tmp_path / "a")]) == 3
    assert "no scenario 'no-such-scenario'" in capsys.readouterr().err
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("")
    assert main(["sim", "fidelity", "fidelity", "--out", str(tmp_path / "b")]) == 3
    assert "already exists and is not empty" in capsys.readouterr().err
