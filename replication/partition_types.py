"""The terms one partition's replication state machine speaks in (replication/partition.py), as sans-IO values.

* :class:`LogView`, what the rules need from the local log (``PartitionLog`` and the simulator's ``SimLog``
  satisfy it);
* :class:`ReplicaSettings`, the broker's settings the rules read;
* the rules' answers: :class:`AlterIsrProposal` (a command for the shell to send to the controller),
  :class:`FetchOutcome` (one partition of a follower fetch) and :class:`AlterIsrOutcome`;
* the two checks a fetch of any kind goes through (a follower's, and a Fetch v12 consumer's through the Kafka
  listener): :func:`leader_epoch_error` (KIP-320) and :func:`divergence` (the last fetched epoch, IBP >= 2.7-IV1).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from kafkacommon import errors
from kafkacommon.errors import OFFSET_OUT_OF_RANGE
from kafkacommon.event import Event
from replication.remote_replica import UNKNOWN_OFFSET


class LogView(Protocol):
    """What the replication rules need from the local log (node.storage.log.PartitionLog fits)."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...


@dataclass
class ReplicaSettings:
    replica_lag_time_max_ms: int = 10000  # kafkasim's default; Kafka 2.8's is 30000
    min_insync_replicas: int = 1
    kip841: bool = False  # Kafka 3.3's eligibility (kafkasim.isr.kip841.enable); False: Kafka 2.8's rules
    # A planted bug (the simulator's sweeps; never in a real broker): the HW counts only followers caught up
    # within the lag, so an ISR member that fell behind (and is not yet shrunk away) no longer holds it back.
    planted_hw_ignores_lagging_isr: bool = False


@dataclass(frozen=True)
class AlterIsrProposal:
    """A command: ask the controller to set the ISR (leader epoch and zkVersion as known here)."""

    topic: str
    partition: int
    new_isr: tuple[int, ...]
    leader_epoch: int
    zk_version: int
    kind: str                   # "expand" or "shrink"
    changed: tuple[int, ...]    # the replica added, or the replicas removed

    def fields(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "new_isr": list(self.new_isr),
                "leader_epoch": self.leader_epoch, "zk_version": self.zk_version, "kind": self.kind,
                "changed": list(self.changed)}


@dataclass
class FetchOutcome:
    """The leader's answer to one partition of a follower fetch.

    ``read_offset`` None means: send no records (error, divergence, or unknown follower).
    """

    error: int = errors.NONE
    read_offset: int | None = None
    high_watermark: int = UNKNOWN_OFFSET
    leader_log_end_offset: int = UNKNOWN_OFFSET
    diverging_epoch: tuple[int, int] | None = None
    alter_isr: AlterIsrProposal | None = None
    events: list[Event] = field(default_factory=list)


@dataclass
class AlterIsrOutcome:
    """What an AlterIsr answer did: ``fenced`` = stop acting as leader of this epoch."""

    applied: bool = False
    retry: bool = False      # transient failure: the change will be proposed again
    fenced: bool = False     # FENCED_LEADER_EPOCH: wait for LeaderAndIsr
    events: list[Event] = field(default_factory=list)


def divergence(last_fetched_epoch: int | None, fetch_offset: int, log: LogView) -> tuple[int, tuple[int, int] | None]:
    """Whether a fetcher's log diverges from the leader's (Kafka 2.8's Partition.readRecords, for followers and
    Fetch v12 consumers alike): (error, the leader's (epoch, end offset) for the fetcher's last fetched epoch
    when the fetcher must truncate, else None).  A last fetched epoch above every one this leader knows is
    OFFSET_OUT_OF_RANGE ("could not determine the end offset of the last fetched epoch")."""
    if last_fetched_epoch is None or last_fetched_epoch < 0:
        return errors.NONE, None
    epoch, end = log.end_offset_for_epoch(last_fetched_epoch)
    if epoch < 0 or end < 0:
        return OFFSET_OUT_OF_RANGE, None
    if epoch < last_fetched_epoch or end < fetch_offset:
        return errors.NONE, (epoch, end)
    return errors.NONE, None


def leader_epoch_error(current_leader_epoch: int | None, leader_epoch: int) -> int:
    """A request's current leader epoch against the replica's (KIP-320): FENCED_LEADER_EPOCH when older,
    UNKNOWN_LEADER_EPOCH when newer, NONE when equal or not sent (-1)."""
    if current_leader_epoch is None or current_leader_epoch < 0 or current_leader_epoch == leader_epoch:
        return errors.NONE
    return errors.FENCED_LEADER_EPOCH if current_leader_epoch < leader_epoch else errors.UNKNOWN_LEADER_EPOCH
