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


def produce(c: SimCluster, w: World, tp: tuple[str, int], n: int) -> list[int]:
    """``n`` acks=all appends to the partition's leader, one after another -> their offsets."""
    got: list[int] = []
    for i in range(n):
        leader = c.brokers[c.zk_view()[2][tp]["leader"]]
        leader.replicas.append(tp, [(None, b"v%d" % i)], -1, 5000, lambda code, base: got.append(
            base if code == errors.NONE else -1))
        settle(w, lambda: len(got) == i + 1)
    return got


def test_the_simulator_reassigns_a_partition_and_elects_on_request() -> None:
    """The controller's reassignment steps (phases U, A, B through controller/handlers.py and ControllerCore) and
    ElectLeaders' preferred and unclean elections, on the simulated cluster: the partition moves from brokers 1
    and 2 to 3 and 4 with every acknowledged record, the old replicas are stopped and deleted."""
    w = World(12)
    c = SimCluster(w, SimConfig(brokers=4, offsets_partitions=2))
    c.start()
    settle(w, lambda: c.zk_view()[1] is not None and led(c, "__consumer_offsets", 2)())
    c.create_topic("t", 1, 2, replicas=((1, 2),))
    settle(w, led(c, "t", 1))
    tp = ("t", 0)
    assert produce(c, w, tp, 5) == [0, 1, 2, 3, 4]
    code, results = c.alter_reassignments({tp: [3, 4], ("t", 9): [1]})
    assert code == errors.NONE and results[tp] == (errors.NONE, None)
    assert results[("t", 9)] == (errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
    assert c.list_reassignments()[1] in ({tp: ((3, 4, 1, 2), (3, 4), (1, 2))}, {})   # may complete quickly

    def done() -> bool:
        part = c.zk_view()[2].get(tp, {})
        return part.get("replicas") == [3, 4] and sorted(part.get("isr", [])) == [3, 4] and not c.list_reassignments()[1]
    settle(w, done)
    kinds = [e["type"] for e in c.merged_events() if e.get("topic") == "t" and e["type"].startswith("reassignment")]
    assert kinds == ["reassignment_started", "reassignment_completed"]
    leader = c.brokers[c.zk_view()[2][tp]["leader"]]
    assert leader.id == 3 and leader.replicas.read_committed(tp, 0)[2] == [(i, None, b"v%d" % i) for i in range(5)]
    settle(w, lambda: all(tp not in c.brokers[b].replicas.hosted and tp not in c.brokers[b].disk.logs for b in (1, 2)))
    assert produce(c, w, tp, 2) == [5, 6]
    # a preferred election where the preferred replica leads: not needed
    assert c.elect_leaders([tp], 0) == {tp: (errors.ELECTION_NOT_NEEDED,
                                             errors.message(errors.ELECTION_NOT_NEEDED), -1)}
    # the ISR's only member gone: offline (unclean elections are off) until an unclean election on request
    c.brokers[4].crash()
    settle(w, lambda: c.zk_view()[2][tp]["isr"] == [3])
    c.brokers[3].crash()
    settle(w, lambda: c.zk_view()[2][tp]["leader"] == -1)
    seen = len(events(c, "broker_change"))
    c.start(only=4)
    settle(w, lambda: any(4 in e["new"] + e["bounced"] for e in events(c, "broker_change")[seen:]))
    assert c.zk_view()[2][tp]["leader"] == -1
    assert c.elect_leaders([tp], 1) == {tp: (errors.NONE, None, 4)}
    settle(w, lambda: c.zk_view()[2][tp]["leader"] == 4 and c.zk_view()[2][tp]["isr"] == [4])
    assert [e for e in events(c, "unclean_leader_election") if e["topic"] == "t"]


def test_a_new_simulated_controller_completes_a_reassignment_its_predecessor_started() -> None:
    """The controller crashes right after answering AlterPartitionReassignments (no virtual time passes: the
    new replica has not even been told yet); the next controller finds the reassignment in the topic znode's
    adding and removing replicas, goes on with it and completes it, with every acknowledged record."""
    w = World(13)
    c = SimCluster(w, SimConfig(brokers=4, offsets_partitions=2))
    c.start()
    settle(w, lambda: c.zk_view()[1] is not None and led(c, "__consumer_offsets", 2)())
    c.create_topic("r", 1, 2, replicas=((1, 2),))
    settle(w, led(c, "r", 1))
    tp = ("r", 0)
    assert produce(c, w, tp, 4) == [0, 1, 2, 3]
    old = c.zk_view()[1]
    target = [b for b in (3, 4, 1, 2) if b != old][:2]
    code, results = c.alter_reassignments({tp: target})
    assert code == errors.NONE and results[tp] == (errors.NONE, None)
    c.brokers[old].crash()

    def done() -> bool:
        part = c.zk_view()[2].get(tp, {})
        return part.get("replicas") == target and sorted(part.get("isr", [])) == sorted(target)
    settle(w, done, 60_000)
    (started,) = [e for e in events(c, "reassignment_started") if e["topic"] == "r"]
    completed = [e for e in events(c, "reassignment_completed") if e["topic"] == "r"]
    assert started["broker"] == old and completed and completed[-1]["broker"] != old
    assert completed[-1]["controller_epoch"] > started["controller_epoch"]
    leader = c.brokers[c.zk_view()[2][tp]["leader"]]
    settle(w, lambda: leader.replicas.read_committed(tp, 0)[1] == 4)
    assert leader.replicas.read_committed(tp, 0)[2] == [(i, None, b"v%d" % i) for i in range(4)]
