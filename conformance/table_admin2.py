"""Cases of the rest of the admin surface: DeleteRecords, ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments, OffsetDelete.

A case that changes a topic or group has its own (named after the case's version); the shared ones are ``t1``,
``t3``, ``stable`` (a consumer group subscribed to t1), ``od-committed`` (offsets of an Empty group) and
``connect`` (a Stable group whose protocol type is not ``consumer``).
"""
from __future__ import annotations

from typing import Any

from conformance.cases import ELECTION_TYPE, Case, each_version
from conformance.side import Commit, Group, Produce, Topic

T1 = [Topic("t1", 1, 2), Produce("t1", 0, 5)]
STABLE = T1 + [Group("stable", "t1")]


def delete_records(topic: str, offset: int, partition: int = 0) -> Any:
    return {"topics": [{"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}],
            "timeout_ms": 30000}


def elect(topic: str | None, partitions: list[int] = (0,), election_type: int = 0) -> Any:
    return {"election_type": election_type, "timeout_ms": 30000,
            "topic_partitions": None if topic is None else [{"topic": topic, "partitions": list(partitions)}]}


def reassign(topic: str, replicas: list[int] | None, partition: int = 0) -> Any:
    return {"timeout_ms": 30000, "topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "replicas": replicas}]}]}


def list_reassignments(topics: dict[str, list[int]] | None) -> Any:
    return {"timeout_ms": 30000, "topics": None if topics is None else [
        {"name": t, "partition_indexes": ps} for t, ps in topics.items()]}


def offset_delete(group: str, topic: str = "t1") -> Any:
    return {"group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]}


def cases() -> list[Case]:
    out: list[Case] = []
    DR = range(0, 3)
    out += each_version("delete", 21, DR, lambda v: delete_records(f"dr-{v}", 2),
                        setup=lambda v: [Topic(f"dr-{v}", 1, 2), Produce(f"dr-{v}", 0, 5)],
                        target=lambda v: f"leader:dr-{v}:0")
    out += each_version("to_high_watermark", 21, DR, lambda v: delete_records(f"dr-hw-{v}", -1),
                        setup=lambda v: [Topic(f"dr-hw-{v}", 1, 2), Produce(f"dr-hw-{v}", 0, 5)],
                        target=lambda v: f"leader:dr-hw-{v}:0")
    out += each_version("below_log_start", 21, DR, lambda v: delete_records(f"dr-{v}", 1),
                        setup=lambda v: [Topic(f"dr-{v}", 1, 2), Produce(f"dr-{v}", 0, 5)],
                        target=lambda v: f"leader:dr-{v}:0")
    out += each_version("beyond_high_watermark", 21, DR, delete_records("t1", 100), setup=T1, target="leader:t1:0")
    out += each_version("negative_offset", 21, DR, delete_records("t1", -7), setup=T1, target="leader:t1:0")
    out += each_version("unknown_partition", 21, DR, delete_records("t1", 1, partition=5), setup=T1,
                        target="leader:t1:0")
    out += each_version("unknown_topic", 21, DR, delete_records("no-such-topic", 1), setup=T1)
    out += each_version("not_leader", 21, DR, delete_records("t1", 1), setup=T1, target="other:leader:t1:0")

    EL = range(0, 3)
    out += each_version("preferred_not_needed", 43, EL, elect("t1"), setup=T1, target="controller")
    out += each_version("unclean_not_needed", 43, range(1, 3), elect("t1", election_type=1), setup=T1,
                        target="controller")
    out += each_version("unknown_partition", 43, EL, elect("t1", [7]), setup=T1, target="controller")
    out += each_version("unknown_topic", 43, EL, elect("no-such-topic"), setup=T1, target="controller")
    out += each_version("not_controller", 43, EL, elect("t1"), setup=T1, target="other:controller")
    out += each_version("invalid_election_type", 43, range(1, 3), elect("t1", election_type=5), setup=T1,
                        target="controller", known={"error_code": ELECTION_TYPE,
                                                    "replica_election_results[*].partition_result[*].*": ELECTION_TYPE})
    out += each_version("all_partitions", 43, EL, elect(None), setup=T1, target="controller")

    # listed before any reassignment starts: nothing is in flight
    out += each_version("none", 46, [0], list_reassignments(None), setup=T1, target="controller")
    out += each_version("named_partition", 46, [0], list_reassignments({"t1": [0]}), setup=T1, target="controller")
    out += each_version("unknown_topic", 46, [0], list_reassignments({"no-such-topic": [0]}), target="controller")
    out += each_version("not_controller", 46, [0], list_reassignments(None), target="other:controller")

    out += each_version("move", 45, [0], reassign("moved", [2]), setup=[Topic("moved", 1, 1)], target="controller")
    out += each_version("unknown_topic", 45, [0], reassign("no-such-topic", [1]), target="controller")
    out += each_version("unknown_partition", 45, [0], reassign("t1", [1], partition=4), setup=T1,
                        target="controller")
    out += each_version("duplicate_replicas", 45, [0], reassign("t1", [1, 1]), setup=T1, target="controller")
    out += each_version("unknown_broker", 45, [0], reassign("t1", [1, 7]), setup=T1, target="controller")
    out += each_version("empty_replicas", 45, [0], reassign("t1", []), setup=T1, target="controller")
    out += each_version("cancel_none", 45, [0], reassign("t1", None), setup=T1, target="controller")
    out += each_version("not_controller", 45, [0], reassign("t1", [2, 1]), setup=T1, target="other:controller")

    committed = T1 + [Commit("od-committed", "t1", 0, 3)]
    out += each_version("empty_group", 47, [0], offset_delete("od-committed"), setup=committed,
                        target="coordinator:od-committed")
    out += each_version("subscribed", 47, [0], offset_delete("stable"), setup=STABLE, target="coordinator:stable")
    out += each_version("not_subscribed", 47, [0], offset_delete("stable", "t3"), setup=STABLE + [Topic("t3", 3, 2)],
                        target="coordinator:stable")
    out += each_version("unknown_group", 47, [0], offset_delete("od-no-group"), setup=T1,
                        target="coordinator:od-no-group")
    out += each_version("non_consumer_group", 47, [0], offset_delete("connect"),
                        setup=T1 + [Group("connect", "t1", protocol_type="connect")], target="coordinator:connect")
    out += each_version("unknown_topic", 47, [0], offset_delete("od-committed", "no-such-topic"), setup=committed,
                        target="coordinator:od-committed")
    out += each_version("not_coordinator", 47, [0], offset_delete("od-committed"), setup=committed,
                        target="other:coordinator:od-committed")
    return out
