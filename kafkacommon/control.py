"""Kafka's control records: the end-transaction markers (COMMIT, ABORT) a partition leader writes.

A marker is a control batch (attributes: control and transactional) of one record whose key is
``version:int16 (0), type:int16`` (ABORT 0, COMMIT 1; Kafka's ControlRecordType) and whose value is
``version:int16 (0), coordinator_epoch:int32`` (EndTransactionMarker), with the producer's id and epoch in
the batch header and no sequence.  Pure: no I/O.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkacommon.record_batch import RecordBatch, encode_batch

ABORT, COMMIT = 0, 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


@dataclass(frozen=True)
class EndTxnMarker:
    commit: bool
    coordinator_epoch: int


def marker_record(commit: bool, coordinator_epoch: int) -> tuple[bytes, bytes]:
    """(key, value) of an end-transaction marker record."""
    return _KEY.pack(0, COMMIT if commit else ABORT), _VALUE.pack(0, coordinator_epoch)


def marker_batch(base_offset: int, leader_epoch: int, producer_id: int, producer_epoch: int, commit: bool,
                 coordinator_epoch: int, timestamp_ms: int) -> bytes:
    """The control batch of one marker (Kafka's MemoryRecords.withEndTransactionMarker)."""
    key, value = marker_record(commit, coordinator_epoch)
    return encode_batch(base_offset, leader_epoch, [(key, value, timestamp_ms)], producer_id=producer_id,
                        producer_epoch=producer_epoch, transactional=True, control=True)


def marker_commit(key: bytes | None) -> bool | None:
    """Whether a control record's key is a COMMIT marker's (True) or an ABORT marker's (False); None for
    another control type."""
    if key is None or len(key) < _KEY.size:
        return None
    kind = _KEY.unpack_from(key)[1]
    return None if kind not in (ABORT, COMMIT) else kind == COMMIT


def read_marker(batch: RecordBatch) -> EndTxnMarker | None:
    """The end-transaction marker of a control batch; None for an empty one (cleaned) or another control type."""
    if not batch.records:
        return None
    rec = batch.records[0]
    if rec.key is None or len(rec.key) < _KEY.size:
        return None
    _version, kind = _KEY.unpack_from(rec.key)
    if kind not in (ABORT, COMMIT):
        return None
    epoch = _VALUE.unpack_from(rec.value)[1] if rec.value is not None and len(rec.value) >= _VALUE.size else -1
    return EndTxnMarker(kind == COMMIT, epoch)
