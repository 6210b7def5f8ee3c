"""The partition leader's side of WriteTxnMarkers (Kafka's KafkaApis.handleWriteTxnMarkersRequest).

For each marker and each of its partitions this broker leads, one control batch (COMMIT or ABORT, with the
producer's id and epoch and the coordinator's epoch) is appended with acks=all and a wait of
``request.timeout.ms``; the answer lists every partition with its error once every append is done.  The
log checks the producer's epoch and the coordinator's (INVALID_PRODUCER_EPOCH,
TRANSACTION_COORDINATOR_FENCED).  A marker written to a ``__consumer_offsets`` partition is handed to the
group coordinator there, which commits or discards the producer's pending transactional offsets
(GroupCoordinator.scheduleHandleTxnCompletion).  Each marker appended is a ``txn_marker_written`` event.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from kafkacommon import errors
from proto import kafkasim_pb2 as pb
from zk.paths import OFFSETS_TOPIC


def write_txn_markers(request: pb.WriteTxnMarkersRequest, replicas: Any, emit: Callable[..., None],
                      on_offsets_marker: Callable[[int, int, bool, int], None] | None,
                      timeout_ms: int) -> pb.WriteTxnMarkersResponse:
    """Blocks until every append is done (or its wait ends).  ``on_offsets_marker(partition, producer id,
    commit, offset)``: a marker written to an offsets partition."""
    results: list[tuple[pb.TxnMarker, list[list]]] = []
    left = [0]
    cond = threading.Condition()
    for marker in request.markers:
        rows: list[list] = []
        results.append((marker, rows))
        for tp in marker.partitions:
            row = [tp.topic, tp.partition, None, -1]        # the error: None while its append waits
            rows.append(row)
            key = (tp.topic, tp.partition)

            def done(code: int, row: list = row, m: pb.TxnMarker = marker) -> None:
                row[2] = code
                if code == errors.NONE and row[0] == OFFSETS_TOPIC and on_offsets_marker is not None:
                    on_offsets_marker(row[1], m.producer_id, m.commit, row[3])
                emit("txn_marker_written", topic=row[0], partition=row[1], producer_id=m.producer_id,
                     producer_epoch=m.producer_epoch, coordinator_epoch=m.coordinator_epoch, commit=m.commit,
                     offset=row[3], error=code)
                with cond:
                    left[0] -= 1
                    cond.notify_all()

            code, offset, pending = replicas.append_marker(key, marker.producer_id, marker.producer_epoch,
                                                           marker.coordinator_epoch, marker.commit, timeout_ms,
                                                           done)
            row[3] = offset
            if pending:
                with cond:
                    left[0] += 1
            else:
                row[2] = code
                emit("txn_marker_written", topic=tp.topic, partition=tp.partition, producer_id=marker.producer_id,
                     producer_epoch=marker.producer_epoch, coordinator_epoch=marker.coordinator_epoch,
                     commit=marker.commit, offset=offset, error=code)
    with cond:
        cond.wait_for(lambda: left[0] <= 0, timeout=timeout_ms / 1000 + 5)
    return pb.WriteTxnMarkersResponse(markers=[
        pb.TxnMarkerResult(producer_id=m.producer_id, partitions=[
            pb.PartitionError(topic=t, partition=p, error_code=errors.REQUEST_TIMED_OUT if c is None else c)
            for t, p, c, _o in rows])
        for m, rows in results])
