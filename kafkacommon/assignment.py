"""Replica placement like Kafka's rack-unaware AdminUtils.assignReplicasToBrokers.

The first replica of partition p goes to brokers[(p + start) % n]; the
followers follow at a shift that grows by one every n partitions, so that
leaders and followers both spread evenly.  Kafka draws ``start`` and the
initial ``shift`` at random; here the caller passes them (from a seeded RNG
in the shell), which keeps the core deterministic.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from kafkacommon.errors import (BROKER_NOT_AVAILABLE, INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT,
                                INVALID_REPLICATION_FACTOR, UNKNOWN_SERVER_ERROR)


class AssignmentError(ValueError):
    """An assignment Kafka refuses; ``code`` is its error (INVALID_REPLICA_ASSIGNMENT unless told)."""

    def __init__(self, message: str, code: int = INVALID_REPLICA_ASSIGNMENT) -> None:
        super().__init__(message)
        self.code = code


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(num_partitions: int, replication_factor: int, brokers: Sequence[int],
                    start_index: int = 0, shift: int = 0, start_partition: int = 0) -> dict[int, tuple[int, ...]]:
    """Kafka's assignReplicasToBrokersRackUnaware: ``num_partitions`` partitions numbered from
    ``start_partition`` (CreatePartitions continues a topic's numbering)."""
    if num_partitions <= 0:
        raise AssignmentError("Number of partitions must be larger than 0.", INVALID_PARTITIONS)
    if replication_factor <= 0:
        raise AssignmentError("Replication factor must be larger than 0.", INVALID_REPLICATION_FACTOR)
    ids = sorted(brokers)
    n = len(ids)
    if replication_factor > n:
        raise AssignmentError(f"Replication factor: {replication_factor} larger than available brokers: {n}.",
                              INVALID_REPLICATION_FACTOR)
    out: dict[int, tuple[int, ...]] = {}
    start = start_index % n
    next_shift = shift % n
    for p in range(max(0, start_partition), max(0, start_partition) + num_partitions):
        if p > 0 and p % n == 0:
            next_shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[_replica_index(first, next_shift, j, n)])
        out[p] = tuple(replicas)
    return out


def check_new_topic_assignment(assignment: Mapping[int, Sequence[int]]) -> None:
    """Kafka 2.8's AdminZkClient.validateTopicCreate on a manual assignment (CreateTopics): one replication
    factor, no broker twice in a partition, partitions 0..n-1.  (Unknown brokers are not checked, as in
    Kafka: such a partition has no live replica to lead it.)"""
    if len({len(r) for r in assignment.values()}) != 1:
        raise AssignmentError("All partitions should have the same number of replicas")
    for replicas in assignment.values():
        if len(set(replicas)) != len(replicas):
            shown = ", ".join(f"{p} -> List({', '.join(map(str, r))})" for p, r in assignment.items())
            raise AssignmentError(f"Duplicate replica assignment found: Map({shown})")
    n = len(assignment)
    if sum(p for p in assignment if p >= 0) != n * (n - 1) // 2 or sorted(assignment) != list(range(n)):
        raise AssignmentError("partitions should be a consecutive 0-based integer sequence")


def new_partitions_assignment(topic: str, existing: Mapping[int, Sequence[int]], brokers: Sequence[int],
                              count: int, manual: Sequence[Sequence[int]] | None,
                              start_index: int | None = None) -> dict[int, tuple[int, ...]]:
    """Kafka 2.8's ZkAdminManager.createPartitions and AdminZkClient.createNewPartitionsAssignment: the
    assignment of the partitions that take ``topic`` from ``len(existing)`` to ``count`` partitions, either
    ``manual`` (one replica list per new partition) or drawn round-robin from the first broker at or above
    partition 0's first replica (``brokers``: every registered broker)."""
    old = len(existing)
    increment = count - old
    if increment < 0:
        raise AssignmentError(f"Topic currently has {old} partitions, which is higher than the requested {count}.",
                              INVALID_PARTITIONS)
    if increment == 0:
        raise AssignmentError(f"Topic already has {old} partitions.", INVALID_PARTITIONS)
    ids = sorted(brokers)
    proposed: dict[int, tuple[int, ...]] | None = None
    if manual is not None:
        unknown = sorted({b for r in manual for b in r} - set(ids))
        if unknown:
            raise AssignmentError(f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
        if len(manual) != increment:
            raise AssignmentError(f"Increasing the number of partitions by {increment} but {len(manual)} "
                                  f"assignments provided.")
        proposed = {old + i: tuple(r) for i, r in enumerate(manual)}
    if 0 not in existing:
        raise AssignmentError(f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is "
                              f"missing. Assignment: {dict(existing)}", UNKNOWN_SERVER_ERROR)
    rf = len(existing[0])
    if proposed is not None:
        _check_added(proposed, rf, set(ids))
        return proposed
    first = existing[0][0] if existing[0] else 0
    start = start_index if start_index is not None else max(0, next((i for i, b in enumerate(ids) if b >= first), -1))
    return assign_replicas(increment, rf, ids, start_index=start, shift=start, start_partition=old)


def _check_added(proposed: Mapping[int, tuple[int, ...]], rf: int, available: set[int]) -> None:
    """Kafka's AdminZkClient.validateReplicaAssignment of manually assigned new partitions."""
    for p, replicas in proposed.items():
        if not replicas:
            raise AssignmentError(f"Cannot have replication factor of 0 for partition id {p}.")
        if len(set(replicas)) != len(replicas):
            raise AssignmentError(f"Duplicate brokers not allowed in replica assignment: "
                                  f"{', '.join(map(str, replicas))} for partition id {p}.")
        if not set(replicas) <= available:
            raise AssignmentError(f"Some brokers specified for partition id {p} are not available. Specified "
                                  f"brokers: {', '.join(map(str, replicas))}, available brokers: "
                                  f"{', '.join(map(str, sorted(available)))}.", BROKER_NOT_AVAILABLE)
    bad = sorted((p, len(r)) for p, r in proposed.items() if len(r) != rf)
    if bad:
        raise AssignmentError(f"Inconsistent replication factor between partitions, partition 0 has {rf} while "
                              f"partitions [{', '.join(str(p) for p, _ in bad)}] have replication factors "
                              f"[{', '.join(str(n) for _, n in bad)}], respectively.")
