"""The replica manager's reads as a leader (a mixin of :class:`node.replicas.replica_manager.ReplicaManager`):
a consumer's fetch of one partition (the Kafka listener's path, the records left in the segment files),
OffsetForLeaderEpoch's lookup, the coordinators' load (whole batches up to the log end) and ListOffsets.
Each reads one hosted partition under its lock; an offline replica (its log directory failed) answers
KAFKA_STORAGE_ERROR.  A follower's fetch is :mod:`node.replicas.leader_fetch`'s.
"""
from __future__ import annotations

from typing import Callable

from kafkacommon import errors
from node.replicas.hosted import ConsumerRead, Hosted
from node.storage.errors import KafkaStorageError
from node.storage.log import OffsetOutOfRangeError
from proto import kafkasim_pb2 as pb

TP = tuple[str, int]
STORAGE = errors.KAFKA_STORAGE_ERROR


class ReadsMixin:
    hosted: dict[TP, Hosted]
    _offline: Callable[[TP], bool]   # a replica on an offline log directory (the replica manager's)

    def log_start_offset(self, tp: TP) -> int:
        h = self.hosted.get(tp)
        return -1 if h is None or h.log.closed else h.log.log_start_offset

    def consumer_read(self, tp: TP, offset: int, max_bytes: int, current_leader_epoch: int = -1,
                      last_fetched_epoch: int = -1, read_committed: bool = False) -> ConsumerRead:
        """One partition of a consumer's fetch, as the leader answers it (the Kafka listener's path, with no
        protobuf copies of the records): the replication core's checks first (the current leader epoch's
        fencing, the last fetched epoch's divergence: no records then), then whole batches from ``offset``
        below the high watermark, at most ``max_bytes`` but the first batch, left in the segment files
        (``node.storage.file_records``: the listener sends them with sendfile).  NOT_LEADER_OR_FOLLOWER off
        the leader, OFFSET_OUT_OF_RANGE outside the log.  With ``read_committed`` (isolation level 1) the
        read stops at the last stable offset and comes with the aborted transactions below it."""
        h = self.hosted.get(tp)
        if h is None or not h.repl.is_leader:
            return ConsumerRead(STORAGE if h is None and self._offline(tp) else errors.NOT_LEADER_OR_FOLLOWER)
        with h.cond:
            if h.log.closed:
                return ConsumerRead(STORAGE if h.log.failed else errors.NOT_LEADER_OR_FOLLOWER)
            code, diverging = h.repl.check_consumer_fetch(offset, last_fetched_epoch, current_leader_epoch, h.log)
            hw, start, epoch = h.repl.high_watermark, h.log.log_start_offset, h.repl.leader_epoch
            lso = -1
            try:
                lso = h.log.last_stable_offset(hw)
                if code != errors.NONE or diverging is not None:
                    return ConsumerRead(code, hw, start, epoch, b"", diverging, lso)
                bound = lso if read_committed else hw
                records = h.log.read_file_records(offset, max_bytes or 1 << 20, bound)
                aborted = h.log.aborted_transactions(offset, bound) if read_committed else None
            except OffsetOutOfRangeError:
                return ConsumerRead(errors.OFFSET_OUT_OF_RANGE, hw, start, epoch, last_stable_offset=lso)
            except KafkaStorageError:
                return ConsumerRead(STORAGE, hw, start, epoch)
            return ConsumerRead(errors.NONE, hw, start, epoch, records, None, lso, aborted)

    def end_offset_for_epoch(self, tp: TP, leader_only: bool) -> tuple[int, int, Callable[[int], tuple[int, int]]]:
        """For OffsetForLeaderEpoch: (error, current leader epoch, the replica's ``epoch -> (largest epoch
        <= it, its end offset)`` lookup, Kafka's leader epoch cache's).  NOT_LEADER_OR_FOLLOWER when
        ``leader_only`` and this broker does not lead the partition (or no longer hosts it)."""
        h = self.hosted.get(tp)
        if h is None or h.log.closed or (leader_only and not h.repl.is_leader):
            return STORAGE if self._offline(tp) else errors.NOT_LEADER_OR_FOLLOWER, -1, lambda e: (-1, -1)

        def lookup(epoch: int) -> tuple[int, int]:
            with h.cond:
                return h.log.end_offset_for_epoch(epoch)
        return errors.NONE, h.repl.leader_epoch, lookup

    def read_log(self, tp: TP, offset: int, max_bytes: int) -> tuple[bytes, int, int] | None:
        """Whole batches from ``offset`` up to the LEO (the coordinator's load reads
        to the LEO, as Kafka's does), with the log start and end offsets; None when
        this broker no longer hosts the replica."""
        h = self.hosted.get(tp)
        if h is None:
            return None
        with h.cond:
            if h.log.closed:
                return None
            start, end = h.log.log_start_offset, h.log.log_end_offset
            if offset >= end:
                return b"", start, end
            try:
                return bytes(h.log.read(max(offset, start), max_bytes)), start, end
            except KafkaStorageError:
                return None

    def list_offsets(self, req: pb.ListOffsetsRequest, read_committed: bool = False) -> pb.ListOffsetsResponse:
        """Kafka's ListOffsets for consumers: -1 latest (the HW, what a consumer can read up to; the last stable
        offset for read_committed), -2 earliest (the log start offset). Only the leader answers."""
        out = []
        for tp in req.partitions:
            h = self.hosted.get((tp.topic, tp.partition))
            r = pb.ListOffsetsPartition(topic=tp.topic, partition=tp.partition, offset=-1, leader_epoch=-1)
            if h is None and self._offline((tp.topic, tp.partition)):
                r.error_code = STORAGE
            elif h is None or not h.repl.is_leader:
                r.error_code = errors.NOT_LEADER_OR_FOLLOWER
            elif req.timestamp not in (-1, -2):
                r.error_code = errors.INVALID_REQUEST
            else:
                with h.cond:
                    hw = h.repl.high_watermark
                    latest = h.log.last_stable_offset(hw) if read_committed else hw
                    r.offset = latest if req.timestamp == -1 else h.log.log_start_offset
                    r.leader_epoch = h.repl.leader_epoch
            out.append(r)
        return pb.ListOffsetsResponse(partitions=out)
