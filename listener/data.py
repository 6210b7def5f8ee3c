"""Produce, Fetch and ListOffsets on the Kafka listener: the replica manager's produce, fetch
and offsets paths, as the gRPC Broker service reaches them.

Produce keeps each client batch as it arrived (``listener.records`` checks it, the log
rewrites only its base offset and leader epoch); acks=all waits in the produce purgatory
without holding a thread.  Fetch is the consumer fetch (replica id -1, no fetch session:
session id 0 is answered, so clients send full requests), a long poll up to max_wait_ms,
extended while fewer than min_bytes are ready.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from listener.context import ListenerContext
from listener.protocol import Request, stays_in_file
from listener.records import BatchRejected, check_client_batch, find_timestamp, next_offset
from listener.server import CloseConnection, Connection
from kafkacommon import errors
from proto import kafkasim_pb2 as pb
from replication.partition_types import leader_epoch_error


def close(reads: dict) -> None:
    """Release the segment files of consumer reads that will not be sent."""
    for a in reads.values():
        if stays_in_file(a.records):
            a.records.close()


def handlers(ctx: ListenerContext) -> dict[int, Any]:
    def known(topic: str, partition: int) -> bool:
        return (topic, partition) in ctx.state.metadata

    async def produce(req: Request, conn: Connection) -> dict[str, Any] | None:
        body, loop = req.body, asyncio.get_running_loop()
        topics, waits = [], []
        for td in body.topic_data:
            parts = []
            for pd in td.partition_data:
                tp = (td.name, pd.index)
                r: dict[str, Any] = dict(index=pd.index, error_code=errors.NONE, base_offset=-1, log_append_time_ms=-1,
                                         log_start_offset=-1, record_errors=[], error_message=None)
                parts.append(r)
                if not known(*tp):
                    r["error_code"] = errors.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                try:
                    batch = check_client_batch(pd.records, int(ctx.replicas.topic_setting(
                        tp, "max.message.bytes", ctx.message_max_bytes)), req.api_version)
                except BatchRejected as e:
                    # Kafka 2.8.2 gives a message only with a record's validation error (INVALID_RECORD and
                    # kafkasim's own refusals); a batch over max.message.bytes gets none (conformance
                    # Produce.*.record_too_large)
                    r["error_code"] = e.code
                    r["error_message"] = None if e.code == errors.MESSAGE_TOO_LARGE else e.message
                    continue
                fut = loop.create_future()

                def done(code: int, fut: asyncio.Future = fut) -> None:
                    loop.call_soon_threadsafe(fut.set_result, code)
                code, base, _last, pending, stamp = ctx.replicas.append_batch(
                    tp, batch.data, batch.record_count, batch.max_timestamp, body.acks, body.timeout_ms, done,
                    (batch.producer_id, batch.producer_epoch, batch.base_sequence), batch.transactional)
                r["error_code"], r["base_offset"], r["log_append_time_ms"] = code, base, stamp
                r["log_start_offset"] = ctx.replicas.log_start_offset(tp) if code == errors.NONE else -1
                if pending:
                    waits.append((r, fut))
            topics.append(dict(name=td.name, partition_responses=parts))
        req.applied()   # appended: the connection's next request may start while this one waits
        for r, fut in waits:
            r["error_code"] = await fut
        if body.acks == 0:
            failed = [(t["name"], p["index"], p["error_code"]) for t in topics for p in t["partition_responses"]
                      if p["error_code"]]
            if failed:   # no response to carry the error: Kafka closes the connection instead
                raise CloseConnection(failed[0][2], f"acks=0 produce failed for {len(failed)} partition(s), "
                                                    f"first {failed[0][0]}-{failed[0][1]}")
            return None
        return dict(responses=topics, throttle_time_ms=0)

    async def fetch(req: Request, conn: Connection) -> dict[str, Any]:
        body, v = req.body, req.api_version
        wanted: list[tuple[str, Any]] = [(t.topic, p) for t in body.topics for p in t.partitions]
        asks = [(t, p) for t, p in wanted if known(t, p.partition)]

        committed = body.isolation_level == 1   # read_committed: up to the last stable offset

        def read() -> dict[tuple[str, int], Any]:
            return {(t, p.partition): ctx.replicas.consumer_read(
                (t, p.partition), p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch if v >= 9 else -1,
                p.last_fetched_epoch if v >= 12 else -1, committed) for t, p in asks}

        def ready(got: dict[tuple[str, int], Any]) -> bool:
            return (sum(len(a.records) for a in got.values()) >= body.min_bytes
                    or any(a.error != errors.NONE or a.diverging is not None for a in got.values()))

        def run() -> dict[tuple[str, int], Any]:
            """The leader's read of each partition, again after each append or HW move while fewer
            than min_bytes are ready and max_wait_ms has not passed."""
            deadline = time.monotonic() + max(body.max_wait_ms, 0) / 1000
            while True:
                got = read()
                left = deadline - time.monotonic()
                if ready(got) or left <= 0:
                    return got
                close(got)
                ctx.replicas.wait_for_data(left)

        # every read runs on the pool, never on the listener's loop: a read takes the partition's lock, which
        # an append or a role change may hold (the records themselves stay in the segment files)
        answers = await ctx.blocking(run) if asks else {}
        topics: dict[str, list] = {}
        budget = body.max_bytes if v >= 3 else 1 << 31   # the response's max_bytes: the first batch always goes
        for t, p in wanted:
            a = answers.get((t, p.partition))
            d = dict(partition_index=p.partition, error_code=errors.UNKNOWN_TOPIC_OR_PARTITION, high_watermark=-1,
                     last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                     preferred_read_replica=-1, records=b"")
            if a is not None:
                d["error_code"] = a.error
                # Kafka 2.8.2's readFromLocalLog answers an error (OFFSET_OUT_OF_RANGE too) with every offset
                # unknown, -1 (conformance Fetch.*.offset_out_of_range)
                if a.error == errors.NONE:
                    d.update(high_watermark=a.high_watermark, last_stable_offset=a.last_stable_offset,
                             log_start_offset=a.log_start_offset)
                if a.aborted is not None:
                    d["aborted_transactions"] = [dict(producer_id=x.producer_id, first_offset=x.first_offset)
                                                 for x in a.aborted]
                if a.diverging is not None:   # Fetch v12: the consumer truncates to it, as a follower does
                    d["diverging_epoch"] = dict(epoch=a.diverging[0], end_offset=a.diverging[1])
                if a.error == errors.NONE:
                    records = a.records
                    if len(records) > budget and budget != body.max_bytes:
                        close({0: a})
                        records = b""    # over the response's max_bytes: fetched again next time
                    budget -= len(records)
                    d["records"] = records
            topics.setdefault(t, []).append(d)
        return dict(throttle_time_ms=0, error_code=errors.NONE, session_id=0,
                    responses=[dict(topic=t, partitions=ps) for t, ps in topics.items()])

    def offset_for_time(tp: pb.TopicPartition, ts: int, committed: bool) -> dict[str, Any]:
        """Kafka's ListOffsets for a timestamp: the first offset below the HW (the LSO for read_committed)
        whose record's timestamp is >= ``ts`` (offset and timestamp -1 when there is none)."""
        latest, earliest = (ctx.replicas.list_offsets(pb.ListOffsetsRequest(partitions=[tp], timestamp=t),
                                                      committed).partitions[0] for t in (-1, -2))
        r = dict(partition_index=tp.partition, error_code=latest.error_code, timestamp=-1, offset=-1,
                 leader_epoch=latest.leader_epoch)
        offset = earliest.offset
        while latest.error_code == errors.NONE and 0 <= offset < latest.offset:
            got = ctx.replicas.read_log((tp.topic, tp.partition), offset, 1 << 20)
            if got is None or not got[0]:
                break
            found = find_timestamp(got[0], ts, latest.offset)
            if found is not None:
                r["offset"], r["timestamp"] = found
                break
            offset = next_offset(got[0])
        return r

    async def list_offsets(req: Request, conn: Connection) -> dict[str, Any]:
        out: dict[tuple[str, int], dict[str, Any]] = {}
        by_ts: dict[int, list[pb.TopicPartition]] = {}
        order = []
        current: dict[tuple[str, int], int] = {}
        committed = req.api_version >= 2 and req.body.isolation_level == 1   # read_committed: the LSO
        for t in req.body.topics:
            for p in t.partitions:
                order.append((t.name, p.partition_index))
                if req.api_version >= 4:
                    current[(t.name, p.partition_index)] = p.current_leader_epoch
                if not known(t.name, p.partition_index):
                    out[(t.name, p.partition_index)] = dict(partition_index=p.partition_index, timestamp=-1, offset=-1,
                                                            error_code=errors.UNKNOWN_TOPIC_OR_PARTITION, leader_epoch=-1)
                    continue
                by_ts.setdefault(p.timestamp, []).append(pb.TopicPartition(topic=t.name, partition=p.partition_index))
        for ts, tps in by_ts.items():
            if ts >= 0:  # by time: a scan of the batches below the HW
                for tp in tps:
                    out[(tp.topic, tp.partition)] = await ctx.blocking(offset_for_time, tp, ts, committed)
                continue
            for a in ctx.replicas.list_offsets(pb.ListOffsetsRequest(partitions=tps, timestamp=ts),
                                               committed).partitions:
                out[(a.topic, a.partition)] = dict(partition_index=a.partition, error_code=a.error_code, timestamp=-1,
                                                   offset=a.offset, leader_epoch=a.leader_epoch)
        for (t, p), r in out.items():   # ListOffsets v4+: the asked current leader epoch, against the leader's
            code = leader_epoch_error(current.get((t, p), -1), r["leader_epoch"]) if r["error_code"] == 0 else 0
            if code:
                r.update(error_code=code, offset=-1, timestamp=-1, leader_epoch=-1)
        topics: dict[str, list] = {}
        for t, p in order:
            topics.setdefault(t, []).append(out[(t, p)])
        return dict(throttle_time_ms=0, topics=[dict(name=t, partitions=ps) for t, ps in topics.items()])

    async def offset_for_leader_epoch(req: Request, conn: Connection) -> dict[str, Any]:
        """Kafka 2.8's OffsetForLeaderEpoch as a leader answers it: per partition the largest epoch <= the
        asked one and its end offset (the LEO for the current epoch; -1, -1 for an epoch above every
        known one), after the current leader epoch's fencing.  Only the debugging replica id -2 may
        ask a follower."""
        leader_only = getattr(req.body, "replica_id", -1) != -2 if req.api_version >= 3 else True
        topics = []
        for t in req.body.topics:
            parts = []
            for p in t.partitions:
                r = dict(partition=p.partition, error_code=errors.NONE, leader_epoch=-1, end_offset=-1)
                parts.append(r)
                if not known(t.topic, p.partition):
                    r["error_code"] = errors.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                code, current, lookup = ctx.replicas.end_offset_for_epoch((t.topic, p.partition), leader_only)
                if code == errors.NONE:
                    code = leader_epoch_error(p.current_leader_epoch if req.api_version >= 2 else -1, current)
                r["error_code"] = code
                if code == errors.NONE:
                    r["leader_epoch"], r["end_offset"] = lookup(p.leader_epoch)
            topics.append(dict(topic=t.topic, partitions=parts))
        return dict(throttle_time_ms=0, topics=topics)

    return {0: produce, 1: fetch, 2: list_offsets, 23: offset_for_leader_epoch}
