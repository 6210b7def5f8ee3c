"""Consumer groups on real brokers: assignors, rebalances, and coordinator failover."""
from __future__ import annotations

import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc

from client.admin import GroupAdmin
from client.assignors import CooperativeStickyAssignor
from client.group import GroupMember
from client.metadata import ClientError, ClusterClient
from client.protocol import Subscription
from client.producer import Producer
from kafkacommon.hashing import partition_for
from helpers import events
from kafkacommon import errors
from zk.admin import create_topic
from util.waiting import wait_for
from proto import groups_pb2 as gpb
from proto import groups_pb2_grpc as gpbg

FAST_GROUPS = {"group.min.session.timeout.ms": 500, "group.initial.rebalance.delay.ms": 200}


def client(cluster) -> ClusterClient:
    """A client with metadata: the brokers get theirs from the controller just after the cluster is up."""
    cc = ClusterClient([f"{b.host}:{b.port}" for b in cluster.cfg.brokers])

    def refreshed():
        try:
            return cc.refresh()
        except ClientError:
            return None

    wait_for(refreshed, 30, "a broker with metadata")
    return cc


def member(cluster, group: str, client_id: str, assignor: str = "range", **kw) -> GroupMember:
    kw.setdefault("session_timeout_ms", 3000)
    kw.setdefault("heartbeat_interval_ms", 300)
    return GroupMember(client(cluster), group, ["t"], client_id=client_id, assignors=[assignor], **kw)


class Consumers:
    """Members polling in their own threads, as separate consumer processes would."""

    def __init__(self, *members: GroupMember, commit: bool = False) -> None:
        self.threads: dict[str, tuple[GroupMember, threading.Event, threading.Thread]] = {}
        self.commit = commit
        self.acked: dict[tuple[str, int], int] = {}  # the offsets the coordinators acknowledged
        self.last_ack: tuple[int, float] | None = None  # (coordinator, time.monotonic())
        for m in members:
            self.add(m)

    def add(self, m: GroupMember) -> None:
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                try:
                    m.poll(50)
                    if self.commit and (offsets := m.positions()):
                        m.commit(offsets)
                        self.acked.update(offsets)  # only after the coordinator acknowledged them
                        self.last_ack = (m.coordinator[0] if m.coordinator else -1, time.monotonic())
                except Exception:
                    stop.wait(0.05)  # retried by the next poll
        t = threading.Thread(target=loop, daemon=True, name=m.client_id)
        self.threads[m.client_id] = (m, stop, t)
        t.start()

    def stop(self, client_id: str, leave: bool = True) -> GroupMember:
        m, stop, t = self.threads.pop(client_id)
        stop.set()
        t.join(30)
        m.close(leave=leave)
        return m

    def members(self) -> list[GroupMember]:
        return [m for m, _, _ in self.threads.values()]

    def wait_stable(self, generation_at_least: int = 1, timeout: float = 30) -> int:
        """Until every member is in one generation with an assignment and none is rejoining."""
        def settled():
            ms = self.members()
            gens = {m.state.generation for m in ms}
            return (len(gens) == 1 and min(gens) >= generation_at_least
                    and not any(m._rejoin.is_set() or m._joining for m in ms) and min(gens))
        return wait_for(settled, timeout, "the group to settle in one generation")

    def close(self) -> None:
        for cid in list(self.threads):
            self.stop(cid)


def generations(cluster, group: str) -> list[int]:
    return sorted({e["generation"] for e in events(cluster, type_="group_generation", group=group)})


def test_three_consumers_get_the_seeds_range_and_round_robin_assignments(make_cluster):
    cluster = make_cluster(3, **FAST_GROUPS)
    create_topic(cluster.zk(), "t", 6, 3, {})
    expected = {"range": {"c0": [0, 1], "c1": [2, 3], "c2": [4, 5]},
                "roundrobin": {"c0": [0, 3], "c1": [1, 4], "c2": [2, 5]}}
    for assignor, want in expected.items():
        consumers = Consumers(*(member(cluster, f"g-{assignor}", f"c{i}", assignor) for i in range(3)))
        try:
            consumers.wait_stable()
            got = {m.client_id: [p for _, p in m.assignment] for m in consumers.members()}
            assert got == want, (assignor, got)
            d = GroupAdmin(client(cluster)).describe(f"g-{assignor}")
            assert d.state == "Stable" and d.protocol == assignor and len(d.members) == 3
            assert {m["host"] for m in d.members} == {"/127.0.0.1"}  # as Kafka shows a client host
        finally:
            consumers.close()


def test_lazy_offsets_topic_is_created_by_the_first_find_coordinator(make_cluster):
    """kafkasim.offsets.topic.eager.create: false: no __consumer_offsets at start; the first FindCoordinator gets
    COORDINATOR_NOT_AVAILABLE and has the broker create it (Kafka's KafkaApis); then the group forms."""
    cluster = make_cluster(3, kafkasim__offsets__topic__eager__create=False, **FAST_GROUPS)
    assert paths_exists(cluster, "/brokers/topics/__consumer_offsets") is False
    create_topic(cluster.zk(), "t", 2, 3, {})
    b = cluster.cfg.brokers[0]
    stub = gpbg.GroupsStub(grpc.insecure_channel(f"{b.host}:{b.port}"))
    answers = []

    def created():  # FindCoordinator again until one has the topic created (its metadata may lag at first)
        answers.append(stub.FindCoordinator(gpb.FindCoordinatorRequest(key="lazy"), timeout=5).error_code)
        return events(cluster, type_="offsets_topic_create_requested")

    requested = wait_for(created, 30, "a broker to create the offsets topic")
    assert answers[0] == errors.COORDINATOR_NOT_AVAILABLE
    assert [e["broker"] for e in requested] == [b.id]
    assert events(cluster, type_="topic_created") == []  # not the controller
    m = member(cluster, "lazy", "c0")
    try:
        m.ensure_active()
        assert m.assignment == [("t", 0), ("t", 1)]
    finally:
        m.close()


def paths_exists(cluster, path: str) -> bool:
    zk = cluster.zk()
    return zk.exists(path) is not None


class Recorder:
    def __init__(self) -> None:
        self.revoked: list[tuple[str, int]] = []

    def on_partitions_revoked(self, partitions) -> None:
        self.revoked.extend(partitions)

    def on_partitions_assigned(self, partitions) -> None:
        pass


def test_cooperative_sticky_hands_over_only_what_moves(make_cluster):
    """Two cooperative-sticky members: the second one's arrival revokes only the partitions that move, in one
    round, and hands them over in the next (the generation travels in each member's user data)."""
    cluster = make_cluster(3, **FAST_GROUPS)
    create_topic(cluster.zk(), "t", 4, 3, {})
    seen = Recorder()
    consumers = Consumers(member(cluster, "coop", "a", "cooperative-sticky", listener=seen))
    g0 = consumers.wait_stable()
    [a] = consumers.members()
    assert a.assignment == [("t", p) for p in range(4)]
    consumers.add(member(cluster, "coop", "b", "cooperative-sticky"))
    final = consumers.wait_stable(g0 + 2)  # one round withholds t-2, t-3 while a revokes them; the next hands them on
    got = {m.client_id: m.assignment for m in consumers.members()}
    assert got == {"a": [("t", 0), ("t", 1)], "b": [("t", 2), ("t", 3)]}, (final, got)
    assert seen.revoked == [("t", 2), ("t", 3)]  # a never gave up what it kept
    # the coordinator holds each member's last JoinGroup metadata: the generation of its previous assignment
    b = cluster.cfg.broker(coordinator_of(cluster, "coop"))
    r = gpbg.GroupsStub(grpc.insecure_channel(f"{b.host}:{b.port}")).DescribeGroups(
        gpb.DescribeGroupsRequest(group_ids=["coop"]), timeout=5)
    subs = {mem.client_id: Subscription.decode(mem.metadata) for mem in r.groups[0].members}
    assert {c: CooperativeStickyAssignor().member_data(s) for c, s in subs.items()} == {
        "a": ([("t", 0), ("t", 1)], final - 1), "b": ([], final - 1)}
    consumers.close()


def test_join_leave_and_crash_each_cause_one_rebalance(make_cluster):
    cluster = make_cluster(3, **FAST_GROUPS)
    create_topic(cluster.zk(), "t", 6, 3, {})
    consumers = Consumers(member(cluster, "g", "a"), member(cluster, "g", "b"))
    g0 = consumers.wait_stable()
    consumers.add(member(cluster, "g", "c"))  # a member joins: one rebalance
    assert consumers.wait_stable(g0 + 1) == g0 + 1
    consumers.stop("c")  # it leaves (LeaveGroup): one rebalance
    assert consumers.wait_stable(g0 + 2) == g0 + 2
    b = consumers.stop("b", leave=False)  # it crashes: no more heartbeats; its session expires: one rebalance
    assert consumers.wait_stable(g0 + 3) == g0 + 3
    [a] = consumers.members()
    assert a.assignment == [("t", p) for p in range(6)]
    removed = events(cluster, type_="member_removed", group="g", member_id=b.state.member_id)
    assert [e["reason"] for e in removed] == ["session_timeout"], removed
    assert generations(cluster, "g") == [g0, g0 + 1, g0 + 2, g0 + 3]
    consumers.close()


def coordinator_of(cluster, group: str) -> int:
    return GroupAdmin(client(cluster)).coordinator(group)[0]


def test_sigkill_of_the_coordinator_loses_no_acknowledged_commit(make_cluster):
    cluster = make_cluster(3, **FAST_GROUPS)
    create_topic(cluster.zk(), "t", 4, 3, {"min.insync.replicas": 2})
    producer = Producer(client(cluster))
    for i in range(200):
        producer.send("t", b"v%d" % i, partition=i % 4)
    consumers = Consumers(*(member(cluster, "g", f"c{i}") for i in range(2)), commit=True)
    consumers.wait_stable()
    old = coordinator_of(cluster, "g")
    wait_for(lambda: sum(consumers.acked.values()) >= 100, 30, "commits before the kill")
    cluster.signal_broker(old, signal.SIGKILL)
    killed_at = time.monotonic()
    wait_for(lambda: consumers.last_ack and consumers.last_ack[0] != old and consumers.last_ack[1] > killed_at,
             30, "a commit accepted by the new coordinator")
    new = consumers.last_ack[0]
    assert new == coordinator_of(cluster, "g") != old
    consumers.wait_stable()
    consumers.close()
    committed = GroupAdmin(client(cluster)).committed("g")
    for tp, offset in consumers.acked.items():
        assert committed.get(tp, -1) >= offset, (tp, offset, committed)
    loads = events(cluster, broker=new, type_="coordinator_loaded", partition=partition_for("g", 50))
    assert loads and loads[-1]["records"] > 0, loads
    # the group came back on the new coordinator from the log (Stable, its last stored generation)
    assert events(cluster, broker=new, type_="group_loaded", group="g")


def test_a_paused_coordinators_late_commit_is_rejected(make_cluster):
    cluster = make_cluster(3, **FAST_GROUPS)
    create_topic(cluster.zk(), "t", 2, 3, {})
    admin = GroupAdmin(client(cluster))

    def commit(offset: int, target: str) -> gpb.OffsetCommitResponse:
        with grpc.insecure_channel(target) as ch:
            return gpbg.GroupsStub(ch).OffsetCommit(gpb.OffsetCommitRequest(
                group_id="simple", generation_id=-1, retention_time_ms=-1, partitions=[
                    gpb.OffsetCommitPartition(topic="t", partition=0, offset=offset, leader_epoch=-1)]), timeout=60)

    def first_commit():
        """Just after __consumer_offsets is made, a broker may name a coordinator that has not yet had its
        LeaderAndIsr (NOT_COORDINATOR), or is still loading: a client finds the coordinator again and retries."""
        found = admin.coordinator("simple")
        if found is not None:
            code = commit(5, found[1]).partitions[0].error_code
            assert code in (errors.NONE, errors.NOT_COORDINATOR, errors.COORDINATOR_LOAD_IN_PROGRESS), code
            return found if code == errors.NONE else None

    old, endpoint = wait_for(first_commit, 20, "a coordinator that accepts the first commit")
    cluster.signal_broker(old, signal.SIGSTOP)
    late: dict = {}
    sender = threading.Thread(target=lambda: late.setdefault("r", commit(99, endpoint)), daemon=True)
    sender.start()  # reaches the paused coordinator's socket; it is handled only after SIGCONT
    try:
        wait_for(lambda: coordinator_of(cluster, "simple") != old, 30, "a new coordinator past the session timeout")
        new_endpoint = admin.coordinator("simple")[1]
        wait_for(lambda: admin.committed("simple").get(("t", 0)) == 5, 30, "the new coordinator to load offset 5")
        assert commit(7, new_endpoint).partitions[0].error_code == errors.NONE
    finally:
        cluster.signal_broker(old, signal.SIGCONT)
    sender.join(60)
    code = late["r"].partitions[0].error_code
    assert code != errors.NONE, "a deposed coordinator acknowledged a commit"
    assert code in (errors.NOT_COORDINATOR, errors.REQUEST_TIMED_OUT, errors.COORDINATOR_NOT_AVAILABLE), code
    assert admin.committed("simple")[("t", 0)] == 7


def test_two_hundred_groups_survive_a_rolling_restart(make_cluster):
    cluster = make_cluster(3, **FAST_GROUPS)
    create_topic(cluster.zk(), "t", 2, 3, {})
    admin = GroupAdmin(client(cluster))
    groups = [f"group-{i}" for i in range(200)]
    want = {g: {("t", 0): i + 1, ("t", 1): 2 * i + 1} for i, g in enumerate(groups)}
    with ThreadPoolExecutor(8) as ex:
        codes = list(ex.map(lambda g: admin.commit_simple(g, want[g]), groups))
    assert all(c == errors.NONE for r in codes for c in r.values())
    assert len({coordinator_of(cluster, g) for g in groups[:30]}) == 3  # spread over every broker
    for b in sorted(cluster.pids):
        cluster.stop_broker(b)
        cluster.start_broker(b)
        wait_for(lambda: all(len(s["isr"]) == 3 for s in cluster.view().topics["__consumer_offsets"]
                             ["partitions"].values()), 60, f"broker {b} back in every ISR")
    admin = GroupAdmin(client(cluster))
    with ThreadPoolExecutor(8) as ex:
        got = dict(zip(groups, ex.map(admin.committed, groups)))
    assert got == want
