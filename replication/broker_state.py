"""A broker's view of the cluster, fed by controller requests (sans-IO).

Implements Kafka's broker-side fencing of controller requests:
- a request whose broker epoch (not -1) is below ours -> STALE_BROKER_EPOCH;
- a controller epoch below the latest one seen -> STALE_CONTROLLER_EPOCH
  (an equal epoch is accepted);
- LeaderAndIsr answers KAFKA_STORAGE_ERROR for a replica in an offline log
  directory before any other check (replication/log_dirs.py); it applies a
  partition only when its leader epoch is higher than
  ours (Kafka 2.8's becomeLeaderOrFollower: every controller change of a
  partition's leader or ISR bumps the epoch; AlterIsr results come back in
  the AlterIsr answer and UpdateMetadata); otherwise that partition gets
  STALE_CONTROLLER_EPOCH, and a broker outside the replicas gets
  UNKNOWN_TOPIC_OR_PARTITION;
- StopReplica with a leader epoch at or below ours -> FENCED_LEADER_EPOCH,
  where -1 and -2 bypass the check.

Every method returns what to answer plus the events to log; nothing here
does I/O.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from kafkacommon import errors
from kafkacommon.assignment import assign_replicas
from kafkacommon.event import Event
from kafkacommon.metadata import LeaderAndIsr, TopicAssignment

TP = tuple[str, int]
LEADER_DURING_DELETE = -2  # Kafka's marker in UpdateMetadata for a partition being deleted


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    zk_version: int
    controller_epoch: int
    is_new: bool = False     # LeaderAndIsr's isNew: a replica the controller just created (a new partition)


@dataclass(frozen=True)
class Header:
    controller_id: int
    controller_epoch: int
    broker_epoch: int


@dataclass
class Outcome:
    error: int = errors.NONE
    partition_errors: dict[TP, int] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    became_leader: list[PartitionInfo] = field(default_factory=list)
    became_follower: list[PartitionInfo] = field(default_factory=list)
    stopped: list[TP] = field(default_factory=list)


class BrokerState:
    def __init__(self, broker_id: int, check_controller_epoch: bool = True):
        self.broker_id = broker_id
        self.check_controller_epoch = check_controller_epoch  # False only as a planted bug (chaos tests)
        self.broker_epoch = -1
        self.controller_epoch = 0       # the latest epoch accepted
        self.controller_id = -1
        self.partitions: dict[TP, PartitionInfo] = {}   # replicas hosted here (LeaderAndIsr)
        self.metadata: dict[TP, PartitionInfo] = {}     # cluster-wide cache (UpdateMetadata)
        self.topic_partitions: dict[str, int] = {}      # partitions per topic in that cache
        # the same cache as a controller reads it: (LeaderAndIsr, zkVersion), kept up to date as
        # requests arrive so that a newly elected controller on this broker starts from it at once
        self.controller_view: dict[TP, tuple[LeaderAndIsr, int]] = {}
        self.live_brokers: dict[int, tuple[str, int, int]] = {}  # id -> (host, port, epoch)

    # ------------------------------------------------------------------ the offsets topic, lazily

    def enough_live_brokers(self, replication_factor: int) -> bool:
        """An internal topic of this replication factor may be created: at least that many brokers are live in this
        broker's metadata cache (else Kafka answers INVALID_REPLICATION_FACTOR, COORDINATOR_NOT_AVAILABLE)."""
        return len(self.live_brokers) >= replication_factor

    def internal_topic_to_create(self, topic: str, partitions: int, replication_factor: int,
                                 rng: Callable[[int], int], config: dict | None = None,
                                 factor_key: str = "offsets.topic.replication.factor"
                                 ) -> tuple[TopicAssignment | None, str]:
        """Kafka's FindCoordinator on a missing internal topic (``KafkaApis.createInternalTopic``): create it,
        compacted (or with ``config``), over the live brokers of this broker's metadata cache, if there are at
        least its replication factor of them.  (assignment to write, or None and why not)."""
        if topic in self.topic_partitions:
            return None, "exists"
        live = sorted(self.live_brokers)
        if not self.enough_live_brokers(replication_factor):
            return None, f"{len(live)} live brokers, fewer than {factor_key} {replication_factor}"
        n = len(live)
        assignment = assign_replicas(partitions, replication_factor, live, start_index=rng(n), shift=rng(n))
        topic_id = base64.urlsafe_b64encode(bytes(rng(256) for _ in range(16))).rstrip(b"=").decode()
        return TopicAssignment(topic, assignment, topic_id=topic_id,
                               config=config if config is not None else {"cleanup.policy": "compact"}), ""

    # ------------------------------------------------------------------ fencing

    def _fence(self, request: str, h: Header, out: Outcome) -> bool:
        if h.broker_epoch != -1 and h.broker_epoch < self.broker_epoch:
            out.error = errors.STALE_BROKER_EPOCH
        elif h.controller_epoch < self.controller_epoch and self.check_controller_epoch:
            out.error = errors.STALE_CONTROLLER_EPOCH
        else:
            self.controller_epoch = max(self.controller_epoch, h.controller_epoch)
            self.controller_id = h.controller_id
            return True
        out.events.append(Event("request_rejected", {
            "request": request, "error": errors.name(out.error), "error_code": out.error,
            "controller_id": h.controller_id, "request_controller_epoch": h.controller_epoch,
            "latest_controller_epoch": self.controller_epoch,
            "request_broker_epoch": h.broker_epoch, "broker_epoch": self.broker_epoch}))
        return False

    # ------------------------------------------------------------------ requests

    def leader_and_isr(self, h: Header, parts: Iterable[PartitionInfo],
                       storage_errors: Mapping[TP, int] | None = None) -> Outcome:
        """``storage_errors``: this broker's offline replicas (replication/log_dirs.py), answered with their
        error (KAFKA_STORAGE_ERROR) and left out, before any other check (Kafka's HostedPartition.Offline)."""
        out = Outcome()
        if not self._fence("LeaderAndIsr", h, out):
            return out
        stale = 0
        offline = []
        for p in parts:
            tp = (p.topic, p.partition)
            if storage_errors and tp in storage_errors:
                out.partition_errors[tp] = storage_errors[tp]
                offline.append(f"{tp[0]}-{tp[1]}")
                continue
            if self.broker_id not in p.replicas:
                out.partition_errors[tp] = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            cur = self.partitions.get(tp)
            if cur is not None and p.leader_epoch <= cur.leader_epoch:
                out.partition_errors[tp] = errors.STALE_CONTROLLER_EPOCH
                stale += 1
                continue
            self.partitions[tp] = p
            self._cache(tp, p)
            out.partition_errors[tp] = errors.NONE
            was_leader = cur is not None and cur.leader == self.broker_id
            if p.leader == self.broker_id:
                out.became_leader.append(p)
                if not was_leader or cur is None or cur.leader_epoch != p.leader_epoch:
                    out.events.append(Event("became_leader", _fields(p, h)))
                else:
                    out.events.append(Event("isr_updated", _fields(p, h)))
            else:
                out.became_follower.append(p)
                if cur is None or cur.leader != p.leader or cur.leader_epoch != p.leader_epoch:
                    out.events.append(Event("became_follower", _fields(p, h)))
        if stale:
            out.events.append(Event("leader_and_isr_unchanged", {"partitions": stale,
                                                            "controller_epoch": h.controller_epoch}))
        if offline:
            out.events.append(Event("leader_and_isr_offline_replicas", {"replicas": offline,
                                                                        "controller_epoch": h.controller_epoch}))
        return out

    def update_metadata(self, h: Header, parts: Iterable[PartitionInfo],
                        live: Iterable[tuple[int, str, int, int]]) -> Outcome:
        out = Outcome()
        if not self._fence("UpdateMetadata", h, out):
            return out
        for p in parts:
            tp = (p.topic, p.partition)
            if p.leader == LEADER_DURING_DELETE:  # the topic is being deleted: forget the partition
                if self.metadata.pop(tp, None) is not None:
                    left = self.topic_partitions[tp[0]] - 1
                    if left:
                        self.topic_partitions[tp[0]] = left
                    else:
                        del self.topic_partitions[tp[0]]
                self.controller_view.pop(tp, None)
            else:
                self._cache(tp, p)
        self.live_brokers = {b: (host, port, epoch) for b, host, port, epoch in live}
        return out

    def _cache(self, tp: TP, p: PartitionInfo) -> None:
        if tp not in self.metadata:
            self.topic_partitions[tp[0]] = self.topic_partitions.get(tp[0], 0) + 1
        self.metadata[tp] = p
        self.controller_view[tp] = _controller_state(p)

    def stop_replica(self, h: Header, tps: Iterable[TP], leader_epoch: int, delete: bool) -> Outcome:
        out = Outcome()
        if not self._fence("StopReplica", h, out):
            return out
        for tp in tps:
            cur = self.partitions.get(tp)
            if cur is not None and leader_epoch not in (-1, -2) and leader_epoch <= cur.leader_epoch:
                out.partition_errors[tp] = errors.FENCED_LEADER_EPOCH
                continue
            self.partitions.pop(tp, None)
            out.stopped.append(tp)
            out.partition_errors[tp] = errors.NONE
            out.events.append(Event("replica_stopped", {"topic": tp[0], "partition": tp[1], "delete": delete}))
        return out


def _controller_state(p: PartitionInfo) -> tuple[LeaderAndIsr, int]:
    return LeaderAndIsr(p.leader, p.leader_epoch, p.isr, p.controller_epoch), p.zk_version


def _fields(p: PartitionInfo, h: Header) -> dict[str, Any]:
    return {"topic": p.topic, "partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
            "isr": list(p.isr), "zk_version": p.zk_version, "controller_epoch": p.controller_epoch,
            "request_controller_epoch": h.controller_epoch}
