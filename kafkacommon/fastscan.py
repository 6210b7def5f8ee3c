"""A fast path for reading (offset, key, value) out of record batches, for log replay.

:func:`kafkacommon.record_batch.decode_batch` builds a :class:`Record` per record
through generic varint helpers; that is the clear reference decoder, but a
coordinator load reads millions of records.  :func:`iter_batch_records`
validates each batch the same way (header, magic, CRC-32C via
``validate_batch``) and then walks the records with the one-byte varint case
inlined.  Anything unusual in a batch (a multi-byte length, headers, bytes
left over) hands that batch to ``decode_batch``, which either decodes it or
raises the same :class:`CorruptBatchError` with its detailed reason.

Pure: no I/O.
"""
from __future__ import annotations

from typing import Iterator

from kafkacommon.control import read_marker
from kafkacommon.record_batch import (
    CONTROL_FLAG_MASK, HEADER_SIZE, TRANSACTIONAL_FLAG_MASK, CorruptBatchError, decode_batch, validate_batch,
)
from kafkacommon.varint import decode_varint


def _fast_records(buf, pos: int, end: int, base: int, count: int, latest: dict | None = None
                  ) -> list[tuple[int, bytes | None, bytes | None]] | None:
    """The records of one batch, or None when the batch needs the reference decoder.
    With ``latest``, each record goes straight into it as ``latest[key] = (offset, value)``
    (and the list stays empty): the last-record-per-key map a replay needs."""
    out: list = []
    staged: list = []
    p = pos + HEADER_SIZE
    for _ in range(count):
        b = buf[p]                               # record length
        if b & 0x80:
            length, p = decode_varint(buf, p, end)
        else:
            length = (b >> 1) ^ -(b & 1)
            p += 1
        rec_end = p + length
        if length < 0 or rec_end > end:
            return None
        p += 1                                   # attributes
        b = buf[p]                               # timestampDelta (varlong): skip it
        while b & 0x80:
            p += 1
            b = buf[p]
        p += 1
        b = buf[p]                               # offsetDelta
        if b & 0x80:
            b2 = buf[p + 1]
            if b2 & 0x80:
                off, p = decode_varint(buf, p, rec_end)
            else:
                u = (b & 0x7F) | (b2 << 7)
                off = (u >> 1) ^ -(u & 1)
                p += 2
        else:
            off = (b >> 1) ^ -(b & 1)
            p += 1
        b = buf[p]                               # key length
        if b & 0x80:
            klen, p = decode_varint(buf, p, rec_end)
        else:
            klen = (b >> 1) ^ -(b & 1)
            p += 1
        if klen >= 0:
            key = buf[p:p + klen]
            p += klen
        else:
            key = None
        b = buf[p]                               # value length
        if b & 0x80:
            vlen, p = decode_varint(buf, p, rec_end)
        else:
            vlen = (b >> 1) ^ -(b & 1)
            p += 1
        if vlen >= 0:
            value = buf[p:p + vlen]
            p += vlen
        else:
            value = None
        if p != rec_end - 1 or buf[p] != 0:      # exactly one byte left: a header count of 0
            return None
        p = rec_end
        if latest is None:
            out.append((base + off, key, value))
        else:
            staged.append((key, (base + off, value)))
    if p != end:
        return None
    if latest is not None:
        latest.update(staged)  # only once the whole batch parsed: a fallback must not see half of it
    return out


def iter_batch_records(buf: bytes | memoryview, start: int = 0
                       ) -> Iterator[tuple[int, list[tuple[int, bytes | None, bytes | None]]]]:
    """(next offset after the batch, [(offset, key, value), ...]) for every whole batch in ``buf``.

    Stops at a partial batch at the end (a read cut mid-batch); raises
    CorruptBatchError on a corrupt one."""
    raw = bytes(buf)  # slicing bytes gives keys and values in one copy each
    mv = memoryview(raw)
    pos, n = start, len(raw)
    while pos + HEADER_SIZE <= n and _whole(mv, pos, n):
        header = validate_batch(mv, pos)
        end = pos + header.size_bytes
        recs = None
        if header.attributes == 0 and header.record_count >= 0:
            try:
                recs = _fast_records(raw, pos, end, header.base_offset, header.record_count)
            except (IndexError, ValueError):
                recs = None
        if recs is None:
            batch, _ = decode_batch(mv, pos)
            recs = [(r.offset, r.key, r.value) for r in batch.records]
        yield header.base_offset + header.last_offset_delta + 1, recs
        pos = end


def _whole(mv: memoryview, pos: int, n: int) -> bool:
    length = int.from_bytes(mv[pos + 8:pos + 12], "big", signed=True)
    return length >= 0 and pos + 12 + length <= n


def scan_latest(buf: bytes | memoryview, latest: dict[bytes | None, tuple[int, bytes | None]],
                pending: dict[int, dict[bytes | None, tuple[int, bytes | None]]] | None = None
                ) -> tuple[int | None, int]:
    """Put every record of the whole batches in ``buf`` into ``latest`` (key -> (offset,
    value), the last one winning); return (next offset after the last batch, or None if
    there was none, and the number of records read).

    With ``pending``, transactions are followed as Kafka's coordinator load does: a
    transactional batch's records go to ``pending[producer id]`` instead, and its
    producer's marker (a control batch) moves them into ``latest`` (COMMIT; each only
    where it is later than what ``latest`` holds) or drops them (ABORT); what is still
    pending at the end belongs to transactions not decided yet."""
    raw = bytes(buf)
    mv = memoryview(raw)
    pos, n, nxt, count = 0, len(raw), None, 0
    while pos + HEADER_SIZE <= n and _whole(mv, pos, n):
        header = validate_batch(mv, pos)
        end = pos + header.size_bytes
        done = None
        if pending is not None and header.attributes & (TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK):
            batch, _ = decode_batch(mv, pos)
            if batch.is_control:
                marker = read_marker(batch)
                txn = pending.pop(batch.producer_id, None)
                if marker is not None and marker.commit and txn:
                    for key, (off, value) in txn.items():
                        if key not in latest or latest[key][0] < off:
                            latest[key] = (off, value)
            else:
                records = pending.setdefault(batch.producer_id, {})
                for r in batch.records:
                    records[r.key] = (r.offset, r.value)
            count += header.record_count
            nxt = header.base_offset + header.last_offset_delta + 1
            pos = end
            continue
        if header.attributes == 0 and header.record_count >= 0:
            try:
                done = _fast_records(raw, pos, end, header.base_offset, header.record_count, latest)
            except (IndexError, ValueError):
                done = None
        if done is None:
            batch, _ = decode_batch(mv, pos)
            for r in batch.records:
                latest[r.key] = (r.offset, r.value)
        count += header.record_count
        nxt = header.base_offset + header.last_offset_delta + 1
        pos = end
    return nxt, count


__all__ = ["iter_batch_records", "scan_latest", "CorruptBatchError"]
