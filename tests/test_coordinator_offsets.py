"""The group coordinator core: OffsetCommit/Fetch, Describe/List/DeleteGroups, offset expiry, failover load."""
from __future__ import annotations

import pytest

from coordinator.core import GroupConfig
from coordinator.group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE, encode_subscription
from coordinator.messages import CommitOffset, FetchedOffset
from coordinator.records import GroupMetadataKey, OffsetKey, OffsetValue, decode_record
from coordinator.testing import Driver, form_group as form, group_state as state, quick_config as cfg
from kafkacommon import errors

DAY = 24 * 3600 * 1000


def codes(d: Driver, handle: int) -> list[int]:
    return [c for _, _, c in d.response(handle).partitions]


def fetched(d: Driver, group: str = "g", partitions=None, require_stable=False) -> dict:
    r = d.response(d.fetch(group, partitions, require_stable))
    assert r.error_code == 0
    return {(p.topic, p.partition): (p.offset, p.error_code) for p in r.partitions}


# ------------------------------------------------------------------ OffsetCommit

def test_commit_status_errors():
    d = Driver(cfg(), load=False)
    assert codes(d, d.commit("g", {("t", 0): 1})) == [errors.NOT_COORDINATOR]
    d.apply(d.core.begin_load(0))
    assert codes(d, d.commit("g", {("t", 0): 1, ("t", 1): 2})) == [errors.COORDINATOR_LOAD_IN_PROGRESS] * 2
    d.apply(d.core.finish_load(0))
    assert codes(d, d.commit("", {("t", 0): 1})) == [0]          # the empty group id is allowed


def test_simple_group_commit_creates_an_empty_group():
    d = Driver(cfg())
    assert codes(d, d.commit("g", {("t", 0): 5, ("t", 1): 6})) == [0, 0]
    assert state(d) == EMPTY and d.core.get_group("g").protocol_type is None
    assert fetched(d) == {("t", 0): (5, 0), ("t", 1): (6, 0)}
    assert d.core.durable_view()["offsets"][("g", "t", 0)] == OffsetValue(5, -1, "", 0)
    assert d.events_named("group_created")[0]["reason"] == "commit"


def test_commit_with_a_generation_to_an_unknown_group_is_illegal():
    d = Driver(cfg())
    assert codes(d, d.commit("g", {("t", 0): 5}, generation=3, member_id="m")) == [errors.ILLEGAL_GENERATION]
    assert d.core.group_ids() == []


def test_commit_member_and_generation_checks():
    d = Driver(cfg())
    gen, ids = form(d, instances=["a", None], assign=False)
    assert codes(d, d.commit("g", {("t", 0): 1}, gen, ids[1])) == [errors.REBALANCE_IN_PROGRESS]  # Completing
    d.sync("g", gen, ids[0], [])
    assert codes(d, d.commit("g", {("t", 0): 1}, gen, "nobody")) == [errors.UNKNOWN_MEMBER_ID]
    assert codes(d, d.commit("g", {("t", 0): 1}, -1, "")) == [errors.UNKNOWN_MEMBER_ID]   # not Empty
    assert codes(d, d.commit("g", {("t", 0): 1}, gen + 1, ids[1])) == [errors.ILLEGAL_GENERATION]
    assert codes(d, d.commit("g", {("t", 0): 1}, gen, "x", instance="a")) == [errors.FENCED_INSTANCE_ID]
    assert codes(d, d.commit("g", {("t", 0): 1}, gen, ids[1])) == [0]
    d.join("g", ids[0], instance="a")                   # PreparingRebalance: the old generation may commit
    assert state(d) == PREPARING_REBALANCE
    assert codes(d, d.commit("g", {("t", 0): 2}, gen, ids[1])) == [0]
    assert fetched(d) == {("t", 0): (2, 0)}


def test_metadata_too_large():
    d = Driver(cfg(offset_metadata_max_bytes=4))
    h = d.commit("g", [CommitOffset("t", 0, 1, metadata="abcd"), CommitOffset("t", 1, 2, metadata="abcde"),
                       CommitOffset("t", 2, 3, metadata=None)])
    assert codes(d, h) == [0, errors.OFFSET_METADATA_TOO_LARGE, 0]
    assert fetched(d) == {("t", 0): (1, 0), ("t", 2): (3, 0)}
    appended = len(d.emitted)
    assert codes(d, d.commit("g", [CommitOffset("t", 0, 9, metadata="x" * 5)])) == [errors.OFFSET_METADATA_TOO_LARGE]
    assert len(d.emitted) == appended                   # nothing left to write: no append


@pytest.mark.parametrize("append_error,expected", [
    (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.COORDINATOR_NOT_AVAILABLE),
    (errors.NOT_ENOUGH_REPLICAS, errors.COORDINATOR_NOT_AVAILABLE),
    (errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, errors.COORDINATOR_NOT_AVAILABLE),
    (errors.NOT_LEADER_OR_FOLLOWER, errors.NOT_COORDINATOR),
    (errors.KAFKA_STORAGE_ERROR, errors.NOT_COORDINATOR),
    (errors.MESSAGE_TOO_LARGE, errors.INVALID_COMMIT_OFFSET_SIZE),
    (errors.REQUEST_TIMED_OUT, errors.REQUEST_TIMED_OUT),
])
def test_commit_append_error_mapping_leaves_the_cache_alone(append_error, expected):
    d = Driver(cfg())
    d.commit("g", {("t", 0): 1})
    d.fail_next = [append_error]
    assert codes(d, d.commit("g", {("t", 0): 2})) == [expected]
    assert fetched(d) == {("t", 0): (1, 0)}
    assert d.events_named("append_failed")[0]["error"] == append_error


def test_cache_changes_only_when_the_append_completes_and_require_stable():
    d = Driver(cfg(), auto_complete=False)
    h = d.commit("g", {("t", 0): 7})
    assert d.response(h) is None
    assert fetched(d, partitions=[("t", 0)]) == {("t", 0): (-1, 0)}
    assert fetched(d, partitions=[("t", 0)], require_stable=True) == {("t", 0): (-1, errors.UNSTABLE_OFFSET_COMMIT)}
    assert d.core.durable_view()["offsets"] == {}
    d.complete()
    assert codes(d, h) == [0]
    assert fetched(d, require_stable=True) == {("t", 0): (7, 0)}


def test_appends_are_replayed_in_emission_order():
    d = Driver(cfg(), auto_complete=False)
    a = d.commit("g", {("t", 0): 1})
    b = d.commit("g", {("t", 0): 2})
    second, first = sorted(d.pending)[1], sorted(d.pending)[0]
    d.complete(second)                      # completes first, but waits for the earlier append
    assert d.response(b) is None and d.core.durable_view()["offsets"] == {}
    d.complete(first)
    assert codes(d, a) == codes(d, b) == [0]
    assert fetched(d) == {("t", 0): (2, 0)}


def test_retention_time_writes_a_v1_value():
    d = Driver(cfg())
    d.now = 1000
    d.commit("g", [CommitOffset("t", 0, 3, leader_epoch=4, metadata="m")], retention_ms=500)
    key, value = decode_record(*d.log()[-1])
    assert d.log()[-1][1][:2] == b"\x00\x01"
    assert value == OffsetValue(3, -1, "m", 1000, 1500)
    d.commit("g", [CommitOffset("t", 1, 3, leader_epoch=4)])
    assert d.log()[-1][1][:2] == b"\x00\x03" and decode_record(*d.log()[-1])[1].leader_epoch == 4


# ------------------------------------------------------------------ OffsetFetch

def test_fetch_errors_and_unknown_groups():
    d = Driver(cfg(), load=False)
    assert d.response(d.fetch("g")).error_code == errors.NOT_COORDINATOR
    d.apply(d.core.begin_load(0))
    assert d.response(d.fetch("g")).error_code == errors.COORDINATOR_LOAD_IN_PROGRESS
    d.apply(d.core.finish_load(0))
    assert d.response(d.fetch("nope")).partitions == []
    assert d.response(d.fetch("nope", [("t", 3)])).partitions == [FetchedOffset("t", 3, -1, -1, "", 0)]
    d.commit("g", [CommitOffset("t", 1, 10, leader_epoch=2, metadata="md")])
    r = d.response(d.fetch("g", [("t", 1), ("u", 0)]))
    assert r.partitions == [FetchedOffset("t", 1, 10, 2, "md", 0), FetchedOffset("u", 0, -1, -1, "", 0)]


# ------------------------------------------------------------------ Describe / List

def test_describe_groups():
    d = Driver(cfg(), load=False)
    assert d.response(d.describe("g")).groups[0].error_code == errors.NOT_COORDINATOR
    d.apply(d.core.begin_load(0))
    g = d.response(d.describe("g")).groups[0]
    assert (g.error_code, g.state) == (errors.COORDINATOR_LOAD_IN_PROGRESS, "")
    d.apply(d.core.finish_load(0))
    g = d.response(d.describe("absent")).groups[0]
    assert (g.error_code, g.state, g.members) == (0, "Dead", [])
    gen, ids = form(d)
    g = d.response(d.describe("g")).groups[0]
    assert (g.state, g.protocol_type, g.protocol) == (STABLE, "consumer", "range")
    assert [(m.member_id, m.metadata, m.assignment) for m in g.members] == [(i, b"m", i.encode()) for i in ids]
    d.join("g", ids[0])
    g = d.response(d.describe("g")).groups[0]
    assert (g.state, g.protocol) == (PREPARING_REBALANCE, "")
    assert [(m.metadata, m.assignment) for m in g.members] == [(b"", b"")] * 2


def test_list_groups():
    d = Driver(cfg(), load=False)
    assert d.response(d.list()).error_code == errors.NOT_COORDINATOR
    d.apply(d.core.begin_load(0))
    assert d.response(d.list()).error_code == errors.COORDINATOR_LOAD_IN_PROGRESS
    d.apply(d.core.finish_load(0))
    form(d, "b")
    d.commit("a", {("t", 0): 1})
    assert d.response(d.list()).groups == [("a", "", EMPTY), ("b", "consumer", STABLE)]
    assert d.response(d.list(STABLE)).groups == [("b", "consumer", STABLE)]
    assert d.response(d.list(COMPLETING_REBALANCE)).groups == []


# ------------------------------------------------------------------ DeleteGroups

def test_delete_groups():
    d = Driver(cfg(), load=False)
    assert d.response(d.delete("g")).results == [("g", errors.NOT_COORDINATOR)]
    d.apply(d.core.begin_load(0))
    assert d.response(d.delete("g")).results == [("g", errors.COORDINATOR_LOAD_IN_PROGRESS)]
    d.apply(d.core.finish_load(0))
    gen, ids = form(d, "busy")
    d.commit("simple", {("t", 0): 1, ("t", 1): 2})
    form(d, "emptied", n=1)
    d.commit("emptied", {("t", 0): 3}, 1, "c0-uuid3")
    d.leave("emptied", ("c0-uuid3", None))
    before = len(d.emitted)
    r = d.response(d.delete("simple", "busy", "absent", "emptied", "simple"))
    assert r.results == [("simple", 0), ("busy", errors.NON_EMPTY_GROUP), ("absent", errors.GROUP_ID_NOT_FOUND),
                         ("emptied", 0)]
    new = d.emitted[before:]
    assert [c.acks for c in new] == [0, 0]
    assert [decode_record(k, v) for k, v in new[0].records] == [(OffsetKey("simple", "t", 0), None),
                                                                 (OffsetKey("simple", "t", 1), None)]
    assert [decode_record(k, v) for k, v in new[1].records] == [(OffsetKey("emptied", "t", 0), None),
                                                                 (GroupMetadataKey("emptied"), None)]
    assert d.core.group_ids() == ["busy"]
    view = d.core.durable_view()
    assert list(view["groups"]) == ["busy"] and view["offsets"] == {}
    assert {e["group"] for e in d.events_named("group_deleted")} == {"simple", "emptied"}
    assert fetched(d, "simple") == {}


def test_delete_with_a_commit_in_flight_ends_deleted():
    d = Driver(cfg(), auto_complete=False)
    d.commit("g", {("t", 0): 1})
    d.complete()
    h = d.commit("g", {("t", 0): 2})
    assert d.response(d.delete("g")).results == [("g", 0)]
    d.complete()
    assert codes(d, h) == [0]
    assert d.core.durable_view()["offsets"] == {} and d.reloaded().core.durable_view()["offsets"] == {}


# ------------------------------------------------------------------ expiry

def expiry_cfg(**kw) -> GroupConfig:
    return cfg(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=600000, **kw)


def test_simple_group_offsets_expire_by_commit_time():
    d = Driver(expiry_cfg())
    d.commit("g", {("t", 0): 1})
    d.advance(DAY - 1000)
    d.commit("g", {("t", 1): 2})
    d.advance(1000 + 600000 - (DAY % 600000))          # the first check at or after commit + retention
    assert fetched(d) == {("t", 1): (2, 0)}
    assert d.events_named("offsets_expired") == [{"partition": 0, "group": "g",
                                                  "count": 1}]
    tomb = d.emitted[-1]
    assert tomb.acks == 0 and decode_record(*tomb.records[0]) == (OffsetKey("g", "t", 0), None)
    d.advance(DAY)
    assert d.core.group_ids() == []                    # Empty with no offsets left: Dead
    assert d.events_named("group_deleted")[0]["reason"] == "expired"
    assert all(decode_record(k, v)[0] != GroupMetadataKey("g") for k, v in d.log())   # generation 0


def test_empty_consumer_group_expires_from_when_it_became_empty():
    d = Driver(expiry_cfg())
    gen, ids = form(d, n=1, session_ms=1800000)
    d.commit("g", {("t", 0): 1}, gen, ids[0])
    for _ in range(DAY // 1200000):                    # a consumer group with unknown subscriptions:
        d.advance(1200000)                             # nothing expires while it is Stable
        d.heartbeat("g", gen, ids[0])
    assert fetched(d) == {("t", 0): (1, 0)} and d.now == DAY
    d.leave("g", (ids[0], None))                       # Empty at t = DAY
    d.advance(DAY - 1)
    assert fetched(d) == {("t", 0): (1, 0)}
    d.advance(600000)
    assert d.core.group_ids() == []
    keys = [decode_record(k, v) for k, v in d.emitted[-1].records]
    assert keys == [(OffsetKey("g", "t", 0), None), (GroupMetadataKey("g"), None)]
    assert d.core.durable_view() == {"offsets": {}, "groups": {}, "txn_offsets": {}}


def test_stable_consumer_group_expires_only_unsubscribed_topics():
    d = Driver(expiry_cfg())
    sub = encode_subscription(["t"])
    gen, ids = form(d, n=1, protocols=[(("range", sub),)], session_ms=60000)
    d.commit("g", {("t", 0): 1, ("old", 0): 2}, gen, ids[0])
    for _ in range(int(DAY / 30000) + 21):
        d.advance(30000)
        d.heartbeat("g", gen, ids[0])
    assert fetched(d) == {("t", 0): (1, 0)}


def test_v1_expire_timestamp_and_pending_commits():
    d = Driver(expiry_cfg(), auto_complete=False)
    d.commit("g", {("t", 0): 1}, retention_ms=1000)    # v1: expires at t >= 1000
    d.complete()
    d.commit("g", {("t", 1): 1})
    d.complete()
    d.advance(600000)
    assert fetched(d) == {("t", 1): (1, 0)}
    d.advance(DAY - 600000 - 1)
    d.commit("g", {("t", 1): 2})                       # pending across the check at DAY: not expired
    d.advance(1)
    assert fetched(d) == {("t", 1): (1, 0)}
    d.complete()
    assert fetched(d) == {("t", 1): (2, 0)}


# ------------------------------------------------------------------ failover load

def test_failover_load_restores_groups_and_offsets():
    d = Driver(cfg())
    gen, ids = form(d, "stable", instances=["s", None])
    d.commit("stable", {("t", 0): 9}, gen, ids[0])
    form(d, "empty", n=1)
    d.leave("empty", ("c0-uuid3", None))
    d.commit("simple", {("t", 0): 4})
    e = d.reloaded(now_ms=100000)
    assert e.core.group_ids() == ["empty", "simple", "stable"]
    assert (state(e, "stable"), state(e, "empty"), state(e, "simple")) == (STABLE, EMPTY, EMPTY)
    assert e.core.durable_view() == d.core.durable_view()
    for g in ("stable", "empty"):
        assert e.core.get_group(g).to_value(
            {m: x.assignment for m, x in e.core.get_group(g).members.items()}) == e.core.durable_view()["groups"][g]
    assert e.core.get_group("stable").static_members == {"s": ids[0]}
    loaded = {ev["group"]: ev for ev in e.events_named("group_loaded")}
    assert loaded["stable"]["members"] == ids and loaded["stable"]["offsets"] == 1
    assert fetched(e, "stable") == {("t", 0): (9, 0)}
    e.advance(5000)
    assert e.response(e.heartbeat("stable", gen, ids[1])).error_code == 0
    assert e.response(e.sync("stable", gen, ids[1])).assignment == ids[1].encode()
    e.advance(4999)
    assert e.core.get_group("stable").size == 2
    e.advance(1)                                       # ids[0] never heartbeated after the load
    assert state(e, "stable") == PREPARING_REBALANCE
    assert [ev["member_id"] for ev in e.events_named("member_removed")] == [ids[0]]
    e.advance(5000)
    assert state(e, "stable") == EMPTY                 # ids[1] did not rejoin either


def test_requests_during_load_and_records_replayed_last_wins():
    d = Driver(cfg())
    d.commit("g", {("t", 0): 1})
    d.commit("g", {("t", 0): 2})
    e = Driver(cfg(), load=False)
    e.apply(e.core.begin_load(0))
    for k, v in d.log():
        e.core.replay(k, v)
    assert e.response(e.commit("g", {("t", 0): 3})).partitions == [("t", 0, errors.COORDINATOR_LOAD_IN_PROGRESS)]
    assert e.core.group_ids() == []
    e.apply(e.core.finish_load(0))
    assert fetched(e) == {("t", 0): (2, 0)}


def test_commits_go_out_with_the_configured_required_acks():
    d = Driver(cfg(commit_required_acks=1))
    d.commit("g", {("t", 0): 1}, -1, "")
    assert [c.acks for c in d.emitted] == [1]
    d = Driver(cfg())
    d.commit("g", {("t", 0): 1}, -1, "")
    assert [c.acks for c in d.emitted] == [-1]   # Kafka's default: wait for the high watermark


def test_the_planted_generation_bug_accepts_a_fenced_commit():
    """The switch the chaos checkers' tests use (never set in a real broker) does what it says."""
    d = Driver(cfg(check_commit_generation=False))
    gen, ids = form(d)
    assert codes(d, d.commit("g", {("t", 0): 1}, gen - 1, "a-stale-member")) == [0]
    assert fetched(d) == {("t", 0): (1, 0)}


# ------------------------------------------------------------------ OffsetDelete

def test_offset_delete_as_kafka_2_8s_handle_delete_offsets():
    from coordinator.core import PartitionCoordinator
    from coordinator.messages import OffsetDeleteRequest

    def delete(group: str, *tps: tuple[str, int]):
        return d.response(d.call(PartitionCoordinator.offset_delete, OffsetDeleteRequest(group, list(tps))))
    d = Driver(cfg(), load=False)
    assert delete("g", ("t", 0)).error_code == errors.NOT_COORDINATOR
    d.apply(d.core.begin_load(0))
    d.apply(d.core.finish_load(0))
    assert delete("", ("t", 0)).error_code == errors.INVALID_GROUP_ID
    assert delete("absent", ("t", 0)).error_code == errors.GROUP_ID_NOT_FOUND
    # a consumer group, Stable, subscribed to t: t's offsets stay (GROUP_SUBSCRIBED_TO_TOPIC), u's go
    sub = (("range", encode_subscription(["t"])),)
    gen, ids = form(d, "live", n=2, protocols=[sub, sub])
    d.commit("live", {("t", 0): 5, ("u", 0): 7, ("u", 1): 8}, gen, ids[0])
    before = len(d.emitted)
    r = delete("live", ("t", 0), ("u", 0), ("u", 3))
    assert (r.error_code, r.partitions) == (0, [("t", 0, errors.GROUP_SUBSCRIBED_TO_TOPIC), ("u", 0, 0), ("u", 3, 0)])
    (tomb,) = d.emitted[before:]
    assert tomb.acks == 0 and [decode_record(k, v) for k, v in tomb.records] == [(OffsetKey("live", "u", 0), None)]
    assert fetched(d, "live") == {("t", 0): (5, 0), ("u", 1): (8, 0)}
    assert d.events_named("offsets_deleted") == [{"partition": 0, "group": "live", "partitions": ["u-0"],
                                                  "requested": 2, "generation": gen}]
    # a group of another protocol type (Kafka Connect's), not Empty: NON_EMPTY_GROUP
    d.join("connect", protocol_type="connect")
    d.advance(0)
    assert delete("connect", ("u", 0)).error_code == errors.NON_EMPTY_GROUP
    # an Empty group: every offset asked for goes; left with none, it dies (and its metadata is tombstoned)
    d.leave("live", (ids[0], None), (ids[1], None))
    assert state(d, "live") == EMPTY
    assert delete("live", ("t", 0), ("u", 1)).partitions == [("t", 0, 0), ("u", 1, 0)]
    assert fetched(d, "live") == {} and "live" not in d.core.group_ids()
    assert [decode_record(k, v) for k, v in d.emitted[-1].records][-1] == (GroupMetadataKey("live"), None)
    # the tombstones are records: a new coordinator replaying the log has none of those offsets either
    assert d.reloaded().core.durable_view()["offsets"] == {}
