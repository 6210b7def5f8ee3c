"""The simulator runs the controller's new steps through the same cores: partitions added to a topic's znode
are elected by the controller's partition-modification watch (controller/handlers.py, ControllerCore), and a
config change notification reaches every simulated broker, whose replication core enforces it."""
from __future__ import annotations

from typing import Callable

from kafkacommon import errors
from sim.broker import SimConfig
from sim.cluster import SimCluster
from sim.world import World


def settle(w: World, cond: Callable[[], bool], timeout_ms: float = 20_000) -> None:
    end = w.now_ms + timeout_ms
    while w.now_ms < end and not cond():
        w.run_until(w.now_ms + 50)
    assert cond(), "the simulated cluster did not get there"


def led(c: SimCluster, topic: str, n: int) -> Callable[[], bool]:
    def check() -> bool:
        parts = c.zk_view()[2]
        return all(parts.get((topic, p), {}).get("leader", -1) >= 0 for p in range(n))
    return check


def events(c: SimCluster, kind: str) -> list[dict]:
    return [e for e in c.merged_events() if e["type"] == kind]


def test_the_simulator_adds_partitions_and_applies_a_config_change() -> None:
    w = World(11)
    c = SimCluster(w, SimConfig(brokers=3, offsets_partitions=2))
    c.start()
    settle(w, lambda: c.zk_view()[1] is not None and led(c, "__consumer_offsets", 2)())
    c.create_topic("t", 2, 3, config={"min.insync.replicas": "2"})
    settle(w, led(c, "t", 2))
    added = c.add_partitions("t", 4)
    assert sorted(added) == [2, 3] and all(len(r) == 3 for r in added.values())
    settle(w, led(c, "t", 4))
    (ev,) = [e for e in events(c, "partitions_added") if e["topic"] == "t"]
    assert ev["partitions"] == [2, 3] and ev["partition_count"] == 4
    # every broker hosting a new partition was told (LeaderAndIsr) and leads or follows it
    parts = c.zk_view()[2]
    for p in (2, 3):
        for b in parts[("t", p)]["replicas"]:
            assert ("t", p) in c.brokers[b].replicas.hosted
    # a config change: every broker applies it, and the leader's replication core refuses acks=all at once
    leader = c.brokers[parts[("t", 3)]["leader"]]
    assert leader.replicas.hosted[("t", 3)].repl.settings.min_insync_replicas == 2   # read when first hosted
    c.alter_topic_config("t", {"min.insync.replicas": "4"})
    settle(w, lambda: {e["broker"] for e in events(c, "config_changed") if e["entity_name"] == "t"} == {1, 2, 3})
    got: list[int] = []
    leader.replicas.append(("t", 3), [(None, b"v")], -1, 5000, lambda code, base: got.append(code))
    assert got == [errors.NOT_ENOUGH_REPLICAS]
    c.alter_topic_config("t", {"min.insync.replicas": "3"})
    settle(w, lambda: leader.replicas.hosted[("t", 3)].repl.settings.min_insync_replicas == 3)
    leader.replicas.append(("t", 3), [(None, b"v")], -1, 5000, lambda code, base: got.append(code))
    settle(w, lambda: len(got) == 2)
    assert got[1] == errors.NONE
