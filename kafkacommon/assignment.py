"""Replica placement like Kafka's rack-unaware AdminUtils.assignReplicasToBrokers.

The first replica of partition p goes to brokers[(p + start) % n]; the
followers follow at a shift that grows by one every n partitions, so that
leaders and followers both spread evenly.  Kafka draws ``start`` and the
initial ``shift`` at random; here the caller passes them (from a seeded RNG
in the shell), which keeps the core deterministic.
"""
from __future__ import annotations

from typing import Sequence


class AssignmentError(ValueError):
    pass


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(num_partitions: int, replication_factor: int, brokers: Sequence[int],
                    start_index: int = 0, shift: int = 0) -> dict[int, tuple[int, ...]]:
    if num_partitions <= 0:
        raise AssignmentError(f"number of partitions must be > 0, got {num_partitions}")
    if replication_factor <= 0:
        raise AssignmentError(f"replication factor must be > 0, got {replication_factor}")
    ids = sorted(brokers)
    n = len(ids)
    if replication_factor > n:
        raise AssignmentError(f"replication factor {replication_factor} larger than available brokers {n}")
    out: dict[int, tuple[int, ...]] = {}
    start = start_index % n
    next_shift = shift % n
    for p in range(num_partitions):
        if p > 0 and p % n == 0:
            next_shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[_replica_index(first, next_shift, j, n)])
        out[p] = tuple(replicas)
    return out
