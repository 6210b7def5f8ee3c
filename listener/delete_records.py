"""DeleteRecords on the Kafka listener, as Kafka 2.8's KafkaApis and ReplicaManager.deleteRecords answer it.

A partition the metadata cache does not know gets UNKNOWN_TOPIC_OR_PARTITION; the others go to the replica
manager (node/replicas/delete_records.py): the leader moves its log start offset (NOT_LEADER_OR_FOLLOWER
elsewhere; OFFSET_OUT_OF_RANGE past the high watermark; POLICY_VIOLATION without ``cleanup.policy=delete``;
INVALID_TOPIC_EXCEPTION for an internal topic).  When a partition's low watermark is still below the offset,
the request waits, up to its timeout, until every such low watermark has reached its offset (Kafka's
DelayedDeleteRecords): each partition then answers its low watermark, or REQUEST_TIMED_OUT with the low
watermark it had when its log start moved, or the error that ended the wait (the leadership lost).
"""
from __future__ import annotations

import time
from typing import Any

from listener.context import ListenerContext
from listener.protocol import Request
from listener.server import Connection
from kafkacommon import errors
from util.waiting import WaitTimeout, wait_for

TP = tuple[str, int]
INVALID_LOW_WATERMARK = -1


def handlers(ctx: ListenerContext) -> dict[int, Any]:
    def delete(todo: dict[TP, int], timeout_ms: int) -> dict[TP, tuple[int, int]]:
        """{tp: offset} -> {tp: (low watermark, error)}, once done or timed out."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        out: dict[TP, tuple[int, int]] = {}
        pending: dict[TP, int] = {}
        for tp, offset in todo.items():
            code, requested, low = ctx.replicas.delete_records(tp, offset)
            out[tp] = (low, code)
            if code == errors.NONE and low < requested:
                pending[tp] = requested
                out[tp] = (low, errors.REQUEST_TIMED_OUT)   # cleared when the low watermark reaches it

        def settled() -> bool:
            for tp, required in list(pending.items()):
                code, low = ctx.replicas.low_watermark(tp)
                if code != errors.NONE or low >= required:
                    out[tp] = (low if code == errors.NONE else INVALID_LOW_WATERMARK, code)
                    del pending[tp]
            return not pending
        if pending:
            try:
                wait_for(settled, max(deadline - time.monotonic(), 0.0), "the low watermarks")
            except WaitTimeout:
                pass
        return out

    async def delete_records(req: Request, conn: Connection) -> dict[str, Any]:
        b = req.body
        results: dict[TP, tuple[int, int]] = {}
        todo: dict[TP, int] = {}
        for t in b.topics or []:
            for p in t.partitions or []:
                tp = (t.name, p.partition_index)
                if tp not in ctx.state.metadata:
                    results[tp] = (INVALID_LOW_WATERMARK, errors.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    todo[tp] = p.offset
        if todo:
            results.update(await ctx.blocking(delete, todo, b.timeout_ms))
        topics: dict[str, list] = {}
        for (t, p), (low, code) in results.items():
            topics.setdefault(t, []).append(dict(partition_index=p, low_watermark=low, error_code=code))
        return dict(throttle_time_ms=0, topics=[dict(name=t, partitions=ps) for t, ps in topics.items()])

    return {21: delete_records}
