"""A replica's role changes, sans-IO: what a LeaderAndIsr (or UpdateMetadata) does to one hosted partition.

Kafka's ReplicaManager.becomeLeaderOrFollower per partition: the same leader and leader epoch is only a
newer ISR; else this broker becomes the leader (makeLeader: the new epoch enters the leader epoch cache at
the log end, the leader learns the live brokers, then the core's become_leader) or a follower (makeFollower:
the core's become_follower, then fetch from the new leader, if there is one).  The broker's replica manager
(node/replicas/replica_manager.py) and the simulator's (sim/replicas.py) call these and carry out the
returned :class:`RoleChange` with their own logs, fetchers and waiters; the follower's fetch answer goes
through :func:`follower_fetched`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from kafkacommon.event import Event
from replication.partition import LogView, PartitionReplication

ISR = "isr"
LEADER = "leader"
FOLLOWER = "follower"


def leader_and_isr_action(repl: PartitionReplication | None, broker_id: int, leader: int, leader_epoch: int) -> str:
    """What one partition of a LeaderAndIsr does here: ISR (a newer ISR of the role it has), LEADER or FOLLOWER."""
    if repl is not None and repl.leader_epoch == leader_epoch and repl.leader_id == leader:
        return ISR
    return LEADER if leader == broker_id else FOLLOWER


def isr_update_is_newer(repl: PartitionReplication | None, leader_epoch: int, zk_version: int) -> bool:
    """UpdateMetadata's partition state: applied only as a newer ISR of the same leader epoch (after an AlterIsr)."""
    return repl is not None and repl.leader_epoch == leader_epoch and zk_version > repl.zk_version


@dataclass
class RoleChange:
    """What the shell carries out, in this order: ``epoch_start`` into the log's leader epoch cache, stop
    fetching (or fetch from ``fetch_from``), log ``events``, wake what waits on the partition, tell the
    role's listeners (the group coordinator), start fetching from ``fetch_from``."""
    is_leader: bool
    leader_epoch: int
    events: list[Event] = field(default_factory=list)
    epoch_start: tuple[int, int] | None = None   # (leader epoch, start offset) for the leader epoch cache
    fetch_from: tuple[int, int] | None = None    # (leader, leader epoch) a follower fetches from


def become_leader(repl: PartitionReplication, log: LogView, latest_cached_epoch: int, leader_epoch: int,
                  isr: Iterable[int], replicas: Iterable[int], zk_version: int, live: frozenset[int] | None,
                  now_ms: int) -> RoleChange:
    """Kafka's makeLeader.  ``latest_cached_epoch``: the newest epoch in the log's leader epoch cache."""
    change = RoleChange(True, leader_epoch)
    if leader_epoch > latest_cached_epoch:   # the new epoch starts at the log end, in the cache at once
        change.epoch_start = (leader_epoch, log.log_end_offset)
    if live is not None:
        repl.set_live_brokers(live)
    change.events = repl.become_leader(leader_epoch, list(isr), list(replicas), zk_version, log, now_ms)
    return change


def become_follower(repl: PartitionReplication, leader: int, leader_epoch: int, isr: Iterable[int],
                    replicas: Iterable[int], zk_version: int) -> RoleChange:
    """Kafka's makeFollower: the core forgets the leader's state; fetch from the leader if there is one."""
    change = RoleChange(False, leader_epoch)
    change.events = repl.become_follower(leader, leader_epoch, list(isr), list(replicas), zk_version)
    change.fetch_from = (leader, leader_epoch) if leader >= 0 else None
    return change
