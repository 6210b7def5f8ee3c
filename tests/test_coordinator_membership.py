"""The group coordinator core: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and rebalances.

A fake shell (coordinator.testing.Driver) with an integer clock; no I/O.  The
rules are Kafka 2.8.2's GroupCoordinator (reference §4).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from coordinator.core import GroupConfig, PartitionCoordinator
from coordinator.group import (
    COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, GroupMetadata, IllegalStateTransition,
    MemberMetadata,
)
from coordinator.records import GroupMetadataKey, decode_record
from coordinator.testing import Driver, form_group as form, group_state as state, quick_config as cfg
from coordinator.timers import sync_key
from kafkacommon.event import Event
from kafkacommon import errors

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ hygiene

def test_records_module_is_dependency_free():
    tree = ast.parse((ROOT / "coordinator" / "records.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.module in ("__future__", "dataclasses", "typing"), node.module
        elif isinstance(node, ast.Import):
            assert all(a.name in ("struct",) for a in node.names)


def test_every_module_is_reasonably_small():
    for path in (ROOT / "coordinator").glob("*.py"):
        assert len(path.read_text().splitlines()) <= 650, path.name


# ------------------------------------------------------------------ state machine

def test_legal_and_illegal_transitions():
    legal = {(PREPARING_REBALANCE, EMPTY), (STABLE, PREPARING_REBALANCE), (COMPLETING_REBALANCE, PREPARING_REBALANCE),
             (EMPTY, PREPARING_REBALANCE), (PREPARING_REBALANCE, COMPLETING_REBALANCE),
             (COMPLETING_REBALANCE, STABLE)} | {(s, DEAD) for s in (EMPTY, PREPARING_REBALANCE,
                                                                      COMPLETING_REBALANCE, STABLE, DEAD)}
    states = (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD)
    for a in states:
        for b in states:
            g = GroupMetadata("g", 0, a)
            if (a, b) in legal:
                g.transition_to(b, 5)
                assert g.state == b and g.state_timestamp_ms == 5
            else:
                with pytest.raises(IllegalStateTransition):
                    g.transition_to(b, 5)


def test_protocol_vote_majority_and_deterministic_tie_break():
    g = GroupMetadata("g", 0)
    for i, prefs in enumerate([["b", "a"], ["a", "b"]]):
        g.add(MemberMetadata(f"m{i}", None, "c", "h", 1, 1, "consumer", [(p, b"") for p in prefs]))
    assert g.select_protocol() == "a"          # 1-1 tie: the smallest name
    g.add(MemberMetadata("m2", None, "c", "h", 1, 1, "consumer", [("b", b""), ("a", b"")]))
    assert g.select_protocol() == "b"          # 2-1
    g.add(MemberMetadata("m3", None, "c", "h", 1, 1, "consumer", [("a", b"")]))
    assert g.candidate_protocols() == {"a"} and g.select_protocol() == "a"


def test_full_rebalance_walks_every_state_and_logs_it():
    d = Driver(cfg())
    gen, ids = form(d)
    changes = [(e["from"], e["to"]) for e in d.events_named("group_state_changed")]
    assert changes == [(EMPTY, PREPARING_REBALANCE), (PREPARING_REBALANCE, COMPLETING_REBALANCE),
                       (COMPLETING_REBALANCE, STABLE)]
    assert gen == 1 and ids == ["c0-uuid1", "c1-uuid2"]
    ev = d.events_named("group_generation")[-1]
    assert ev == {"partition": 0, "group": "g", "generation": 1,
                  "protocol_type": "consumer", "protocol": "range", "leader": "c0-uuid1", "members": ids}
    assert all(e.fields["partition"] == 0 for e in d.events)


# ------------------------------------------------------------------ JoinGroup errors

def test_join_status_errors():
    d = Driver(cfg(), load=False)
    assert d.response(d.join("g")).error_code == errors.NOT_COORDINATOR
    d.apply(d.core.begin_load(0))
    assert d.response(d.join("g")).error_code == errors.COORDINATOR_LOAD_IN_PROGRESS
    assert d.response(d.join("")).error_code == errors.INVALID_GROUP_ID
    d.apply(d.core.finish_load(0))
    assert d.response(d.join("")).error_code == errors.INVALID_GROUP_ID


def test_join_session_timeout_bounds():
    d = Driver(cfg())
    assert d.response(d.join("g", session_ms=5999)).error_code == errors.INVALID_SESSION_TIMEOUT
    assert d.response(d.join("g", session_ms=1800001)).error_code == errors.INVALID_SESSION_TIMEOUT
    assert d.response(d.join("g", session_ms=6000)) is None   # parked
    assert d.core.group_ids() == ["g"]


def test_join_known_member_without_group_is_unknown():
    d = Driver(cfg())
    r = d.response(d.join("g", "someone"))
    assert (r.error_code, r.member_id) == (errors.UNKNOWN_MEMBER_ID, "someone")
    assert d.core.group_ids() == []


def test_join_inconsistent_protocol():
    d = Driver(cfg())
    assert d.response(d.join("g", protocols=())).error_code == errors.INCONSISTENT_GROUP_PROTOCOL
    assert d.response(d.join("g", protocol_type="")).error_code == errors.INCONSISTENT_GROUP_PROTOCOL
    form(d, "h")
    assert d.response(d.join("h", protocol_type="connect")).error_code == errors.INCONSISTENT_GROUP_PROTOCOL
    assert d.response(d.join("h", protocols=(("other", b""),))).error_code == errors.INCONSISTENT_GROUP_PROTOCOL


def test_member_id_required_then_pending_member_expires():
    d = Driver(cfg())
    r = d.response(d.join("g", require_known=True, session_ms=6000))
    assert (r.error_code, r.member_id) == (errors.MEMBER_ID_REQUIRED, "client-uuid1")
    assert d.core.get_group("g").pending_members
    d.advance(5999)
    assert d.core.get_group("g").is_pending_member("client-uuid1")
    d.advance(1)
    assert not d.core.get_group("g").pending_members
    assert d.events_named("pending_member_removed")[0]["reason"] == "session_timeout"
    assert d.response(d.join("g", "client-uuid1")).error_code == errors.UNKNOWN_MEMBER_ID


def test_member_id_required_then_join_with_the_id():
    d = Driver(cfg())
    mid = d.response(d.join("g", require_known=True)).member_id
    h = d.join("g", mid, require_known=True)
    d.advance(0)
    r = d.response(h)
    assert (r.error_code, r.member_id, r.leader, r.generation_id) == (0, mid, mid, 1)
    assert not d.core.get_group("g").pending_members


def test_a_repeating_member_id_source_never_replaces_a_member():
    """The suffix source is injected; a seeded one started again (a failover's new core) repeats its ids.
    A new member never takes an id the group already has, joined or pending: it would replace that member
    unseen and leave the per-protocol counts wrong (found by test_coordinator_property)."""
    import itertools

    d = Driver(cfg())
    h = d.join("g", client_id="c")
    d.advance(0)
    pending = d.response(d.join("g", client_id="c", require_known=True)).member_id
    assert (d.response(h).member_id, pending) == ("c-uuid1", "c-uuid2")
    d._ids = itertools.count(1)          # the source starts again: uuid1, uuid2, uuid3, ...
    d.join("g", client_id="c", protocols=(("roundrobin", b""), ("range", b"m")))
    group = d.core.get_group("g")
    assert set(group.members) == {"c-uuid1", "c-uuid3"} and group.is_pending_member("c-uuid2")
    assert group.get("c-uuid1").protocols == [("range", b"m")]
    assert group._protocol_counts == {"range": 2, "roundrobin": 1}


def test_pending_member_delays_join_completion():
    d = Driver(cfg())
    gen, ids = form(d)
    pending = d.response(d.join("g", require_known=True)).member_id
    h0 = d.join("g", ids[0])                        # leader rejoin -> PreparingRebalance
    h1 = d.join("g", ids[1])
    assert state(d) == PREPARING_REBALANCE and d.response(h0) is None   # waits for the pending member
    hp = d.join("g", pending)
    assert all(d.response(h).generation_id == 2 for h in (h0, h1, hp))


def test_static_members_skip_member_id_required_and_get_instance_prefixed_ids():
    d = Driver(cfg())
    h = d.join("g", instance="inst-a", require_known=True)
    d.advance(0)
    r = d.response(h)
    assert r.error_code == 0 and r.member_id == "inst-a-uuid1"


def test_stable_follower_rejoin_with_same_metadata_gets_current_generation():
    d = Driver(cfg())
    gen, ids = form(d)
    r = d.response(d.join("g", ids[1]))
    assert (r.error_code, r.generation_id, r.members, r.leader) == (0, gen, [], ids[0])
    assert state(d) == STABLE


def test_stable_leader_rejoin_or_changed_metadata_triggers_rebalance():
    d = Driver(cfg())
    gen, ids = form(d)
    h = d.join("g", ids[0])
    assert d.response(h) is None and state(d) == PREPARING_REBALANCE
    d2 = Driver(cfg())
    gen, ids = form(d2)
    assert d2.response(d2.join("g", ids[1], protocols=(("range", b"new"),))) is None
    assert state(d2) == PREPARING_REBALANCE


def test_completing_rebalance_rejoin_returns_the_generation_or_rebalances():
    d = Driver(cfg())
    gen, ids = form(d, assign=False)
    r = d.response(d.join("g", ids[0]))
    assert (r.generation_id, [m.member_id for m in r.members]) == (gen, ids)   # leader gets members
    assert state(d) == COMPLETING_REBALANCE
    r = d.response(d.join("g", ids[1]))
    assert r.members == [] and state(d) == COMPLETING_REBALANCE
    parked_sync = d.sync("g", gen, ids[1])
    assert d.response(d.join("g", ids[1], protocols=(("range", b"changed"),))) is None
    assert state(d) == PREPARING_REBALANCE
    assert d.response(parked_sync).error_code == errors.REBALANCE_IN_PROGRESS


def test_superseded_parked_join_is_answered():
    d = Driver(cfg())
    gen, ids = form(d)
    first = d.join("g", ids[0])
    second = d.join("g", ids[0])
    assert d.response(first).error_code == errors.REBALANCE_IN_PROGRESS
    assert d.response(second) is None
    assert d.events_named("request_superseded")[0]["api"] == "join"


# ------------------------------------------------------------------ group.max.size

def test_group_max_size():
    d = Driver(cfg(max_size=2, initial_rebalance_delay_ms=3000))
    a, b = d.join("g"), d.join("g")
    r = d.response(d.join("g"))
    assert (r.error_code, r.member_id) == (errors.GROUP_MAX_SIZE_REACHED, "")
    d.advance(6000)
    assert d.response(a).generation_id == d.response(b).generation_id == 1
    assert d.response(d.join("g")).error_code == errors.GROUP_MAX_SIZE_REACHED   # Completing: size check


def test_loaded_group_over_capacity_rebalances_and_sheds_members():
    d = Driver(cfg())
    gen, ids = form(d, n=3)
    e = d.reloaded(config=cfg(max_size=2))
    assert state(e) == PREPARING_REBALANCE
    h0, h1 = e.join("g", ids[0]), e.join("g", ids[1])
    r = e.response(e.join("g", ids[2]))        # numAwaiting == max: the last rejoiner is shed
    assert r.error_code == errors.GROUP_MAX_SIZE_REACHED
    assert e.events_named("member_removed")[0]["reason"] == "group_max_size"
    assert e.response(h0).generation_id == e.response(h1).generation_id == gen + 1


# ------------------------------------------------------------------ delayed joins

def test_initial_delay_is_extended_while_members_arrive():
    d = Driver(GroupConfig(initial_rebalance_delay_ms=3000))
    a = d.join("g", rebalance_ms=10000)        # remaining = 10000 - 3000 = 7000
    d.advance(2000)
    b = d.join("g", rebalance_ms=10000)
    d.advance(1000)                            # t=3000: re-armed for min(3000, 7000); remaining 4000
    assert d.response(a) is None
    d.advance(2000)
    c = d.join("g", rebalance_ms=10000)        # t=5000
    d.advance(1000)                            # t=6000: re-armed for min(3000, 4000); remaining 1000
    assert d.response(a) is None
    d.advance(2999)
    assert d.response(a) is None               # never completes early, though all have joined
    d.advance(1)                               # t=9000
    assert {d.response(h).generation_id for h in (a, b, c)} == {1}
    # each extension is an event, with the delay armed
    assert [e["timeout_ms"] for e in d.events_named("join_rearmed")] == [3000, 3000]


def test_initial_delay_without_new_members_completes_after_the_delay():
    d = Driver(GroupConfig(initial_rebalance_delay_ms=3000))
    a = d.join("g")
    d.advance(2999)
    assert d.response(a) is None
    d.advance(1)
    assert d.response(a).generation_id == 1


def test_delayed_join_completes_early_when_all_rejoin():
    d = Driver(cfg())
    gen, ids = form(d)
    h0 = d.join("g", ids[0])
    assert d.response(h0) is None
    h1 = d.join("g", ids[1])
    assert d.response(h0).generation_id == d.response(h1).generation_id == gen + 1


def test_delayed_join_expiry_removes_members_that_did_not_rejoin():
    d = Driver(cfg())
    gen, ids = form(d, n=3, rebalance_ms=20000, session_ms=30000)
    d.heartbeat("g", gen, ids[1])
    h0 = d.join("g", ids[0])
    d.advance(19999)
    assert d.response(h0) is None
    d.advance(1)
    r = d.response(h0)
    assert (r.generation_id, [m.member_id for m in r.members]) == (gen + 1, [ids[0]])
    removed = {e["member_id"]: e["reason"] for e in d.events_named("member_removed")}
    assert removed == {ids[1]: "join_timeout", ids[2]: "join_timeout"}


def test_leader_that_does_not_rejoin_is_replaced():
    d = Driver(cfg())
    gen, ids = form(d, n=3, session_ms=60000)
    h1 = d.join("g", ids[1], protocols=(("range", b"x"),))   # follower changes metadata
    h2 = d.join("g", ids[2])
    d.advance(30000)
    r1, r2 = d.response(h1), d.response(h2)
    assert r1.leader == r2.leader == ids[1] and [m.member_id for m in r1.members] == ids[1:]


def test_leader_leaving_elects_the_oldest_member():
    d = Driver(cfg())
    gen, ids = form(d, n=3)
    assert d.response(d.leave("g", (ids[0], None))).members == [(ids[0], None, 0)]
    assert d.core.get_group("g").leader_id == ids[1]


def test_nobody_rejoined_rearms_the_join_until_sessions_expire():
    d = Driver(cfg())
    gen, ids = form(d, n=2, instances=["s", None], session_ms=10000, rebalance_ms=5000)
    d.join("g", ids[1], protocols=(("range", b"changed"),))
    d.leave("g", (ids[1], None))                              # the only rejoiner leaves
    d.advance(5000)
    assert d.events_named("join_rearmed") and state(d) == PREPARING_REBALANCE
    d.advance(5000)                                           # the static member's session ends
    assert state(d) == EMPTY
    assert d.events_named("member_removed")[-1]["reason"] == "session_timeout"
    key, value = decode_record(*d.log()[-1])
    assert key == GroupMetadataKey("g") and value.members == () and value.generation == gen + 1


# ------------------------------------------------------------------ liveness

def test_session_expiry_removes_the_member_and_rebalances():
    d = Driver(cfg())
    gen, ids = form(d, session_ms=10000)
    for t in range(3):
        d.advance(3000)
        assert d.response(d.heartbeat("g", gen, ids[0])).error_code == 0
    d.advance(1000)                            # t=10000 since c1's last sign of life (its sync)
    assert state(d) == PREPARING_REBALANCE
    assert d.events_named("member_removed")[-1] == {
        "partition": 0, "group": "g", "member_id": ids[1],
        "group_instance_id": None, "reason": "session_timeout"}
    assert d.response(d.heartbeat("g", gen, ids[0])).error_code == errors.REBALANCE_IN_PROGRESS


def test_a_mass_session_expiry_removes_every_member_once_in_timer_order():
    """300 members go silent together (their coordinator moved, say): one tick fires every
    expiry, each once, in (deadline, sequence) order, and the group rebalances empty.  The due
    timers come from one scan, each checked still armed before it fires (a scan per fired timer
    made this quadratic: seconds of the core's lock for a group of 1,000)."""
    d = Driver(cfg())
    gen, ids = form(d, n=300, session_ms=10000)
    d.advance(2000)
    assert d.response(d.heartbeat("g", gen, ids[-1])).error_code == 0   # the last one lives 2 s longer
    removed_before = len(d.events_named("member_removed"))
    d.advance(8000)
    removed = d.events_named("member_removed")[removed_before:]
    assert [e["member_id"] for e in removed] == ids[:-1]   # the join/sync order is the timer order
    assert all(e["reason"] == "session_timeout" for e in removed)
    assert state(d) == PREPARING_REBALANCE and list(d.core.get_group("g").members) == [ids[-1]]
    d.advance(2000)
    assert d.events_named("member_removed")[-1]["member_id"] == ids[-1]
    assert len(d.events_named("member_removed")) == removed_before + 300
    assert state(d) in (EMPTY, DEAD)


def test_new_member_join_times_out_after_five_minutes():
    d = Driver(cfg(max_session_timeout_ms=1800000))
    gen, ids = form(d, session_ms=1800000, rebalance_ms=1800000)
    h = d.join("g", client_id="late", session_ms=1800000, rebalance_ms=1800000)
    d.advance(300000)
    assert d.response(h).error_code == errors.UNKNOWN_MEMBER_ID
    assert d.events_named("member_removed")[-1]["reason"] == "new_member_timeout"


def test_delayed_sync_expiry_removes_members_that_did_not_sync():
    d = Driver(cfg())
    gen, ids = form(d, rebalance_ms=20000, session_ms=60000, assign=False)
    s0 = d.sync("g", gen, ids[0], [(ids[0], b"a"), (ids[1], b"b")])
    assert d.response(s0).assignment == b"a" and state(d) == STABLE
    d.advance(19999)
    assert state(d) == STABLE
    d.advance(1)
    assert state(d) == PREPARING_REBALANCE and not d.core.get_group("g").has(ids[1])
    assert d.events_named("member_removed")[-1]["reason"] == "sync_timeout"


def test_everyone_syncing_cancels_the_delayed_sync():
    d = Driver(cfg())
    gen, ids = form(d, rebalance_ms=20000, session_ms=60000)
    assert not d.core.timers.is_scheduled(sync_key("g"))
    d.advance(25000)
    assert state(d) == STABLE


# ------------------------------------------------------------------ static membership

def test_static_replace_while_preparing_fences_the_old_parked_join():
    d = Driver(cfg())
    gen, ids = form(d, instances=["a", "b"])
    old = d.join("g", ids[1], instance="b", protocols=(("range", b"z"),))   # parks, rebalance
    new = d.join("g", "", instance="b", protocols=(("range", b"z"),))
    r = d.response(old)
    assert (r.error_code, r.member_id) == (errors.FENCED_INSTANCE_ID, ids[1])
    assert d.events_named("member_removed")[-1]["reason"] == "fenced"
    d.join("g", ids[0], instance="a")
    assert d.response(new).member_id == "b-uuid3" and d.response(new).generation_id == gen + 1


def test_static_replace_in_stable_stores_the_group_then_answers():
    d = Driver(cfg(), auto_complete=False)
    handles = [d.join("g", instance=i) for i in ("a", "b")]
    d.advance(0)
    ids = [d.response(h).member_id for h in handles]
    syncs = [d.sync("g", 1, ids[0], [(ids[0], b"A"), (ids[1], b"B")]), d.sync("g", 1, ids[1])]
    d.complete()
    assert [d.response(s).assignment for s in syncs] == [b"A", b"B"]
    h = d.join("g", "", instance="b")
    assert d.response(h) is None and d.pending             # stored before the answer
    d.complete()
    r = d.response(h)
    assert (r.error_code, r.member_id, r.leader, r.generation_id) == (0, "b-uuid3", ids[0], 1)
    stored = d.core.durable_view()["groups"]["g"]
    assert [m.member_id for m in stored.members] == [ids[0], "b-uuid3"] and stored.members[1].assignment == b"B"
    assert state(d) == STABLE
    # the old id is fenced everywhere
    assert d.response(d.heartbeat("g", 1, ids[1], "b")).error_code == errors.FENCED_INSTANCE_ID
    assert d.response(d.sync("g", 1, ids[1], instance="b")).error_code == errors.FENCED_INSTANCE_ID
    assert d.response(d.join("g", ids[1], instance="b")).error_code == errors.FENCED_INSTANCE_ID
    assert d.response(d.heartbeat("g", 1, "b-uuid3", "b")).error_code == 0
    assert d.response(d.join("g", "nope", instance="zz")).error_code == errors.UNKNOWN_MEMBER_ID


def test_static_replace_store_failure_reverts_the_member_id():
    d = Driver(cfg())
    gen, ids = form(d, instances=["a", "b"])
    d.fail_next = [errors.NOT_LEADER_OR_FOLLOWER]
    r = d.response(d.join("g", "", instance="b"))
    assert (r.error_code, r.member_id) == (errors.NOT_COORDINATOR, "")
    assert d.core.get_group("g").static_members["b"] == ids[1]
    assert d.response(d.heartbeat("g", gen, ids[1], "b")).error_code == 0


def test_static_replace_during_completing_rebalance_rebalances_and_fences_the_parked_sync():
    d = Driver(cfg())
    gen, ids = form(d, instances=["a", "b"], assign=False)
    parked = d.sync("g", gen, ids[1], instance="b")
    h = d.join("g", "", instance="b")
    assert d.response(parked).error_code == errors.FENCED_INSTANCE_ID
    assert state(d) == PREPARING_REBALANCE and d.response(h) is None


def test_static_member_leaves_by_instance_id():
    d = Driver(cfg())
    gen, ids = form(d, instances=["a", "b"])
    r = d.response(d.leave("g", ("", "b"), ("wrong", "a"), ("ghost", None)))
    assert r.members == [("", "b", 0), ("wrong", "a", errors.FENCED_INSTANCE_ID),
                         ("ghost", None, errors.UNKNOWN_MEMBER_ID)]
    assert list(d.core.get_group("g").members) == [ids[0]]


# ------------------------------------------------------------------ SyncGroup

def test_sync_errors():
    d = Driver(cfg(), load=False)
    assert d.response(d.sync("g", 1, "m")).error_code == errors.NOT_COORDINATOR
    d.apply(d.core.begin_load(0))
    assert d.response(d.sync("g", 1, "m")).error_code == errors.REBALANCE_IN_PROGRESS   # not 14
    d.apply(d.core.finish_load(0))
    assert d.response(d.sync("", 1, "m")).error_code == errors.INVALID_GROUP_ID
    assert d.response(d.sync("g", 1, "m")).error_code == errors.UNKNOWN_MEMBER_ID
    gen, ids = form(d, assign=False)
    assert d.response(d.sync("g", gen, "nobody")).error_code == errors.UNKNOWN_MEMBER_ID
    assert d.response(d.sync("g", gen + 1, ids[1])).error_code == errors.ILLEGAL_GENERATION
    assert d.response(d.sync("g", gen, ids[1], protocol_type="x")).error_code == errors.INCONSISTENT_GROUP_PROTOCOL
    assert d.response(d.sync("g", gen, ids[1], protocol_name="x")).error_code == errors.INCONSISTENT_GROUP_PROTOCOL
    d.join("g", ids[0], protocols=(("range", b"changed"),))
    assert d.response(d.sync("g", gen, ids[1])).error_code == errors.REBALANCE_IN_PROGRESS


def test_sync_answers_after_the_group_record_is_committed():
    d = Driver(cfg(), auto_complete=False)
    h = [d.join("g"), d.join("g")]
    d.advance(0)
    ids = [d.response(x).member_id for x in h]
    f = d.sync("g", 1, ids[1])
    l_ = d.sync("g", 1, ids[0], [(ids[0], b"x")])              # the follower's assignment is missing
    assert d.response(f) is d.response(l_) is None and len(d.pending) == 1
    assert d.core.durable_view()["groups"] == {}
    d.complete()
    assert d.response(l_).assignment == b"x" and d.response(f).assignment == b""
    assert d.core.durable_view()["groups"]["g"].generation == 1
    later = d.response(d.sync("g", 1, ids[1]))
    assert (later.error_code, later.protocol_name) == (0, "range")


@pytest.mark.parametrize("append_error,expected", [
    (errors.REQUEST_TIMED_OUT, errors.REBALANCE_IN_PROGRESS),
    (errors.NOT_ENOUGH_REPLICAS, errors.COORDINATOR_NOT_AVAILABLE),
    (errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, errors.COORDINATOR_NOT_AVAILABLE),
    (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.COORDINATOR_NOT_AVAILABLE),
    (errors.NOT_LEADER_OR_FOLLOWER, errors.NOT_COORDINATOR),
    (errors.KAFKA_STORAGE_ERROR, errors.NOT_COORDINATOR),
    (errors.MESSAGE_TOO_LARGE, errors.UNKNOWN_SERVER_ERROR),
    (errors.INVALID_REQUIRED_ACKS, errors.INVALID_REQUIRED_ACKS),
])
def test_group_record_append_error_mapping(append_error, expected):
    d = Driver(cfg())
    h = [d.join("g"), d.join("g")]
    d.advance(0)
    ids = [d.response(x).member_id for x in h]
    f = d.sync("g", 1, ids[1])
    d.fail_next = [append_error]
    l_ = d.sync("g", 1, ids[0], [(ids[0], b"x"), (ids[1], b"y")])
    assert d.response(l_).error_code == d.response(f).error_code == expected
    assert d.response(f).protocol_type is None
    assert state(d) == PREPARING_REBALANCE and d.core.durable_view()["groups"] == {}


def test_superseded_parked_sync_is_answered():
    d = Driver(cfg())
    gen, ids = form(d, assign=False)
    a, b = d.sync("g", gen, ids[1]), d.sync("g", gen, ids[1])
    assert d.response(a).error_code == errors.REBALANCE_IN_PROGRESS and d.response(b) is None


# ------------------------------------------------------------------ Heartbeat

def test_heartbeat_errors_and_states():
    d = Driver(cfg(), load=False)
    assert d.response(d.heartbeat("g", 1, "m")).error_code == errors.NOT_COORDINATOR
    d.apply(d.core.begin_load(0))
    assert d.response(d.heartbeat("g", 1, "m")).error_code == errors.NONE   # loading: blindly fine
    d.apply(d.core.finish_load(0))
    assert d.response(d.heartbeat("", 1, "m")).error_code == errors.INVALID_GROUP_ID
    assert d.response(d.heartbeat("g", 1, "m")).error_code == errors.UNKNOWN_MEMBER_ID
    gen, ids = form(d, instances=["a", None], assign=False)
    assert d.response(d.heartbeat("g", gen, ids[1])).error_code == errors.NONE          # CompletingRebalance
    assert d.response(d.heartbeat("g", gen, "x")).error_code == errors.UNKNOWN_MEMBER_ID
    assert d.response(d.heartbeat("g", gen + 1, ids[1])).error_code == errors.ILLEGAL_GENERATION
    assert d.response(d.heartbeat("g", gen, "x", "a")).error_code == errors.FENCED_INSTANCE_ID
    d.sync("g", gen, ids[0], [])
    assert d.response(d.heartbeat("g", gen, ids[1])).error_code == errors.NONE          # Stable
    d.join("g", ids[0], instance="a")
    assert d.response(d.heartbeat("g", gen, ids[1])).error_code == errors.REBALANCE_IN_PROGRESS


# ------------------------------------------------------------------ LeaveGroup

def test_leave_errors():
    d = Driver(cfg(), load=False)
    assert d.response(d.leave("g", ("m", None))).error_code == errors.NOT_COORDINATOR
    d.apply(d.core.begin_load(0))
    assert d.response(d.leave("g", ("m", None))).error_code == errors.COORDINATOR_LOAD_IN_PROGRESS
    d.apply(d.core.finish_load(0))
    assert d.response(d.leave("", ("m", None))).error_code == errors.INVALID_GROUP_ID
    r = d.response(d.leave("g", ("m", None)))
    assert (r.error_code, r.members) == (0, [("m", None, errors.UNKNOWN_MEMBER_ID)])


def test_pending_member_leave():
    d = Driver(cfg())
    mid = d.response(d.join("g", require_known=True)).member_id
    assert d.response(d.leave("g", (mid, None))).members == [(mid, None, 0)]
    assert d.events_named("pending_member_removed")[0]["reason"] == "left"


def test_last_member_leaving_empties_the_group_and_stores_it():
    d = Driver(cfg())
    gen, ids = form(d, n=1)
    d.leave("g", (ids[0], None))
    assert state(d) == EMPTY
    stored = d.core.durable_view()["groups"]["g"]
    assert (stored.generation, stored.members, stored.protocol, stored.leader) == (gen + 1, (), None, None)
    assert d.events_named("group_stored")[-1]["reason"] == "empty"
    assert d.response(d.join("g", ids[0])).error_code == errors.UNKNOWN_MEMBER_ID


def test_leaving_member_with_a_parked_join_gets_it_answered():
    d = Driver(cfg())
    gen, ids = form(d)
    h = d.join("g", ids[1], protocols=(("range", b"changed"),))
    assert d.response(h) is None
    d.leave("g", (ids[1], None))
    assert d.response(h).error_code == errors.UNKNOWN_MEMBER_ID
    assert d.core.get_group("g").num_awaiting_join == 0   # the leaver no longer counts as awaiting
    h0 = d.join("g", ids[0])                             # so the one member left completes the join
    assert (d.response(h0).generation_id, [m.member_id for m in d.response(h0).members]) == (gen + 1, [ids[0]])


def test_protocol_support_follows_the_members_that_remain():
    d = Driver(cfg())
    both = (("roundrobin", b""), ("range", b""))
    gen, ids = form(d, protocols=[both, both])
    d.leave("g", (ids[0], None))
    h1 = d.join("g", ids[1], protocols=(("range", b""),))            # drops roundrobin
    assert d.response(h1).protocol_name == "range"
    # nobody supports roundrobin any more: a member offering only it is inconsistent; range is fine
    assert d.response(d.join("g", protocols=(("roundrobin", b""),))).error_code == errors.INCONSISTENT_GROUP_PROTOCOL
    h = d.join("g", protocols=(("range", b""),))
    assert d.response(h) is None and d.core.get_group("g").size == 2   # accepted: parked in the rebalance


# ------------------------------------------------------------------ unload

def test_unload_answers_parked_requests_and_orphaned_appends():
    d = Driver(cfg(), auto_complete=False)
    h = [d.join("g"), d.join("g")]
    d.advance(0)
    ids = [d.response(x).member_id for x in h]
    f = d.sync("g", 1, ids[1])
    j = d.join("k")                                   # parked in PreparingRebalance
    leader = d.sync("g", 1, ids[0], [])
    d.apply(d.core.unload(d.now))
    assert d.response(f).error_code == d.response(leader).error_code == errors.NOT_COORDINATOR
    r = d.response(j)
    assert (r.error_code, r.member_id) == (errors.NOT_COORDINATOR, "client-uuid3")
    assert d.core.status == "unloaded" and d.core.group_ids() == [] and d.core.next_deadline_ms() is None
    d.complete()                                       # the group record completes after the unload
    assert d.core.durable_view() == {"offsets": {}, "groups": {}, "txn_offsets": {}}
    assert d.response(d.join("g")).error_code == errors.NOT_COORDINATOR
    assert any(e["to"] == DEAD for e in d.events_named("group_state_changed"))


def test_begin_load_while_active_unloads_first():
    d = Driver(cfg())
    h = d.join("g")
    d.apply(d.core.begin_load(d.now))
    assert d.response(h).error_code == errors.NOT_COORDINATOR and d.core.status == "loading"


def test_coordinator_interface():
    c = PartitionCoordinator(3, GroupConfig(), lambda: "u")
    assert c.status == "unloaded" and c.next_deadline_ms() is None and c.group_ids() == []
    out = c.begin_load(0)
    assert out.events == [Event("partition_loading", {"partition": 3})] and c.status == "loading"
    out.extend(c.finish_load(0))
    assert c.status == "active" and c.next_deadline_ms() == 600000


# ------------------------------------------------------------------ corner cases

def test_static_leader_that_does_not_rejoin_stays_but_loses_the_leadership():
    d = Driver(cfg())
    gen, ids = form(d, instances=["s", None], session_ms=60000, rebalance_ms=5000)
    h = d.join("g", ids[1], protocols=(("range", b"x"),))
    d.advance(5000)
    r = d.response(h)
    assert (r.generation_id, r.leader, [m.member_id for m in r.members]) == (gen + 1, ids[1], ids)
    group = d.core.get_group("g")
    assert state(d) == COMPLETING_REBALANCE and list(group.pending_sync) == ids   # the static member stays


def test_a_member_parked_in_join_outlives_its_session_timeout():
    d = Driver(cfg())
    gen, ids = form(d, session_ms=10000, rebalance_ms=30000)
    h = d.join("g", ids[0])                                   # parks at t=0
    d.advance(10000)                                          # both sessions end; only ids[1] is removed
    assert [e["member_id"] for e in d.events_named("member_removed")] == [ids[1]]
    assert d.response(h).generation_id == gen + 1             # then everyone left has joined


def test_known_member_with_other_protocols_and_pending_member_with_an_instance():
    d = Driver(cfg())
    gen, ids = form(d)
    r = d.response(d.join("g", ids[1], protocols=(("other", b""),)))
    assert (r.error_code, r.member_id) == (errors.INCONSISTENT_GROUP_PROTOCOL, ids[1])
    pending = d.response(d.join("g", require_known=True)).member_id
    assert d.response(d.join("g", pending, instance="i")).error_code == errors.UNKNOWN_SERVER_ERROR
    assert d.response(d.leave("g", (pending, "i"))).error_code == errors.UNKNOWN_SERVER_ERROR
    assert d.core.get_group("g").is_pending_member(pending)


def test_pending_member_leaving_or_expiring_lets_the_join_complete():
    for leave in (True, False):
        d = Driver(cfg())
        gen, ids = form(d, n=1, session_ms=20000)
        pending = d.response(d.join("g", require_known=True, session_ms=6000)).member_id
        h = d.join("g", ids[0])
        assert d.response(h) is None                          # waits for the pending member
        if leave:
            d.leave("g", (pending, None))
        else:
            d.advance(6000)
        assert d.response(h).generation_id == gen + 1


def test_static_replace_in_stable_with_a_protocol_change_rebalances():
    d = Driver(cfg())
    gen, ids = form(d, instances=["a", "b"], protocols=[(("range", b""), ("rr", b"")), (("range", b""), ("rr", b""))])
    appended = len(d.emitted)
    h = d.join("g", "", instance="b", protocols=(("rr", b""),))
    assert d.response(h) is None and state(d) == PREPARING_REBALANCE and len(d.emitted) == appended
    d.join("g", ids[0], instance="a", protocols=(("range", b""), ("rr", b"")))
    assert d.response(h).protocol_name == "rr"


def test_unloaded_coordinator_ignores_ticks():
    d = Driver(cfg())
    form(d)
    d.apply(d.core.unload(d.now))
    assert d.core.on_tick(10**9).events == [] and d.core.next_deadline_ms() is None
    assert d.core.unload(0).events == []                       # unloading twice is a no-op


def test_zero_rebalance_timeout_does_not_spin():
    d = Driver(cfg())
    gen, ids = form(d, n=2, instances=["s", None], rebalance_ms=0, session_ms=6000)
    d.join("g", ids[1], protocols=(("range", b"changed"),), rebalance_ms=0)
    d.leave("g", (ids[1], None))                 # nobody left to rejoin: the join re-arms every ms
    d.advance(6000)
    assert state(d) == EMPTY
