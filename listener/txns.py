"""The transactional APIs on the Kafka listener: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit.

Each maps Kafka's struct to the transaction coordinator's messages (transactions/messages.py) and goes
through the broker's TxnDoor (the group coordinator's door for TxnOffsetCommit), as Kafka 2.8's KafkaApis
does:

* AddPartitionsToTxn: a partition this broker's metadata cache does not know fails the whole request:
  UNKNOWN_TOPIC_OR_PARTITION for it, OPERATION_NOT_ATTEMPTED for the others; otherwise the coordinator's
  one error for every partition;
* TxnOffsetCommit: an unknown partition gets UNKNOWN_TOPIC_OR_PARTITION, the others go to the group's
  coordinator; before v2 COORDINATOR_LOAD_IN_PROGRESS is answered COORDINATOR_NOT_AVAILABLE (KAFKA-7296);
* PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for AddPartitionsToTxn, AddOffsetsToTxn and EndTxn before v2,
  as Kafka answers older clients.
"""
from __future__ import annotations

from typing import Any

from coordinator.messages import CommitOffset, TxnOffsetCommitRequest
from kafkacommon import errors
from listener.context import ListenerContext
from listener.protocol import Request
from listener.server import Connection
from transactions.messages import AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest


def _fenced_before(code: int, version: int, first: int = 2) -> int:
    return errors.INVALID_PRODUCER_EPOCH if code == errors.PRODUCER_FENCED and version < first else code


def handlers(ctx: ListenerContext) -> dict[int, Any]:
    def known(topic: str, partition: int) -> bool:
        return (topic, partition) in ctx.state.metadata

    async def add_partitions_to_txn(req: Request, conn: Connection) -> dict[str, Any]:
        body, v = req.body, req.api_version
        asked = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
        unknown = {tp for tp in asked if not known(*tp)}
        if unknown:
            codes = {tp: errors.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else errors.OPERATION_NOT_ATTEMPTED
                     for tp in asked}
        else:
            r = await ctx.txns.add_partitions(AddPartitionsToTxnRequest(
                body.v3_and_below_transactional_id, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch,
                tuple(asked)))
            codes = {tp: _fenced_before(code, v) for tp, code in r.results}
        by_topic: dict[str, list] = {}
        for (topic, p), code in codes.items():
            by_topic.setdefault(topic, []).append(dict(partition_index=p, partition_error_code=code))
        return dict(throttle_time_ms=0, results_by_topic_v3_and_below=[
            dict(name=t, results_by_partition=ps) for t, ps in by_topic.items()])

    async def add_offsets_to_txn(req: Request, conn: Connection) -> dict[str, Any]:
        b = req.body
        r = await ctx.txns.add_offsets(AddOffsetsToTxnRequest(b.transactional_id, b.producer_id, b.producer_epoch,
                                                              b.group_id))
        return dict(throttle_time_ms=0, error_code=_fenced_before(r.error_code, req.api_version))

    async def end_txn(req: Request, conn: Connection) -> dict[str, Any]:
        b = req.body
        r = await ctx.txns.end_txn(EndTxnRequest(b.transactional_id, b.producer_id, b.producer_epoch, b.committed))
        return dict(throttle_time_ms=0, error_code=_fenced_before(r.error_code, req.api_version))

    async def txn_offset_commit(req: Request, conn: Connection) -> dict[str, Any]:
        b, v = req.body, req.api_version
        codes: dict[tuple[str, int], int] = {}
        offsets = []
        for t in b.topics:
            for p in t.partitions:
                if not known(t.name, p.partition_index):
                    codes[(t.name, p.partition_index)] = errors.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                codes[(t.name, p.partition_index)] = errors.NONE
                offsets.append(CommitOffset(t.name, p.partition_index, p.committed_offset,
                                            p.committed_leader_epoch if v >= 2 else -1, p.committed_metadata))
        if offsets:
            r = await ctx.groups.txn_offset_commit(TxnOffsetCommitRequest(
                b.transactional_id, b.group_id, b.producer_id, b.producer_epoch,
                b.generation_id if v >= 3 else -1, b.member_id if v >= 3 else "",
                b.group_instance_id if v >= 3 else None, offsets))
            for topic, partition, code in r.partitions:
                if v < 2 and code == errors.COORDINATOR_LOAD_IN_PROGRESS:
                    code = errors.COORDINATOR_NOT_AVAILABLE
                codes[(topic, partition)] = code
        by_topic: dict[str, list] = {}
        for (topic, p), code in codes.items():
            by_topic.setdefault(topic, []).append(dict(partition_index=p, error_code=code))
        return dict(throttle_time_ms=0, topics=[dict(name=t, partitions=ps) for t, ps in by_topic.items()])

    return {24: add_partitions_to_txn, 25: add_offsets_to_txn, 26: end_txn, 28: txn_offset_commit}
