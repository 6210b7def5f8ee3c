"""The simulator against Kafka 2.8.2 (the `kafka` tier): compare's `controller-kill` scenario run on real Kafka
2.8.2 brokers (compare/runner.py, the Kafka side only) and in the simulator, their ZooKeeper streams compared as
`kafkasim sim fidelity --compare` does.  It fails on any difference docs/deviations.md does not list."""
from __future__ import annotations

from pathlib import Path

import pytest

from compare.diff import streams
from compare.scenario import find_compare, load_compare
from sim.compare_fidelity import three_sides, zk_side

pytestmark = [pytest.mark.kafka, pytest.mark.cluster, pytest.mark.timeout(300)]


def test_the_simulators_zookeeper_writes_match_kafka_282s_for_a_controller_kill(tmp_path: Path) -> None:
    scenario = load_compare(find_compare("controller-kill"))
    lines: list[str] = []
    result = three_sides(scenario, tmp_path, seed=1, say=lines.append)
    assert {s: o["error"] for s, o in result.observations.items()} == {"kafka": None, "sim": None}, "\n".join(lines)
    assert all(s["settled"] for o in result.observations.values() for s in o["steps"])
    [pair] = result.pairs
    assert pair.real == "kafka" and result.unlisted() == 0, pair.text
    # the run saw what it is about, on both sides: the controller died (step 4), a survivor took over, the dead
    # leader's partitions went leaderless and were then elected; the restarted broker (step 7) came back
    for obs in result.observations.values():
        es = streams(zk_side(obs, scenario))
        assert [(e.phase, e.value["brokerid"]) for e in es["zk /controller"] if e.value] == [(0, "c1"), (4, "c2")]
        states = [(e.phase, e.value["leader"], e.value["leader_epoch"], e.value["isr"])
                  for e in es["zk /brokers/topics/events/partitions/0/state"]]
        assert states == [(0, 1, 0, [1, 2, 3]), (4, -1, 1, [2, 3]), (4, 2, 2, [2, 3]), (7, 2, 2, [2, 3, 1])]
        assert [e.phase for e in es["zk /brokers/ids/1"]] == [0, 4, 7]
