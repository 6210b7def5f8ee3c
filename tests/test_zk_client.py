"""zk/client.py and zk/batch.py (multiRead, lean multi) against a real ZooKeeper (one chroot per test)."""
from __future__ import annotations

import json
import time
import uuid
from typing import Callable, Iterator

import pytest

from util.waiting import wait_for

from kafkacommon.metadata import LeaderAndIsr
from zk import codecs, paths
from zk.client import (
    BrokerRegistrationTimeout, ControllerMovedError, StateVersionConflict, StateWrite, ZkClient,
)
from kafkacommon.metadata import BrokerRegistration, TopicAssignment
from zk.batch import GET_CHILDREN, GET_DATA, multi_read
from zk.errors import NodeExists, NoNode
from zk.stat import Stat, WatchEvent

SESSION_MS = 2000


@pytest.fixture
def connect(zookeeper) -> str:
    return f"{zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def new_client(connect: str) -> Iterator[Callable[[], ZkClient]]:
    """new_client() -> a started ZkClient on this test's chroot; stopped at teardown unless already."""
    made: list[ZkClient] = []

    def make() -> ZkClient:
        c = ZkClient(connect, session_timeout_ms=SESSION_MS)
        c.start()
        made.append(c)
        return c

    yield make
    for c in made:
        if c.kz.connected:
            c.stop()


def reg(broker_id: int, host: str = "127.0.0.1") -> BrokerRegistration:
    return BrokerRegistration(broker_id, host, 9000 + broker_id, 1_700_000_000_000)


def elected(c: ZkClient) -> int:
    """Make ``c`` the controller; return the epoch zkVersion."""
    won, _epoch, version = c.try_elect_controller(1, 1_700_000_000_000)
    assert won
    return version


def with_topic(c: ZkClient, version: int, topic: str, partitions: int) -> list[StateWrite]:
    """Create the topic and the initial state of every partition; return the writes made."""
    c.ensure_persistent_paths()
    assignment = TopicAssignment(topic, {p: (1, 2, 3) for p in range(partitions)})
    c.create_topic(version, assignment)
    writes = [StateWrite(topic, p, LeaderAndIsr(1, 0, (1, 2, 3), 1), None) for p in range(partitions)]
    assert c.write_states(version, writes) == {(topic, p): 0 for p in range(partitions)}
    return writes


def read_state(c: ZkClient, topic: str, p: int) -> tuple[LeaderAndIsr, int]:
    data, stat = c.get(paths.partition_state(topic, p))
    return codecs.decode_partition_state(paths.partition_state(topic, p), data), stat.version


# ------------------------------------------------------------------ controller election

def test_the_first_caller_wins_with_epoch_one(new_client):
    c = new_client()
    assert c.try_elect_controller(1, 1_700_000_000_000) == (True, 1, 1)
    data, stat = c.get(paths.CONTROLLER)
    assert json.loads(data) == {"version": 1, "brokerid": 1, "timestamp": "1700000000000"}
    assert stat.ephemeral_owner == c.session_id
    assert c.get(paths.CONTROLLER_EPOCH)[0] == b"1"
    assert c.read_controller() == 1
    assert c.read_controller_epoch() == (1, 1)


def test_a_second_client_loses_and_sees_the_current_epoch(new_client):
    first, second = new_client(), new_client()
    assert first.try_elect_controller(1, 1)[0]
    assert second.try_elect_controller(2, 2) == (False, 1, 1)
    assert second.read_controller() == 1
    assert second.get(paths.CONTROLLER_EPOCH)[0] == b"1", "a lost election does not bump the epoch"


def test_after_the_winner_closes_its_session_the_second_wins_with_epoch_two(new_client):
    first, second = new_client(), new_client()
    assert first.try_elect_controller(1, 1)[0]
    assert not second.try_elect_controller(2, 2)[0]
    first.stop()
    assert second.read_controller() is None, "closing the session deletes /controller at once"
    assert second.try_elect_controller(2, 3) == (True, 2, 2)
    assert second.read_controller() == 2
    assert second.read_controller_epoch() == (2, 2)


def test_controller_and_epoch_are_read_in_one_pipelined_round_trip_and_the_watch_fires(new_client):
    first, second = new_client(), new_client()
    assert second.read_controller_with_epoch() == (None, None), "no /controller_epoch yet"
    assert first.try_elect_controller(1, 1)[0]
    fired: list[WatchEvent] = []
    (found, calls) = count_round_trips(second, lambda: second.read_controller_with_epoch(watch=fired.append))
    assert found == (1, (1, 1)) and calls == ["Exists", "GetData", "GetData"]
    first.stop()
    wait_for(lambda: fired, 5, "the /controller watch")
    assert fired[0].type == "DELETED" and second.read_controller_with_epoch() == (None, (1, 1))


def test_an_election_with_the_epoch_read_before_it_loses_when_the_epoch_moved(new_client):
    first, second = new_client(), new_client()
    _none, epoch = second.read_controller_with_epoch()
    assert epoch is None and second.read_controller_epoch() == (0, 0)
    assert first.try_elect_controller(1, 1)[0]
    first.stop()
    assert not second.try_elect_controller(2, 2, epoch=(0, 0))[0], "BADVERSION: the epoch moved"
    assert second.read_controller_with_epoch() == (None, (1, 1)), "the failed multi left nothing"
    assert second.try_elect_controller(2, 3, epoch=(1, 1)) == (True, 2, 2)


def test_the_snapshots_first_round_trip_goes_out_behind_the_election_multi(new_client):
    c, other = new_client(), new_client()
    c.ensure_persistent_paths()
    c.register_broker(reg(1), wait_s=1)
    assert c.read_controller_epoch() == (0, 0)
    sent = []
    fired: list[WatchEvent] = []
    won, calls = count_round_trips(c, lambda: c.try_elect_controller(
        1, 1, epoch=(0, 0), then=lambda: sent.append(c.snapshot_requests(log_dir_watch=fired.append))))
    assert won == (True, 1, 1), won
    assert calls == ["Transaction", "_MultiRead", "GetChildren", "GetChildren", "GetChildren"], calls
    assert sent[0].log_dirs.get(timeout=5) == []   # answered (kazoo sends a queued request per loop turn)
    other.propagate_log_dir_event(2)
    snap, again = count_round_trips(c, lambda: c.read_snapshot(with_states=False, log_dir_watch=fired.append,
                                                               first=sent[0]))
    assert (snap.controller_epoch, snap.epoch_zk_version) == (1, 1), "read after the multi, in ZooKeeper's order"
    assert snap.log_dir_events == [] and list(snap.brokers) == [1]
    assert snap.round_trips == 1 and again == ["_MultiRead"], "only the second round trip is sent"
    wait_for(lambda: fired, 5, "the log dir notifications' watch, armed behind the multi")
    snap, again = count_round_trips(c, lambda: c.read_snapshot(with_states=False, log_dir_watch=fired.append,
                                                               first=sent[0]))
    assert len(snap.log_dir_events) == 1 and snap.round_trips == 2 and len(again) == 5, "used once"
    assert snap.requests == 5


def test_the_snapshots_second_round_trip_goes_out_on_a_guess_of_its_names(new_client):
    c, other = new_client(), new_client()
    version = elected(c)
    c.ensure_persistent_paths()
    for b in (1, 2):
        c.register_broker(reg(b), wait_s=1)
    with_topic(c, version, "a", 2)
    with_topic(c, version, "b", 1)
    fired: list[WatchEvent] = []
    watched: set[str] = set()

    def data_watch(e: WatchEvent) -> None:   # as the controller's: the topic is watched no more
        if e.path is not None:   # (kazoo calls its watchers with no path once the session is closed)
            watched.discard(e.path.rsplit("/", 1)[-1])
            fired.append(e)
    # the guess (a metadata cache): a dead broker and a deleted topic among the names, all the live ones in it
    sent, calls = count_round_trips(c, lambda: c.snapshot_requests(
        topic_watch=fired.append, guess=({1, 2, 3}, {"a", "b", "gone"}), topic_data_watch=data_watch,
        watched=watched, broker_id=1))
    assert calls == ["_MultiRead", "GetChildren", "GetChildren", "GetData", "GetData", "GetData", "_MultiRead"]
    snap, again = count_round_trips(c, lambda: c.read_snapshot(
        topic_watch=fired.append, with_states=False, topic_data_watch=data_watch, watched=watched, broker_id=1,
        first=sent))
    assert again == [] and snap.round_trips == 0, "the guess held: no round trip of its own"
    assert sorted(snap.brokers) == [1, 2] and sorted(snap.topics) == ["a", "b"]
    assert len(snap.topics["a"].partitions) == 2 and snap.broker_configs == {"<default>": {}, "1": {}}
    assert watched == {"a", "b"}, "a missing topic's getData left no watch"
    other.kz.create(paths.topic("gone"), b"{}")
    other.kz.set(paths.topic("b"), other.kz.get(paths.topic("b"))[0])
    wait_for(lambda: any(e.path == paths.topic("b") for e in fired), 5, "the topic's data watch, armed by the guess")
    assert not any(e.path == paths.topic("gone") for e in fired), "ZooKeeper's events come in order"
    other.kz.delete(paths.topic("gone"))
    # a name outside the guess: the second round trip again, for the names the children gave
    other.register_broker(reg(4), wait_s=1)
    sent = c.snapshot_requests(guess=({1, 2}, {"a", "b"}), topic_data_watch=data_watch, watched=watched,
                               broker_id=1)
    assert watched == {"a", "b"}, "b's watch fired: armed again by the guess's getData"
    snap, again = count_round_trips(c, lambda: c.read_snapshot(
        with_states=False, topic_data_watch=data_watch, watched=watched, broker_id=1, first=sent))
    assert sorted(snap.brokers) == [1, 2, 4] and snap.round_trips == 1
    assert again == ["_MultiRead"], again


def test_controller_epoch_starts_at_zero(new_client):
    c = new_client()
    assert c.read_controller_epoch() == (0, 0)
    assert c.get(paths.CONTROLLER_EPOCH)[0] == b"0"


# ------------------------------------------------------------------ fenced writes

def test_a_write_with_a_stale_epoch_version_raises_controller_moved_and_changes_nothing(new_client):
    old, new = new_client(), new_client()
    old_version = elected(old)
    with_topic(old, old_version, "t", 3)
    old.stop()
    new_version = elected(new)
    assert new_version == old_version + 1

    writes = [StateWrite("t", 0, LeaderAndIsr(2, 1, (2, 3), 1), 0),
              StateWrite("t", 1, LeaderAndIsr(3, 1, (3,), 1), 0)]
    with pytest.raises(ControllerMovedError):
        new.write_states(old_version, writes)
    for p in range(3):
        assert read_state(new, "t", p) == (LeaderAndIsr(1, 0, (1, 2, 3), 1), 0)

    with pytest.raises(ControllerMovedError):
        new.create_topic(old_version, TopicAssignment("u", {0: (1,)}))
    assert new.exists(paths.topic("u")) is None

    assert new.write_states(new_version, writes) == {("t", 0): 1, ("t", 1): 1}
    assert read_state(new, "t", 0) == (LeaderAndIsr(2, 1, (2, 3), 1), 1)


def test_a_stale_partition_version_raises_state_version_conflict_naming_the_path(new_client):
    c = new_client()
    version = elected(c)
    with_topic(c, version, "t", 2)
    writes = [StateWrite("t", 0, LeaderAndIsr(2, 1, (2,), 1), 0),
              StateWrite("t", 1, LeaderAndIsr(2, 1, (2,), 1), 5)]  # t-1 is at version 0, not 5
    with pytest.raises(StateVersionConflict) as e:
        c.write_states(version, writes)
    assert e.value.path == paths.partition_state("t", 1), "chroot-relative, like every ZkClient path"
    assert paths.partition_state("t", 1) in str(e.value)
    for p in range(2):
        assert read_state(c, "t", p) == (LeaderAndIsr(1, 0, (1, 2, 3), 1), 0), "the multi is atomic"


def test_chunks_are_sent_together_and_a_refused_chunk_leaves_the_others_applied(new_client, monkeypatch):
    import zk.client as zk_client
    monkeypatch.setattr(zk_client, "MULTI_CHUNK", 2)
    c = new_client()
    version = elected(c)
    with_topic(c, version, "t", 6)
    moved = LeaderAndIsr(2, 1, (2, 3), 1)
    writes = [StateWrite("t", p, moved, 5 if p == 2 else 0) for p in range(6)]   # t-2 is at version 0, not 5
    order: list[str] = []
    original = c.kz._call

    def sending(request, async_object):   # every multi sent before the first answer is waited for
        order.append("send")
        wait = async_object.get
        async_object.get = lambda *a, **k: (order.append("wait"), wait(*a, **k))[1]
        return original(request, async_object)

    c.kz._call = sending
    try:
        with pytest.raises(StateVersionConflict) as e:
            c.write_states(version, writes)
    finally:
        del c.kz._call
    assert order == ["send"] * 3 + ["wait"] * 3, "three chunks sent together, then their answers taken"
    assert e.value.path == paths.partition_state("t", 2)
    assert [read_state(c, "t", p) for p in range(6)] == [
        (moved, 1), (moved, 1),                                                 # the first chunk applied
        (LeaderAndIsr(1, 0, (1, 2, 3), 1), 0), (LeaderAndIsr(1, 0, (1, 2, 3), 1), 0),   # the refused one: atomic
        (moved, 1), (moved, 1)], "the chunk after the refused one applied, as Kafka's other partitions' writes"


def test_creating_an_existing_state_is_not_reported_as_a_version_conflict(new_client):
    c = new_client()
    version = elected(c)
    writes = with_topic(c, version, "t", 1)
    with pytest.raises(NodeExists) as e:   # zk/errors.py's, not kazoo's
        c.write_states(version, writes)
    assert not isinstance(e.value, (StateVersionConflict, ControllerMovedError))


def test_fenced_multi_returns_the_results_after_the_check(new_client):
    c = new_client()
    version = elected(c)
    results = c.fenced_multi(version, lambda tx: tx.create("/a", b"1"))
    assert results == ["/a"]


# ------------------------------------------------------------------ batched reads

def count_round_trips(c: ZkClient, fn):
    """Run fn() counting every request kazoo sends for ``c``."""
    calls = []
    original = c.kz._call

    def counting(request, async_object):
        calls.append(type(request).__name__)
        return original(request, async_object)

    c.kz._call = counting
    try:
        return fn(), calls
    finally:
        del c.kz._call


def test_read_snapshot_reads_1000_partitions_in_a_constant_number_of_round_trips(new_client):
    c = new_client()
    version = elected(c)
    c.ensure_persistent_paths()
    epochs = {b: c.register_broker(reg(b), wait_s=1) for b in (1, 2, 3)}
    with_topic(c, version, "big", 1000)
    with_topic(c, version, "small", 1)

    snap, calls = count_round_trips(c, c.read_snapshot)
    assert (snap.controller_epoch, snap.epoch_zk_version) == (1, version)
    assert {b: r.epoch for b, r in snap.brokers.items()} == epochs
    assert snap.brokers[2] == BrokerRegistration(2, "127.0.0.1", 9002, 1_700_000_000_000, epoch=epochs[2])
    assert sorted(snap.topics) == ["big", "small"]
    assert len(snap.topics["big"].partitions) == 1000
    assert len(snap.states) == 1001
    assert snap.states[("big", 999)] == (LeaderAndIsr(1, 0, (1, 2, 3), 1), 0)
    assert snap.round_trips == 3, "the epoch and both children lists share one round trip"
    assert len(calls) <= 5, calls
    assert len(calls) == snap.requests, "requests reports what was sent"


def test_read_snapshot_round_trips_do_not_grow_with_partitions(new_client):
    c = new_client()
    version = elected(c)
    c.ensure_persistent_paths()
    with_topic(c, version, "one", 1)
    _, small = count_round_trips(c, c.read_snapshot)
    with_topic(c, version, "many", 500)
    snap, large = count_round_trips(c, c.read_snapshot)
    assert len(snap.states) == 501
    assert len(small) == len(large)


def test_broker_epochs_are_czxids(new_client):
    c = new_client()
    c.ensure_persistent_paths()
    epoch = c.register_broker(reg(4), wait_s=1)
    _, stat = c.get(paths.broker(4))
    assert epoch == stat.czxid
    assert c.read_brokers()[4].epoch == stat.czxid


def test_multi_read_returns_an_exception_instance_for_a_missing_znode(new_client):
    c = new_client()
    c.kz.create("/a", b"hello")
    c.kz.create("/dir/x", b"", makepath=True)
    c.kz.create("/dir/y", b"")
    res, calls = count_round_trips(c, lambda: c.read_many([
        (GET_DATA, "/a"), (GET_DATA, "/missing"), (GET_CHILDREN, "/dir"), (GET_CHILDREN, "/nope"),
        (GET_CHILDREN, "/")]))
    assert len(calls) == 1, "one request for every op"
    assert len(res) == 5
    data, stat = res[0]
    assert data == b"hello" and stat.version == 0 and stat.data_length == 5
    assert isinstance(res[1], NoNode)
    assert sorted(res[2]) == ["x", "y"]
    assert isinstance(res[3], NoNode)
    assert sorted(res[4]) == ["a", "dir"], "'/' is the chroot"


def test_multi_read_of_nothing_sends_nothing(new_client):
    c = new_client()
    res, calls = count_round_trips(c, lambda: multi_read(c.kz, []))
    assert res == [] and calls == []
    res, calls = count_round_trips(c, lambda: c.read_data([]))
    assert res == [] and calls == []


def test_read_data_gives_each_znodes_data_and_version_in_one_request(new_client):
    c = new_client()
    c.kz.create("/a", b"hello")
    c.kz.set("/a", b"again")
    c.kz.create("/empty", b"")
    c.kz.create("/none", None)
    res, calls = count_round_trips(c, lambda: c.read_data(["/a", "/missing", "/empty", "/none", "/a"]))
    assert len(calls) == 1, "one request for every path"
    assert res[0] == (b"again", 1) and res[4] == (b"again", 1)
    assert isinstance(res[1], NoNode), "a missing znode's error, as a value, in its place"
    assert res[2] == (b"", 0) and res[3] == (None, 0), "no data is None, as kazoo's getData has it"
    assert c.get("/a")[1].version == 1 and c.read_many([(GET_DATA, "/a")])[0][0] == b"again", "the chroot holds"


def test_read_states_skips_a_missing_state_and_keeps_the_others_versions(new_client):
    c = new_client()
    version = elected(c)
    c.ensure_persistent_paths()
    with_topic(c, version, "t", 3)
    c.write_states(version, [StateWrite("t", 1, LeaderAndIsr(2, 1, (2, 3), 1), 0)])
    states = c.read_states([("t", 0), ("t", 1), ("t", 2), ("t", 7), ("gone", 0)])
    assert states == {("t", 0): (LeaderAndIsr(1, 0, (1, 2, 3), 1), 0), ("t", 1): (LeaderAndIsr(2, 1, (2, 3), 1), 1),
                      ("t", 2): (LeaderAndIsr(1, 0, (1, 2, 3), 1), 0)}


def test_read_states_sends_the_very_request_of_read_data_of_the_state_paths(new_client):
    """The states' multiRead is built without the paths' strings: the same bytes as read_data's of
    paths.partition_state, in the order asked, chroot and all (a topic named like a number, partitions 0-10)."""
    c = new_client()
    tps = [("t", 10), ("t", 0), ("__consumer_offsets", 3), ("7", 1), ("t", 9)]
    bodies: list[bytes] = []
    original = c.kz._call

    def capturing(request, async_object):
        bodies.append(request.serialize())
        return original(request, async_object)

    c.kz._call = capturing
    try:
        c.read_states(tps)
        c.read_data([paths.partition_state(t, p) for t, p in tps])
    finally:
        del c.kz._call
    assert len(bodies) == 2 and bodies[0] == bodies[1]
    assert c.chroot and c.chroot.encode() + b"/brokers/topics/7/partitions/1/state" in bodies[0]


def test_read_states_of_many_partitions_agrees_with_one_read_at_a_time(new_client):
    c = new_client()
    version = elected(c)
    c.ensure_persistent_paths()
    with_topic(c, version, "t", 12)
    c.write_states(version, [StateWrite("t", p, LeaderAndIsr(p % 3 + 1, p, (p % 3 + 1,), 1), 0) for p in (1, 5, 11)])
    c.kz.delete(paths.partition_state("t", 4))
    tps = [("t", p) for p in range(13)]
    assert c.read_states(tps) == {tp: read_state(c, *tp) for tp in tps if tp not in (("t", 4), ("t", 12))}
    assert c.read_states([]) == {}


# ------------------------------------------------------------------ broker registration

def test_the_same_session_re_registering_keeps_its_czxid(new_client):
    c = new_client()
    c.ensure_persistent_paths()
    first = c.register_broker(reg(1), wait_s=1)
    assert c.register_broker(reg(1), wait_s=1) == first
    _, stat = c.get(paths.broker(1))
    assert stat.czxid == first and stat.ephemeral_owner == c.session_id


def test_a_named_predecessor_session_is_replaced_with_a_new_czxid(new_client):
    old, new = new_client(), new_client()
    old.ensure_persistent_paths()
    old_epoch = old.register_broker(reg(1, host="old"), wait_s=1)
    new_epoch = new.register_broker(reg(1, host="new"), wait_s=1, predecessor_session=old.session_id)
    assert new_epoch > old_epoch
    data, stat = new.get(paths.broker(1))
    assert stat.czxid == new_epoch and stat.ephemeral_owner == new.session_id
    assert codecs.decode_broker(1, data).host == "new"
    assert old.kz.connected, "the old session still lives; only its node was replaced"


def test_without_the_predecessor_registration_times_out_while_the_holder_lives(new_client):
    old, new = new_client(), new_client()
    old.ensure_persistent_paths()
    old_epoch = old.register_broker(reg(1), wait_s=1)
    t0 = time.monotonic()
    with pytest.raises(BrokerRegistrationTimeout, match=f"0x{old.session_id:x}"):
        new.register_broker(reg(1), wait_s=0.5)
    elapsed = time.monotonic() - t0
    assert 0.45 <= elapsed < 3.0, elapsed
    _, stat = new.get(paths.broker(1))
    assert (stat.czxid, stat.ephemeral_owner) == (old_epoch, old.session_id), "the holder's node is untouched"


def test_an_unrelated_predecessor_does_not_replace_a_live_holder(new_client):
    old, new, other = new_client(), new_client(), new_client()
    old.ensure_persistent_paths()
    old.register_broker(reg(1), wait_s=1)
    with pytest.raises(BrokerRegistrationTimeout):
        new.register_broker(reg(1), wait_s=0.3, predecessor_session=other.session_id)
    assert new.get(paths.broker(1))[1].ephemeral_owner == old.session_id


def test_after_the_holder_closes_its_session_a_new_one_registers_at_once(new_client):
    old, new = new_client(), new_client()
    old.ensure_persistent_paths()
    old_epoch = old.register_broker(reg(1), wait_s=1)
    old.stop()
    assert new.register_broker(reg(1), wait_s=0.5) > old_epoch


def test_only_the_owning_session_can_delete_an_orphaned_controller_znode(new_client):
    a, b = new_client(), new_client()
    won, _, _ = a.try_elect_controller(1, 0)
    assert won
    assert b.delete_controller_if_ours() is False
    assert b.read_controller() == 1, "another session's /controller must survive"
    assert a.delete_controller_if_ours() is True
    assert a.read_controller() is None
    assert a.delete_controller_if_ours() is False  # nothing left to delete


def test_reads_hand_out_our_types_and_errors_never_kazoos(new_client):
    c = new_client()
    c.ensure_persistent_paths()
    with pytest.raises(NoNode):
        c.get("/absent")
    assert c.exists("/absent") is None
    assert c.read_topic_config("absent") is None
    fired: list[WatchEvent] = []
    stat = c.exists(paths.TOPICS, watch=fired.append)
    assert isinstance(stat, Stat) and stat.ephemeral_owner == 0 and stat.num_children == 0
    c.create_topic_znode(TopicAssignment("t", {0: (1,)}, config={"cleanup.policy": "compact"}))
    with pytest.raises(NodeExists):
        c.create_topic_znode(TopicAssignment("t", {0: (1,)}))
    data, stat = c.get(paths.topic("t"))
    assert isinstance(stat, Stat) and stat.version == 0 and stat.data_length == len(data) and stat.czxid > 0
    assert c.read_topic_config("t") == {"cleanup.policy": "compact"}
    c.kz.create(paths.topic("bad"), codecs.encode_topic(TopicAssignment("bad", {0: (1,)})))
    c.kz.create(paths.config_topic("bad"), b"not json")
    with pytest.raises(ValueError):   # reported by the broker (topic_config_unreadable), not taken as "no overrides"
        c.read_topic_config("bad")
    c.kz.set(paths.TOPICS, b"")   # a data change fires the exists-watch
    wait_for(lambda: fired, 5, "the watch")
    assert fired == [WatchEvent("CHANGED", paths.TOPICS)]
