"""DeleteRecords on the leader (a mixin of the replica manager), as Kafka 2.8's ReplicaManager.deleteRecords
and Partition.deleteRecordsOnLeader do it.

The leader moves its log start offset to the offset asked for (-1: the high watermark), which must not
pass the high watermark (OFFSET_OUT_OF_RANGE); a topic without ``cleanup.policy=delete`` refuses
(POLICY_VIOLATION), an internal topic too (INVALID_TOPIC_EXCEPTION).  Consumers can no longer read below it
at once; the retention pass then deletes the segments wholly below it, on every replica.  Followers take the
new log start offset from their fetch answers and report their own in their next fetch; the request is done
once the partition's low watermark (:meth:`replication.partition.PartitionReplication.low_watermark`: the
smallest log start offset of the replicas on registered brokers) reaches the offset (Kafka's
DelayedDeleteRecords; the Kafka listener waits for :meth:`DeleteRecordsMixin.low_watermark`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from kafkacommon import errors
from node.storage.errors import KafkaStorageError
from zk.paths import OFFSETS_TOPIC

if TYPE_CHECKING:
    from node.events import EventLog
    from node.replicas.hosted import Hosted

TP = tuple[str, int]
HIGH_WATERMARK = -1            # DeleteRecordsRequest.HIGH_WATERMARK: "up to the high watermark"
INVALID_LOW_WATERMARK = -1
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state"})   # Kafka's Topic.isInternal


class DeleteRecordsMixin:
    hosted: "dict[TP, Hosted]"
    events: "EventLog"
    _offline: Callable[[TP], bool]   # a replica on an offline log directory (the replica manager's)

    def delete_records(self, tp: TP, offset: int) -> tuple[int, int, int]:
        """deleteRecordsOnLocalLog for one partition -> (error, the offset the log starts at now, the low
        watermark now); the offsets are -1 with an error."""
        if tp[0] in INTERNAL_TOPICS:
            return errors.INVALID_TOPIC_EXCEPTION, -1, INVALID_LOW_WATERMARK
        h = self.hosted.get(tp)
        if h is None:   # an offline replica (its log directory failed): KAFKA_STORAGE_ERROR, as Kafka's
            return (errors.KAFKA_STORAGE_ERROR if self._offline(tp) else errors.NOT_LEADER_OR_FOLLOWER), -1, \
                INVALID_LOW_WATERMARK
        with h.cond:
            if h.log.closed or not h.repl.is_leader:
                return (errors.KAFKA_STORAGE_ERROR if h.log.failed else errors.NOT_LEADER_OR_FOLLOWER), -1, \
                    INVALID_LOW_WATERMARK
            if not h.log_config.delete:
                return errors.POLICY_VIOLATION, -1, INVALID_LOW_WATERMARK
            hw = h.repl.high_watermark
            requested = hw if offset == HIGH_WATERMARK else offset
            if requested < 0 or requested > hw:
                return errors.OFFSET_OUT_OF_RANGE, -1, INVALID_LOW_WATERMARK
            before = h.log.log_start_offset
            try:
                moved = h.log.maybe_increment_log_start_offset(requested)
                h.repl.touch()   # a follower's session answers a partition whose log start moved
            except KafkaStorageError:   # the checkpoint's write failed: the directory is offline now
                return errors.KAFKA_STORAGE_ERROR, -1, INVALID_LOW_WATERMARK
            low = h.repl.low_watermark(h.log)
        if moved:
            self.events.emit("records_deleted", topic=tp[0], partition=tp[1], previous_log_start_offset=before,
                             log_start_offset=requested, high_watermark=hw, low_watermark=low)
        return errors.NONE, requested, low

    def low_watermark(self, tp: TP) -> tuple[int, int]:
        """(error, the partition's low watermark) on its leader: NOT_LEADER_OR_FOLLOWER once this broker no
        longer leads it, UNKNOWN_TOPIC_OR_PARTITION once it no longer hosts it (DelayedDeleteRecords' checks)."""
        h = self.hosted.get(tp)
        if h is None:
            return errors.UNKNOWN_TOPIC_OR_PARTITION, INVALID_LOW_WATERMARK
        with h.cond:
            if h.log.closed or not h.repl.is_leader:
                return errors.NOT_LEADER_OR_FOLLOWER, INVALID_LOW_WATERMARK
            return errors.NONE, h.repl.low_watermark(h.log)
