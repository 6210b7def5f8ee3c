"""A partition log's producer state on disk: ``.snapshot`` files and each segment's ``.txnindex``.

:class:`TxnLog` keeps one replica's :class:`replication.producer_state.ProducerStates` (Kafka's
ProducerStateManager) in step with its log, and the aborted transactions of each segment (Kafka's
TransactionIndex), so a restarted broker keeps its producers and transactions:

* **Snapshots** (``<offset:020d>.snapshot``, Kafka's format: replication/producer_state.py) hold the
  producers as of that offset.  One is written when a segment rolls (as of the new segment's base) and
  when the log is closed (as of its end); the two newest are kept.
* **Transaction indexes** (``<segment base:020d>.txnindex``) hold one 34-byte entry per aborted transaction
  whose marker is in that segment: version 0 (int16), producer id, first offset, last offset (the
  marker's) and the last stable offset it left (int64 each), Kafka's AbortedTxn layout.  A read_committed
  fetch gets the entries that overlap what it reads (:meth:`aborted_between`).
* **Loading is lazy.**  Opening a log reads the indexes only.  The producers are built the first time they
  are needed (a producer's batch on the leader, the last stable offset, a snapshot): from the newest
  snapshot at or below the log end, then every batch after it, as Kafka's recovery does (an index entry
  the log's markers imply and the index lacks, after a crash, is written then).  Until then appends only
  move the end the producers must be rebuilt to.
* A truncation drops the index entries at or past the new end and every snapshot past it, and rebuilds the
  producers; the deletion of old segments deletes their indexes and the snapshots below the new log start
  (but the newest); a cleaned segment takes the entries of the segments it replaces.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Callable

from replication.producer_state import AbortedTxn, ProducerStates, SnapshotError

SNAPSHOT_SUFFIX = ".snapshot"
TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
READ_CHUNK = 1 << 20


def _name(offset: int, suffix: str) -> str:
    return f"{offset:020d}{suffix}"


def _offset_of(name: str, suffix: str) -> int | None:
    stem = name[:-len(suffix)]
    return int(stem) if name.endswith(suffix) and len(stem) == 20 and stem.isdigit() else None


class TxnLog:
    def __init__(self, directory: Path, segment_bases: list[int], log_end_offset: int) -> None:
        self.dir = Path(directory)
        self.states: ProducerStates | None = None       # None: not built yet
        self.aborted: dict[int, list[AbortedTxn]] = {}  # segment base -> its index entries, in order
        self._seen: set[tuple[int, int, int]] = set()
        for name in os.listdir(self.dir):
            base = _offset_of(name, TXN_INDEX_SUFFIX)
            if base is None:
                continue
            if base not in segment_bases:
                (self.dir / name).unlink()              # an index left behind by a deleted segment
                continue
            entries = self._read_index(self.dir / name)
            kept = [e for e in entries if e.last_offset < log_end_offset]
            if len(kept) != len(entries):
                self._write_index(base, kept)           # entries past a recovered log's end
            if kept:
                self.aborted[base] = kept
            self._seen |= {(e.producer_id, e.first_offset, e.last_offset) for e in kept}

    # ------------------------------------------------------------------ files

    @staticmethod
    def _read_index(path: Path) -> list[AbortedTxn]:
        data = path.read_bytes()
        whole = len(data) - len(data) % _ENTRY.size      # a torn last entry is dropped
        out = []
        for pos in range(0, whole, _ENTRY.size):
            _version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            out.append(AbortedTxn(pid, first, last, lso))
        return out

    def _write_index(self, base: int, entries: list[AbortedTxn]) -> None:
        path = self.dir / _name(base, TXN_INDEX_SUFFIX)
        if not entries:
            path.unlink(missing_ok=True)
            return
        tmp = path.with_suffix(".txnindex.tmp")
        tmp.write_bytes(b"".join(_ENTRY.pack(0, *e) for e in entries))
        os.replace(tmp, path)

    def _add_aborted(self, segment_base: int, entry: AbortedTxn) -> None:
        key = (entry.producer_id, entry.first_offset, entry.last_offset)
        if key in self._seen:
            return
        self._seen.add(key)
        self.aborted.setdefault(segment_base, []).append(entry)
        with open(self.dir / _name(segment_base, TXN_INDEX_SUFFIX), "ab") as f:
            f.write(_ENTRY.pack(0, *entry))

    def snapshots(self) -> list[int]:
        return sorted(o for n in os.listdir(self.dir) if (o := _offset_of(n, SNAPSHOT_SUFFIX)) is not None)

    def _write_snapshot(self, offset: int) -> None:
        if self.states is None:
            return
        path = self.dir / _name(offset, SNAPSHOT_SUFFIX)
        tmp = self.dir / (path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(self.states.encode_snapshot())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        for old in self.snapshots()[:-2]:
            (self.dir / _name(old, SNAPSHOT_SUFFIX)).unlink(missing_ok=True)

    # ------------------------------------------------------------------ the producers

    def ensure(self, read: Callable[[int, int], bytes], log_start: int, log_end: int,
               segment_of: Callable[[int], int]) -> ProducerStates:
        """The producers, built if they are not: the newest usable snapshot, then the log after it."""
        if self.states is not None:
            return self.states
        states, start = ProducerStates(), log_start
        for offset in reversed(self.snapshots()):
            if offset > log_end:
                (self.dir / _name(offset, SNAPSHOT_SUFFIX)).unlink(missing_ok=True)
                continue
            try:
                states = ProducerStates.from_snapshot((self.dir / _name(offset, SNAPSHOT_SUFFIX)).read_bytes())
                start = max(offset, log_start)
                break
            except (OSError, SnapshotError):
                (self.dir / _name(offset, SNAPSHOT_SUFFIX)).unlink(missing_ok=True)
        offset = start
        while offset < log_end:
            data = read(offset, READ_CHUNK)
            if not data:
                break
            nxt, decided = states.append_batches(data)
            for txn, entry in decided:
                if entry is not None:
                    self._add_aborted(segment_of(txn.last_offset), entry)
            if nxt is None or nxt <= offset:
                break
            offset = nxt
        self.states = states
        return states

    def on_append(self, data: bytes | memoryview, segment_base: int) -> None:
        """Batches appended to the segment at ``segment_base`` (the producers follow them once built)."""
        if self.states is None:
            return
        _nxt, decided = self.states.append_batches(data)
        for _txn, entry in decided:
            if entry is not None:
                self._add_aborted(segment_base, entry)

    def on_roll(self, new_base: int) -> None:
        self._write_snapshot(new_base)

    def close(self, log_end: int) -> None:
        self._write_snapshot(log_end)

    def truncate(self, offset: int) -> None:
        """The log now ends at ``offset``: later index entries and snapshots go; the producers are rebuilt
        (lazily) from what is left."""
        for base in list(self.aborted):
            kept = [e for e in self.aborted[base] if e.last_offset < offset]
            if len(kept) != len(self.aborted[base]):
                self._write_index(base, kept)
                if kept:
                    self.aborted[base] = kept
                else:
                    del self.aborted[base]
        self._seen = {(e.producer_id, e.first_offset, e.last_offset) for es in self.aborted.values() for e in es}
        for snap in self.snapshots():
            if snap > offset:
                (self.dir / _name(snap, SNAPSHOT_SUFFIX)).unlink(missing_ok=True)
        self.states = None

    def reset(self, offset: int) -> None:
        """Every segment deleted; the log starts empty at ``offset``."""
        for base in list(self.aborted):
            self._write_index(base, [])
        self.aborted, self._seen = {}, set()
        for snap in self.snapshots():
            (self.dir / _name(snap, SNAPSHOT_SUFFIX)).unlink(missing_ok=True)
        self.states = ProducerStates()

    def on_segments_deleted(self, bases: list[int], log_start: int) -> None:
        for base in bases:
            self._write_index(base, [])
            for e in self.aborted.pop(base, []):
                self._seen.discard((e.producer_id, e.first_offset, e.last_offset))
        snaps = self.snapshots()
        for snap in snaps[:-1]:
            if snap < log_start:
                (self.dir / _name(snap, SNAPSHOT_SUFFIX)).unlink(missing_ok=True)

    def on_segments_replaced(self, old_bases: list[int], new_base: int) -> None:
        """A cleaned segment at ``new_base`` replaced ``old_bases``: it takes their entries."""
        merged = [e for base in old_bases for e in self.aborted.pop(base, [])]
        for base in old_bases:
            if base != new_base:
                self._write_index(base, [])
        merged.sort(key=lambda e: e.last_offset)
        self._write_index(new_base, merged)
        if merged:
            self.aborted[new_base] = merged

    # ------------------------------------------------------------------ reads

    def aborted_between(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions a read of [fetch_offset, upper_bound) overlaps (Kafka's
        collectAbortedTxns over the segments from the one holding ``fetch_offset``)."""
        out = []
        for base in sorted(self.aborted):
            for e in self.aborted[base]:
                if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                    out.append(e)
        return out
