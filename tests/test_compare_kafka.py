"""The reduced differential set (the `kafka` tier): one short scenario, a coordinator SIGKILL, a topic created and
deleted, a controller SIGKILL (in that order: with the controller killed last, no election is a race whose
winner decides what comes next), run on kafkasim and on Kafka 2.8.2 (one after the other, each on a ZooKeeper of
its own), and compared as `kafkasim compare` does.  It fails on any difference docs/deviations.md does not list.

The full set is `kafkasim compare all` (docs/compare.md), a command that prints its own summary.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from compare.diff import KNOWN, compare, report, scenario_known, unlisted
from compare.normalize import entries
from compare.runner import run_side
from compare.scenario import parse_compare
from compare.sides import pick_ports

pytestmark = [pytest.mark.kafka, pytest.mark.cluster, pytest.mark.timeout(420)]

SCENARIO = """
name: compare-smoke
description: the kafka tier's reduced differential run
cluster:
  brokers: 3
  controller: 1
  config: {zookeeper.session.timeout.ms: 4000}
topics:
  - {name: __consumer_offsets, replicas: [[1, 2, 3], [2, 3, 1], [3, 1, 2]]}
  - {name: events, replicas: [[1, 2, 3], [2, 3, 1], [3, 1, 2]]}
settle.ms: 1000
steps:
  - produce 3 to events
  - join group g1 to events with range members 1     # g1's coordinator: broker 3 (__consumer_offsets-2)
  - commit group g1
  - kill coordinator:g1                              # broker 3: the controller (1) moves its leaderships
  - produce 3 to events
  - commit group g1                                  # at the new coordinator, broker 1
  - create topic t1 2 rf 2
  - delete topic t1
  - kill controller                                  # broker 1: broker 2, the last one, takes over
  - produce 3 to events
  - commit group g1                                  # at broker 2
"""


def test_a_reduced_differential_run_finds_no_unlisted_difference(tmp_path: Path) -> None:
    scenario = parse_compare(yaml.safe_load(SCENARIO), "compare-smoke")
    ports = pick_ports(scenario.base.brokers)
    lines: list[str] = []
    obs = {side: run_side(scenario, side, tmp_path, ports, say=lines.append) for side in ("kafkasim", "kafka")}
    assert {side: o["error"] for side, o in obs.items()} == {"kafkasim": None, "kafka": None}, "\n".join(lines)
    assert all(s.get("settled", True) for o in obs.values() for s in o["steps"])
    kafka, kafkasim = entries(obs["kafka"]), entries(obs["kafkasim"])
    diffs = compare(kafka, kafkasim, KNOWN + scenario_known(scenario))
    assert not unlisted(diffs), report(diffs, kafka, kafkasim)
    # the run saw what it is about, on both sides: broker 3 left events-0's ISR (a new epoch), then the dead
    # controller's partition was first without a leader and then elected (Kafka's failover: OfflineReplica,
    # then the election), and the member committed at each new coordinator
    for es in (kafka, kafkasim):
        states = [e.value for e in es if e.stream == "zk /brokers/topics/events/partitions/0/state"]
        assert [(s["leader"], s["leader_epoch"], s["isr"]) for s in states] == [
            (1, 0, [1, 2, 3]), (1, 1, [1, 2]), (-1, 2, [2]), (2, 3, [2])]
        commits = [e.value[1] for e in es if e.stream == "member g1/1" and e.value[0] == "committed"]
        assert commits == [{f"events/{p}": n for p in range(3)} for n in (3, 6, 9)]
