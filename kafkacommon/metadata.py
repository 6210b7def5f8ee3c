"""The cluster's metadata, apart from how it is stored: a partition's state, a broker's registration,
a topic's replica assignment.

:mod:`zk.codecs` encodes these as Kafka's znode JSON; the controller core, its election rules,
the brokers' metadata caches (:mod:`replication.broker_state`) and topic administration
(:mod:`zk.admin`) decide with them.

Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple


class LeaderAndIsr(NamedTuple):
    """A partition's leader, leader epoch, ISR and the epoch of the controller that wrote them
    (Kafka's ``LeaderAndIsr``, minus the zkVersion, which callers pair with it).

    A NamedTuple rather than a frozen dataclass: a controller builds one per partition it
    changes, and this is 4x cheaper to construct."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int

    NO_LEADER = -1


@dataclass(frozen=True)
class BrokerRegistration:
    """A live broker as ``/brokers/ids/<id>`` records it: where its controller and peers reach it
    (``host``:``port``, its gRPC address) and where Kafka clients and tools reach it (``listeners``,
    its advertised Kafka listeners, which the znode's ``endpoints`` name as Kafka's do)."""

    broker_id: int
    host: str
    port: int
    timestamp_ms: int
    rack: str | None = None
    epoch: int = -1  # the znode's czxid; not part of the JSON
    # (listener name, host, port) of each advertised Kafka listener, and each name's security protocol
    listeners: tuple[tuple[str, str, int], ...] = ()
    protocols: tuple[tuple[str, str], ...] = ()

    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class TopicAssignment:
    """A topic as ``/brokers/topics/<t>`` records it: each partition's replicas, its id and config overrides."""

    topic: str
    partitions: Mapping[int, tuple[int, ...]]  # partition -> replicas in assignment order
    topic_id: str = ""
    config: Mapping[str, Any] = field(default_factory=dict)  # topic-level overrides (kafkasim keeps them here)
    # a reassignment under way (Kafka 2.8's ReplicaAssignment): per partition, the replicas being added (in
    # ``partitions`` already) and those being removed; a partition in neither is not being reassigned
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def reassigning(self, partition: int) -> bool:
        """Whether ``partition`` is being reassigned (Kafka's ``isBeingReassigned``)."""
        return bool(self.adding.get(partition) or self.removing.get(partition))

    def target(self, partition: int) -> tuple[int, ...]:
        """The replicas ``partition`` is being reassigned to (its replicas when it is not): TRS."""
        gone = self.removing.get(partition, ())
        return tuple(r for r in self.partitions.get(partition, ()) if r not in gone)

    def origin(self, partition: int) -> tuple[int, ...]:
        """The replicas ``partition`` had before its reassignment (its replicas when it is not): ORS."""
        new = self.adding.get(partition, ())
        return tuple(r for r in self.partitions.get(partition, ()) if r not in new)
