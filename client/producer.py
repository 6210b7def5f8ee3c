"""A producer: Kafka's default partitioning, acks 0/1/all, retries on leader moves.

Each ``send`` is one Produce request (one record batch) to the partition's
leader.  Retriable errors (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, an
unreachable leader) refresh the metadata and retry with a backoff, until
``delivery_timeout_ms``.  Other errors (NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT
with acks=all, ...) are raised as :class:`ProduceError` with Kafka's name.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import grpc

from client.metadata import ClientError, ClusterClient
from client.partitioner import DefaultPartitioner
from kafkacommon import errors
from proto import kafkasim_pb2 as pb

RETRIABLE = {errors.NOT_LEADER_OR_FOLLOWER, errors.LEADER_NOT_AVAILABLE, errors.UNKNOWN_TOPIC_OR_PARTITION}
ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


class ProduceError(ClientError):
    def __init__(self, code: int, topic: str, partition: int) -> None:
        super().__init__(f"produce to {topic}-{partition} failed: {errors.name(code)} ({code})")
        self.code = code


@dataclass(frozen=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int          # base offset of the batch (-1 for acks=0)
    last_offset: int
    leader_epoch: int


def parse_acks(value: str | int) -> int:
    acks = ACKS.get(str(value))
    if acks is None:
        raise ValueError(f"acks must be all, -1, 1 or 0, got {value!r}")
    return acks


class Producer:
    def __init__(self, cluster: ClusterClient, *, acks: int = -1, request_timeout_ms: int = 30000,
                 delivery_timeout_ms: int = 60000, retry_backoff_ms: int = 50,
                 partitioner: DefaultPartitioner | None = None) -> None:
        self.cluster = cluster
        self.acks = acks
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.partitioner = partitioner or DefaultPartitioner()

    def choose_partition(self, topic: str, key: bytes | None, partition: int | None) -> int:
        parts = self.cluster.partitions_for(topic)
        if partition is not None and partition not in parts:
            raise ClientError(f"{topic} has no partition {partition} (partitions 0..{len(parts) - 1})")
        available = [p for p in parts if self.cluster.leader_endpoint(topic, p) is not None]
        return self.partitioner.partition(topic, key, len(parts), available_partitions=available,
                                          explicit=partition)

    def send(self, topic: str, value: bytes | None, key: bytes | None = None, partition: int | None = None,
             timestamp_ms: int = -1) -> RecordMetadata:
        p = self.choose_partition(topic, key, partition)
        md = self.send_batch(topic, p, [(key, value, timestamp_ms)])
        if key is None and partition is None:
            self.partitioner.on_new_batch(topic, p, len(self.cluster.partitions_for(topic)))
        return md

    def send_batch(self, topic: str, partition: int,
                   records: Sequence[tuple[bytes | None, bytes | None, int]]) -> RecordMetadata:
        req = pb.ProduceRequest(topic=topic, partition=partition, acks=self.acks, timeout_ms=self.request_timeout_ms,
                                records=[pb.Record(key=k or b"", key_null=k is None, value=v or b"",
                                                   value_null=v is None, timestamp_ms=ts) for k, v, ts in records])
        deadline = time.monotonic() + self.delivery_timeout_ms / 1000
        code = errors.LEADER_NOT_AVAILABLE
        while True:
            leader = self.cluster.leader_endpoint(topic, partition)
            if leader is not None:
                try:
                    r = self.cluster.broker_stub(leader[1]).Produce(req, timeout=self.request_timeout_ms / 1000 + 5)
                    code = r.error_code
                    if code == errors.NONE:
                        return RecordMetadata(topic, partition, r.base_offset, r.last_offset, r.leader_epoch)
                except grpc.RpcError:
                    code = errors.NOT_LEADER_OR_FOLLOWER  # unreachable: the leader may have died
            if code not in RETRIABLE or time.monotonic() >= deadline:
                raise ProduceError(code, topic, partition)
            time.sleep(self.retry_backoff_ms / 1000)  # backoff between retries (not test synchronisation)
            try:
                self.cluster.refresh()
            except ClientError:
                pass
