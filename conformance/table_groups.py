"""Cases of the group coordinator: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
FindCoordinator, DescribeGroups, ListGroups, DeleteGroups.

Groups that a case changes are its own (named after the case's version); the others are shared: ``stable``
(one member, synced), ``rebalancing`` (one synced member and a second member's join pending: the group is
PreparingRebalance), ``committed`` (offsets committed by a standalone consumer: Empty).
"""
from __future__ import annotations

from typing import Any

from conformance.cases import Case, each_version
from conformance.side import SESSION_MS, Commit, Group, PendingJoin, Topic, Produce, assignment, join_fields

T1 = [Topic("t1", 1, 2), Produce("t1", 0, 5)]
STABLE = T1 + [Group("stable", "t1")]
REBAL = T1 + [Group("rebalancing", "t1"), PendingJoin("rebalancing", "t1")]
COMMITTED = T1 + [Commit("committed", "t1", 0, 3)]


def join(v: int, group: str, member: str = "", session_ms: int = SESSION_MS, ptype: str = "consumer") -> Any:
    f = join_fields(group, "t1", member, session_ms)
    f["protocol_type"] = ptype
    return f


def sync(group: str, gen: Any, member: Any, assign: bool = True) -> Any:
    return {"group_id": group, "generation_id": gen, "member_id": member, "group_instance_id": None,
            "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": member, "assignment": assignment("t1", [0])}] if assign else []}


def heartbeat(group: str, gen: Any, member: Any) -> Any:
    return {"group_id": group, "generation_id": gen, "member_id": member, "group_instance_id": None}


def commit(v: int, group: str, gen: Any = -1, member: Any = "", offset: int = 2) -> Any:
    return {"group_id": group, "generation_id_or_member_epoch": gen, "member_id": member, "group_instance_id": None,
            "retention_time_ms": -1, "topics": [{"name": "t1", "partitions": [
                {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                 "commit_timestamp": -1, "committed_metadata": "meta"}]}]}


def fetch_offsets(group: str, topics: list[str] | None = ("t1",)) -> Any:
    return {"group_id": group, "require_stable": False,
            "topics": None if topics is None else [{"name": t, "partition_indexes": [0]} for t in topics]}


def leave(v: int, group: str, member: Any) -> Any:
    return {"group_id": group, "member_id": member, "members": [{"member_id": member, "group_instance_id": None}]}


def cases() -> list[Case]:
    out: list[Case] = []
    J = range(0, 8)
    out += each_version("new_group", 11, J, lambda v: join(v, f"join-new-{v}"), setup=T1,
                        target=lambda v: f"coordinator:join-new-{v}")
    out += each_version("unknown_member", 11, J, lambda v: join(v, "stable", "nobody"), setup=STABLE,
                        target="coordinator:stable")
    out += each_version("invalid_session_timeout", 11, J, lambda v: join(v, "stable", session_ms=10),
                        setup=STABLE, target="coordinator:stable")
    out += each_version("inconsistent_protocol", 11, J, lambda v: join(v, "stable", ptype="connect"),
                        setup=STABLE, target="coordinator:stable")
    out += each_version("not_coordinator", 11, J, lambda v: join(v, "stable"), setup=STABLE,
                        target="other:coordinator:stable")

    S = range(0, 6)
    out += each_version("leader_assigns", 14, S, lambda v: sync(f"sync-{v}", f"$sync-{v}.generation",
                                                                 f"$sync-{v}.member"),
                        setup=lambda v: T1 + [Group(f"sync-{v}", "t1", sync=False)],
                        target=lambda v: f"coordinator:sync-{v}")
    out += each_version("unknown_member", 14, S, sync("stable", "$stable.generation", "nobody"), setup=STABLE,
                        target="coordinator:stable")
    out += each_version("illegal_generation", 14, S, sync("stable", 99, "$stable.member"), setup=STABLE,
                        target="coordinator:stable")
    out += each_version("rebalance_in_progress", 14, S, sync("rebalancing", "$rebalancing.generation",
                                                             "$rebalancing.member"), setup=REBAL,
                        target="coordinator:rebalancing")
    out += each_version("not_coordinator", 14, S, sync("stable", "$stable.generation", "$stable.member"),
                        setup=STABLE, target="other:coordinator:stable")

    H = range(0, 5)
    out += each_version("stable", 12, H, heartbeat("stable", "$stable.generation", "$stable.member"),
                        setup=STABLE, target="coordinator:stable")
    out += each_version("unknown_member", 12, H, heartbeat("stable", "$stable.generation", "nobody"),
                        setup=STABLE, target="coordinator:stable")
    out += each_version("illegal_generation", 12, H, heartbeat("stable", 99, "$stable.member"), setup=STABLE,
                        target="coordinator:stable")
    out += each_version("rebalance_in_progress", 12, H, heartbeat("rebalancing", "$rebalancing.generation",
                                                                  "$rebalancing.member"),
                        setup=REBAL, target="coordinator:rebalancing")
    out += each_version("not_coordinator", 12, H, heartbeat("stable", "$stable.generation", "$stable.member"),
                        setup=STABLE, target="other:coordinator:stable")
    out += each_version("unknown_group", 12, H, heartbeat("hb-no-group", 1, "nobody"),
                        setup=T1, target="coordinator:hb-no-group")

    LV = range(0, 5)
    out += each_version("member_leaves", 13, LV, lambda v: leave(v, f"leave-{v}", f"$leave-{v}.member"),
                        setup=lambda v: T1 + [Group(f"leave-{v}", "t1")], target=lambda v: f"coordinator:leave-{v}")
    out += each_version("unknown_member", 13, LV, lambda v: leave(v, "stable", "nobody"), setup=STABLE,
                        target="coordinator:stable")
    out += each_version("not_coordinator", 13, LV, lambda v: leave(v, "stable", "$stable.member"), setup=STABLE,
                        target="other:coordinator:stable")

    C = range(2, 9)
    out += each_version("standalone", 8, C, lambda v: commit(v, "committed", offset=3), setup=COMMITTED,
                        target="coordinator:committed")
    out += each_version("member", 8, C, lambda v: commit(v, "stable", "$stable.generation", "$stable.member"),
                        setup=STABLE, target="coordinator:stable")
    out += each_version("unknown_member", 8, C, lambda v: commit(v, "stable", "$stable.generation", "nobody"),
                        setup=STABLE, target="coordinator:stable")
    out += each_version("illegal_generation", 8, C, lambda v: commit(v, "stable", 99, "$stable.member"),
                        setup=STABLE, target="coordinator:stable")
    out += each_version("rebalance_in_progress", 8, C, lambda v: commit(v, "rebalancing", "$rebalancing.generation",
                                                                       "$rebalancing.member"),
                        setup=REBAL, target="coordinator:rebalancing")
    out += each_version("not_coordinator", 8, C, lambda v: commit(v, "committed"), setup=COMMITTED,
                        target="other:coordinator:committed")
    out += each_version("unknown_topic", 8, C, lambda v: {**commit(v, "committed"), "topics": [
        {"name": "no-such-topic", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                  "committed_leader_epoch": -1, "commit_timestamp": -1,
                                                  "committed_metadata": ""}]}]},
                        setup=COMMITTED, target="coordinator:committed")

    OF = range(1, 8)
    out += each_version("committed", 9, OF, fetch_offsets("committed"), setup=COMMITTED,
                        target="coordinator:committed")
    out += each_version("all_topics", 9, range(2, 8), fetch_offsets("committed", None), setup=COMMITTED,
                        target="coordinator:committed")
    out += each_version("unknown_group", 9, OF, fetch_offsets("of-no-group"), setup=T1,
                        target="coordinator:of-no-group")
    out += each_version("not_coordinator", 9, OF, fetch_offsets("committed"), setup=COMMITTED,
                        target="other:coordinator:committed")

    out += each_version("group", 10, range(0, 4), {"key": "stable", "key_type": 0}, setup=STABLE)

    D = range(0, 6)
    describe = {"groups": ["stable"], "include_authorized_operations": False}
    out += each_version("stable", 15, D, describe, setup=STABLE, target="coordinator:stable")
    out += each_version("empty", 15, D, {**describe, "groups": ["committed"]}, setup=COMMITTED,
                        target="coordinator:committed")
    out += each_version("dead", 15, D, {**describe, "groups": ["dg-no-group"]}, setup=T1,
                        target="coordinator:dg-no-group")
    out += each_version("rebalancing", 15, D, {**describe, "groups": ["rebalancing"]}, setup=REBAL,
                        target="coordinator:rebalancing")
    out += each_version("not_coordinator", 15, D, describe, setup=STABLE, target="other:coordinator:stable")

    LG = range(0, 5)
    # the coordinator of every group (one offsets partition), and the broker that coordinates none: by role, not
    # by id, since Kafka places the offsets partition's leader at random
    out += each_version("coordinator", 16, LG, {"states_filter": []}, setup=STABLE + COMMITTED,
                        target="coordinator:stable")
    out += each_version("other_broker", 16, LG, {"states_filter": []}, setup=STABLE + COMMITTED,
                        target="other:coordinator:stable")
    out += each_version("stable_only", 16, [4], {"states_filter": ["Stable"]}, setup=STABLE + COMMITTED,
                        target="coordinator:stable")

    DG = range(0, 3)
    out += each_version("empty_group", 42, DG, lambda v: {"groups_names": [f"delete-{v}"]},
                        setup=lambda v: T1 + [Commit(f"delete-{v}", "t1", 0, 1)],
                        target=lambda v: f"coordinator:delete-{v}")
    out += each_version("non_empty_group", 42, DG, {"groups_names": ["stable"]}, setup=STABLE,
                        target="coordinator:stable")
    out += each_version("group_id_not_found", 42, DG, {"groups_names": ["del-no-group"]}, setup=T1,
                        target="coordinator:del-no-group")
    out += each_version("not_coordinator", 42, DG, {"groups_names": ["committed"]}, setup=COMMITTED,
                        target="other:coordinator:committed")
    return out
