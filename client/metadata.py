"""Cluster metadata for clients: which broker leads which partition, and channels to brokers.

A client bootstraps from any broker in its list and asks it for its metadata
cache (``DescribeBroker``): live brokers with their endpoints, and every
partition's leader, epoch and ISR, as the controller last sent them.  The
cache can lag a leadership change by one UpdateMetadata; callers refresh on
NOT_LEADER_OR_FOLLOWER and retry, as Kafka's clients do.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import grpc

from proto import groups_pb2_grpc as gpbg
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg

OFFSETS_TOPIC = "__consumer_offsets"


class ClientError(Exception):
    """A client operation that failed for good; the message says why."""


@dataclass(frozen=True)
class PartitionMeta:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass
class Metadata:
    brokers: dict[int, str] = field(default_factory=dict)           # id -> "host:port"
    partitions: dict[tuple[str, int], PartitionMeta] = field(default_factory=dict)
    controller_id: int = -1

    def topic_partitions(self, topic: str) -> list[int]:
        return sorted(p for t, p in self.partitions if t == topic)

    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.partitions})


#: a client's channels reconnect as Kafka's clients do (reconnect.backoff.ms 50 ms, growing to
#: reconnect.backoff.max.ms 1 s), each with a connection of its own.  gRPC's default, 1 s growing by 1.6x to
#: 120 s and shared by every channel of the process to that address, left a channel to a broker that had been
#: down failing fast with UNAVAILABLE for seconds after it was back (e.g. when it becomes a group's coordinator).
CHANNEL_OPTIONS = (
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


class ClusterClient:
    """Bootstrap list, metadata cache and one gRPC channel per broker endpoint."""

    def __init__(self, bootstrap: Iterable[str], request_timeout_s: float = 10.0,
                 dial: Callable[[int, str], str] | None = None) -> None:
        self.bootstrap = list(bootstrap)
        self._dial = dial
        if not self.bootstrap:
            raise ClientError("no bootstrap brokers given")
        self.request_timeout_s = request_timeout_s
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict = {}
        self._lock = threading.Lock()
        self.metadata = Metadata()

    # ------------------------------------------------------------------ channels

    def channel(self, endpoint: str) -> grpc.Channel:
        with self._lock:
            ch = self._channels.get(endpoint)
            if ch is None:
                ch = self._channels[endpoint] = grpc.insecure_channel(endpoint, options=CHANNEL_OPTIONS)
            return ch

    def broker_stub(self, endpoint: str) -> pbg.BrokerStub:
        return self._stub(endpoint, pbg.BrokerStub)

    def groups_stub(self, endpoint: str) -> gpbg.GroupsStub:
        return self._stub(endpoint, gpbg.GroupsStub)

    def _stub(self, endpoint: str, kind):
        """One stub per (endpoint, service): building one costs more than a call on loopback."""
        key = (endpoint, kind)
        stub = self._stubs.get(key)
        if stub is None:
            stub = self._stubs[key] = kind(self.channel(endpoint))
        return stub

    def close(self) -> None:
        with self._lock:
            for ch in self._channels.values():
                ch.close()
            self._channels.clear()
            self._stubs.clear()

    def __enter__(self) -> "ClusterClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def address(self, broker_id: int, advertised: str) -> str:
        """Where to dial a broker: its advertised address, unless a link map (a chaos run's
        fault proxy, see node/net/links.py) routes this client's connections elsewhere."""
        return self._dial(broker_id, advertised) if self._dial else advertised

    # ------------------------------------------------------------------ metadata

    def endpoints(self) -> list[str]:
        """Known live brokers first, then the bootstrap list."""
        known = list(self.metadata.brokers.values())
        return known + [e for e in self.bootstrap if e not in known]

    def describe(self, endpoint: str, timeout_s: float | None = None) -> pb.DescribeBrokerResponse:
        return self.broker_stub(endpoint).DescribeBroker(pb.DescribeBrokerRequest(),
                                                         timeout=timeout_s or self.request_timeout_s)

    def refresh(self) -> Metadata:
        """Ask the first broker that answers (and is registered) for its metadata cache."""
        errors: list[str] = []
        for endpoint in self.endpoints():
            try:
                r = self.describe(endpoint, timeout_s=min(self.request_timeout_s, 2.0))
            except grpc.RpcError as e:
                errors.append(f"{endpoint}: {e.code().name}")
                continue
            if r.broker_epoch < 0 or not r.live_brokers:
                errors.append(f"{endpoint}: broker {r.broker_id} has no metadata yet")
                continue
            md = Metadata(brokers={b.id: self.address(b.id, f"{b.host}:{b.port}") for b in r.live_brokers},
                          controller_id=r.known_controller_id)
            for p in r.partitions:
                md.partitions[(p.topic, p.partition)] = PartitionMeta(
                    p.topic, p.partition, p.leader, p.leader_epoch, tuple(p.replicas), tuple(p.isr))
            self.metadata = md
            return md
        raise ClientError("no broker answered with metadata: " + "; ".join(errors))

    def partitions_for(self, topic: str, max_block_s: float = 5.0) -> list[int]:
        """The topic's partitions; an unknown topic refreshes the metadata until
        ``max_block_s`` (Kafka's max.block.ms), as a topic just created may not have
        reached every broker's cache yet."""
        parts = self.metadata.topic_partitions(topic)
        deadline = time.monotonic() + max_block_s
        delay = 0.01
        while not parts:
            parts = self.refresh().topic_partitions(topic)
            if parts or time.monotonic() >= deadline:
                break
            time.sleep(delay)  # metadata backoff before asking again
            delay = min(delay * 2, 0.2)
        if not parts:
            raise ClientError(f"unknown topic {topic!r}")
        return parts

    def leader_endpoint(self, topic: str, partition: int) -> tuple[int, str] | None:
        """(leader id, endpoint) from the cached metadata, or None when unknown/offline."""
        p = self.metadata.partitions.get((topic, partition))
        if p is None or p.leader < 0:
            return None
        endpoint = self.metadata.brokers.get(p.leader)
        return None if endpoint is None else (p.leader, endpoint)
