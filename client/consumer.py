"""Fetching records for a set of partitions, from their leaders, up to the HW.

:class:`PartitionFetcher` keeps a position per partition and sends one Fetch
per leader broker (as a consumer, ``replica_id`` -1, so the leader bounds the
read by the high watermark).  It is used by ``kafkasim consume`` and by the
consumer-group member, which sets the positions from committed offsets.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable

import grpc

from client.metadata import ClientError, ClusterClient
from kafkacommon import errors
from kafkacommon.batch_scan import iter_batches
from kafkacommon.record_batch import CorruptBatchError
from proto import kafkasim_pb2 as pb

TP = tuple[str, int]
EARLIEST, LATEST = -2, -1


@dataclass(frozen=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    leader_epoch: int


class PartitionFetcher:
    def __init__(self, cluster: ClusterClient, *, auto_offset_reset: str = "latest",
                 max_bytes: int = 1 << 20) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError("auto_offset_reset must be earliest, latest or none")
        self.cluster = cluster
        self.auto_offset_reset = auto_offset_reset
        self.max_bytes = max_bytes
        self.positions: dict[TP, int] = {}
        self.high_watermarks: dict[TP, int] = {}

    # ------------------------------------------------------------------ positions

    def assign(self, tps: Iterable[TP]) -> None:
        """Keep positions of partitions still assigned; new ones start unknown (-1)."""
        tps = list(tps)
        self.positions = {tp: self.positions.get(tp, -1) for tp in tps}

    def seek(self, tp: TP, offset: int) -> None:
        self.positions[tp] = offset

    def list_offsets(self, tps: Iterable[TP], timestamp: int) -> dict[TP, int]:
        """Kafka's ListOffsets against each leader: LATEST (the HW) or EARLIEST."""
        out: dict[TP, int] = {}
        pending = list(tps)
        for attempt in range(20):
            by_leader: dict[str, list[TP]] = {}
            for tp in pending:
                leader = self.cluster.leader_endpoint(*tp)
                if leader is not None:
                    by_leader.setdefault(leader[1], []).append(tp)
            retry: list[TP] = [tp for tp in pending if self.cluster.leader_endpoint(*tp) is None]
            for endpoint, group in by_leader.items():
                try:
                    r = self.cluster.broker_stub(endpoint).ListOffsets(pb.ListOffsetsRequest(
                        timestamp=timestamp, partitions=[pb.TopicPartition(topic=t, partition=p) for t, p in group]),
                        timeout=self.cluster.request_timeout_s)
                except grpc.RpcError:
                    retry.extend(group)
                    continue
                for a in r.partitions:
                    if a.error_code == errors.NONE:
                        out[(a.topic, a.partition)] = a.offset
                    else:
                        retry.append((a.topic, a.partition))
            if not retry:
                return out
            pending = retry
            time.sleep(0.05 * (attempt + 1))  # backoff before asking again (leaders moving)
            try:
                self.cluster.refresh()
            except ClientError:
                pass
        raise ClientError(f"no leader answered ListOffsets for {sorted(pending)}")

    def _resolve_unknown_positions(self) -> None:
        unknown = [tp for tp, pos in self.positions.items() if pos < 0]
        if not unknown:
            return
        if self.auto_offset_reset == "none":
            raise ClientError(f"no position for {sorted(unknown)} and auto.offset.reset is none")
        found = self.list_offsets(unknown, EARLIEST if self.auto_offset_reset == "earliest" else LATEST)
        self.positions.update(found)

    # ------------------------------------------------------------------ fetch

    def poll(self, max_wait_ms: int = 500) -> list[ConsumerRecord]:
        """One round of fetches (one request per leader, sent together, as Kafka's consumer sends its fetches
        to every leader at once: a poll with nothing to read takes one long poll, not one per leader); returns
        records in offset order per partition."""
        if not self.positions:
            return []
        self._resolve_unknown_positions()
        by_leader: dict[str, list[TP]] = {}
        stale = False
        for tp in self.positions:
            leader = self.cluster.leader_endpoint(*tp)
            if leader is None:
                stale = True
            else:
                by_leader.setdefault(leader[1], []).append(tp)
        records: list[ConsumerRecord] = []
        wait = max_wait_ms if len(by_leader) <= 1 else min(max_wait_ms, 100)
        sent = []
        for endpoint, tps in by_leader.items():
            req = pb.FetchRequest(replica_id=-1, max_wait_ms=wait, partitions=[
                pb.FetchPartition(topic=t, partition=p, fetch_offset=self.positions[(t, p)], last_fetched_epoch=-1,
                                  current_leader_epoch=-1, max_bytes=self.max_bytes) for t, p in tps])
            sent.append(self.cluster.broker_stub(endpoint).Fetch.future(req, timeout=wait / 1000 + 10))
        for fut in sent:   # the answers in the leaders' order, as before
            try:
                r = fut.result()
            except grpc.RpcError:
                stale = True
                continue
            for a in r.partitions:
                tp = (a.topic, a.partition)
                if a.error_code == errors.OFFSET_OUT_OF_RANGE:
                    self.positions[tp] = -1  # reset by auto.offset.reset on the next poll
                    continue
                if a.error_code != errors.NONE:
                    stale = True
                    continue
                self.high_watermarks[tp] = a.high_watermark
                records.extend(self._decode(tp, a))
        if stale:
            try:
                self.cluster.refresh()
            except ClientError:
                pass
        return records

    def _decode(self, tp: TP, a: pb.FetchPartitionResponse) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        pos = self.positions[tp]
        try:
            for _, batch in iter_batches(a.records):
                for rec in () if batch.is_control else batch.records:   # markers are not records to consumers
                    if rec.offset < pos or rec.offset >= a.high_watermark:
                        continue
                    out.append(ConsumerRecord(tp[0], tp[1], rec.offset, rec.timestamp_ms, rec.key, rec.value,
                                              batch.leader_epoch))
                # a compacted batch may end past its last kept record
                pos = max(pos, min(batch.next_offset, a.high_watermark))
        except CorruptBatchError as e:
            raise ClientError(f"corrupt batch from the leader of {tp[0]}-{tp[1]}: {e}") from None
        self.positions[tp] = pos
        return out
