"""LogSegment: one ``.log`` file of whole record batches plus its two sparse indexes.

Files are named by the segment's base offset, zero-padded to 20 digits::

    00000000000000000000.log        batches, back to back
    00000000000000000000.index      (relativeOffset int32, position int32) per entry
    00000000000000000000.timeindex  (timestamp int64, relativeOffset int32) per entry

An offset-index entry is written for a batch once strictly more than
``index_interval_bytes`` of batches were appended before it since the previous entry
(Kafka 2.8's ``LogSegment.append``); it maps the batch's LAST offset (relative to the
segment) to the batch's start position.  A lookup takes the largest entry at or below
the target and scans forward from its position: the batch there ends at or below the
target, so the batch holding the target starts there or later.  At the same points the
time index gets (max timestamp so far, offset of the batch holding it) when that
timestamp is larger than its last entry.  Indexes are kept in memory too; lookups
binary-search the offset index and then scan batch headers forward.

Durability is the caller's business: ``append`` only writes, ``flush`` fsyncs.

The ``.log`` file is held open for the segment's life; an index file only once something is written to it
(an entry, a truncation, a recovery): the indexes are kept in memory, so an idle segment holds one
descriptor, not three, and closes one.  Kafka 2.8 holds none for an index either: it maps the file and
closes it (``AbstractIndex``), an inactive segment's only on first use (``LazyIndex``).

The log cleaner builds a replacement segment under temporary names (``file_suffix``
``.cleaned``, then ``.swap`` — e.g. ``00000000000000000000.log.cleaned``) and renames
it into place with :meth:`LogSegment.change_file_suffix`.
"""
from __future__ import annotations

import errno
import mmap
import os
import struct
from bisect import bisect_right
from pathlib import Path
from typing import Iterator

from kafkacommon.batch_scan import scan_for_recovery
from kafkacommon.record_batch import HEADER_SIZE, BatchHeader, CorruptBatchError, peek_header
from .file_records import FileRecords

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"   # a segment retention deleted, waiting out file.delete.delay.ms
DEFAULT_INDEX_INTERVAL_BYTES = 4096
_INDEX_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_RECENT_BATCHES = 256
_INT32_MAX = (1 << 31) - 1


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``00000000000000000042.log`` for base offset 42 and suffix ``.log``."""
    return f"{base_offset:020d}{suffix}"


def parse_segment_base(name: str) -> int | None:
    """Base offset encoded in a ``.log`` file name, or None if the name is not one."""
    stem, dot, suffix = name.partition(".")
    if "." + suffix != LOG_SUFFIX or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LogSegment:
    """One segment of a partition log.  Use :meth:`create` or :meth:`open`."""

    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int,
                 file_suffix: str = "") -> None:
        if base_offset < 0:
            raise ValueError(f"negative base offset {base_offset}")
        if index_interval_bytes < 0:
            raise ValueError("index_interval_bytes must not be negative")
        self.directory = Path(directory)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.file_suffix = file_suffix
        self._set_paths()
        self._log_fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        # the index files' descriptors, opened on first write (:meth:`_index_fd`, :meth:`_time_index_fd`)
        self._idx_fd: int | None = None
        self._tidx_fd: int | None = None
        self._size = os.fstat(self._log_fd).st_size
        self._idx_offsets: list[int] = []    # relative offsets, increasing
        self._idx_positions: list[int] = []  # batch start positions, increasing
        self._tidx: list[tuple[int, int]] = []  # (timestamp, relative offset)
        self._next_offset = base_offset
        # base offset -> position of the batches appended last: followers and consumers read from
        # just behind the LEO, so their reads skip the scan from the sparse index entry
        self._recent: dict[int, int] = {}
        self._max_ts = -1
        self._offset_of_max_ts = base_offset - 1
        self._bytes_since_index = 0
        self._closed = False
        self._first_ts: int | None = None  # the first batch's max timestamp (Kafka's rollingBasedTimestamp)
        self.created_ms: int | None = None  # set by whoever creates it with a clock reading (segment.ms rolls)
        self.roll_jitter_ms = 0             # drawn at creation from segment.jitter.ms (Kafka's rollJitterMs)
        self.last_dropped_batches = 0
        self.recovery: tuple[int, int] | None = None  # (valid, truncated) of the last recover()
        # written since the last fsync (or not known not to be: an existing segment opened here)
        self._dirty = True
        # the index files are an existing segment's, not known to be fsynced: the next flush fsyncs them too,
        # opened for it if nothing opened them before
        self._sync_indexes = False

    def _set_paths(self) -> None:
        name = segment_file_name
        self.log_path = self.directory / (name(self.base_offset, LOG_SUFFIX) + self.file_suffix)
        self.index_path = self.directory / (name(self.base_offset, INDEX_SUFFIX) + self.file_suffix)
        self.time_index_path = self.directory / (name(self.base_offset, TIME_INDEX_SUFFIX) + self.file_suffix)

    # ------------------------------------------------------------ lifecycle

    @classmethod
    def create(cls, directory: Path, base_offset: int,
               index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES, *,
               file_suffix: str = "", sync_dir: bool = True) -> "LogSegment":
        """Create a new empty segment; fails if its .log file already exists.

        ``file_suffix`` (e.g. ``.cleaned``) is appended to all three file names.  ``sync_dir``: fsync the
        directory, so the new names survive a power loss (a new log's first segment skips it: if its names are
        lost, so is the empty log, and the broker creates it again; Kafka 2.8 fsyncs no directory).
        """
        path = Path(directory) / (segment_file_name(base_offset, LOG_SUFFIX) + file_suffix)
        if path.exists():
            raise FileExistsError(path)
        seg = cls(Path(directory), base_offset, index_interval_bytes, file_suffix)
        # a new segment holds nothing to fsync, unless index files were left behind and are cut here (their
        # descriptors then stay open for the next flush); empty index files are created and closed
        seg._dirty = False
        for path, attr in ((seg.index_path, "_idx_fd"), (seg.time_index_path, "_tidx_fd")):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if os.fstat(fd).st_size:
                os.ftruncate(fd, 0)
                setattr(seg, attr, fd)
                seg._dirty = True
            else:
                os.close(fd)
        if sync_dir:
            fsync_dir(seg.directory)
        return seg

    @classmethod
    def open(cls, directory: Path, base_offset: int,
             index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES, *, recover: bool = False,
             file_suffix: str = "") -> "LogSegment":
        """Open an existing segment (under ``file_suffix`` names, e.g. ``.swap``).

        With ``recover`` the whole log is validated (see :meth:`recover`).  Otherwise the
        index files are loaded and only the batches after the last index entry are read;
        if the indexes fail a sanity check or that tail is not whole, ``recover`` runs
        anyway.  ``recovery`` holds the result when recovery ran.
        """
        path = Path(directory) / (segment_file_name(base_offset, LOG_SUFFIX) + file_suffix)
        if not path.exists():
            raise FileNotFoundError(path)
        seg = cls(Path(directory), base_offset, index_interval_bytes, file_suffix)
        seg._sync_indexes = True
        if recover or not seg._load_indexes():
            seg.recover()
            return seg
        try:
            seg._reload_tail()
        except CorruptBatchError:
            seg.recover()
        return seg

    def change_file_suffix(self, new_suffix: str) -> None:
        """Rename the three files from the current suffix to ``new_suffix``, then fsync the directory.

        The index files go first and the ``.log`` last, so the ``.log`` name is the
        commit point a crash recovery looks at.  Open descriptors stay valid.
        """
        if self._closed:
            raise ValueError(f"{self} is closed")
        old = (self.index_path, self.time_index_path, self.log_path)
        self.file_suffix = new_suffix
        self._set_paths()
        for src, dst in zip(old, (self.index_path, self.time_index_path, self.log_path)):
            os.replace(src, dst)
        fsync_dir(self.directory)

    def flush(self) -> None:
        """fsync the log and both index files, unless nothing was written to them since their last fsync
        (then it would make nothing more durable: an idle broker's close costs no fsync per segment)."""
        if not self._dirty:
            return
        os.fsync(self._log_fd)
        for fd, path in ((self._idx_fd, self.index_path), (self._tidx_fd, self.time_index_path)):
            if fd is not None:
                os.fsync(fd)
            elif self._sync_indexes:   # not opened here: written (if at all) before this segment was opened
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        self._sync_indexes = False
        self._dirty = False

    def close(self) -> None:
        """Flush and close the files (idempotent)."""
        if self._closed:
            return
        self.flush()
        self._close_fds()

    def close_handles(self) -> None:
        """Close the files without flushing (idempotent): a segment on an offline directory."""
        if not self._closed:
            self._close_fds()

    def _close_fds(self) -> None:
        self._closed = True
        idx, tidx, self._idx_fd, self._tidx_fd = self._idx_fd, self._tidx_fd, None, None
        os.close(self._log_fd)
        for fd in (idx, tidx):
            if fd is not None:
                os.close(fd)

    def _index_fd(self) -> int:
        """The offset index file's descriptor, opened on first use."""
        if self._idx_fd is None:
            self._idx_fd = self._open_index(self.index_path)
        return self._idx_fd

    def _time_index_fd(self) -> int:
        """The time index file's descriptor, opened on first use."""
        if self._tidx_fd is None:
            self._tidx_fd = self._open_index(self.time_index_path)
        return self._tidx_fd

    def _open_index(self, path: Path) -> int:
        if self._closed:
            raise OSError(errno.EBADF, f"{self} is closed")
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    def delete(self) -> None:
        """Close the segment and remove its three files."""
        if not self._closed:
            self._close_fds()
        for path in (self.log_path, self.index_path, self.time_index_path):
            path.unlink(missing_ok=True)
        fsync_dir(self.directory)

    def seal(self) -> None:
        """Called when the segment stops being active: final time-index entry, then fsync."""
        if self._max_ts >= 0 and (not self._tidx or self._max_ts > self._tidx[-1][0]):
            entry = (self._max_ts, self._offset_of_max_ts - self.base_offset)
            self._dirty = True
            os.pwrite(self._time_index_fd(), _TIME_ENTRY.pack(*entry), len(self._tidx) * _TIME_ENTRY.size)
            self._tidx.append(entry)
        self.flush()

    # ------------------------------------------------------------ properties

    @property
    def size(self) -> int:
        """Bytes in the .log file."""
        return self._size

    @property
    def next_offset(self) -> int:
        """Last offset in the segment + 1 (the base offset when empty)."""
        return self._next_offset

    @property
    def max_timestamp(self) -> int:
        """Largest batch max timestamp in the segment, -1 when empty."""
        return self._max_ts

    @property
    def first_batch_timestamp(self) -> int:
        """The first batch's max timestamp (-1 when empty or without one): the base of age-based rolls."""
        if self._first_ts is None:
            self._first_ts = self._header_at(0).max_timestamp if self._size else -1
        return self._first_ts

    def index_full(self, max_index_bytes: int) -> bool:
        """Kafka's ``offsetIndex.isFull || timeIndex.isFull`` for ``segment.index.bytes`` (entries of 8 and
        12 bytes)."""
        return len(self._idx_offsets) >= max_index_bytes // 8 or len(self._tidx) >= max_index_bytes // 12

    def offset_index_entries(self) -> list[tuple[int, int]]:
        """(absolute offset, position) of every offset-index entry."""
        return [(self.base_offset + r, p) for r, p in zip(self._idx_offsets, self._idx_positions)]

    def time_index_entries(self) -> list[tuple[int, int]]:
        """(timestamp, absolute offset) of every time-index entry."""
        return [(ts, self.base_offset + r) for ts, r in self._tidx]

    # ------------------------------------------------------------ writing

    def _index_point(self, position: int, base_offset: int, last_offset: int,
                     max_timestamp: int, size: int) -> tuple[bytes, bytes]:
        """Account one batch for the indexes; return the encoded new entries (maybe empty)."""
        if max_timestamp > self._max_ts:
            self._max_ts, self._offset_of_max_ts = max_timestamp, last_offset
        idx = tidx = b""
        if self._bytes_since_index > self.index_interval_bytes:  # Kafka: strictly more
            rel = last_offset - self.base_offset  # Kafka keys the entry by the batch's last offset
            self._idx_offsets.append(rel)
            self._idx_positions.append(position)
            idx = _INDEX_ENTRY.pack(rel, position)
            if not self._tidx or self._max_ts > self._tidx[-1][0]:
                entry = (self._max_ts, self._offset_of_max_ts - self.base_offset)
                self._tidx.append(entry)
                tidx = _TIME_ENTRY.pack(*entry)
            self._bytes_since_index = 0
        self._bytes_since_index += size
        self._next_offset = last_offset + 1
        return idx, tidx

    def append(self, batch_bytes: bytes | bytearray | memoryview, base_offset: int, last_offset: int,
               max_timestamp: int) -> int:
        """Append whole batch bytes whose offsets are [base_offset, last_offset]; return the position.

        The caller has validated the bytes; this only checks offset order and range.
        """
        if base_offset < self._next_offset or last_offset < base_offset:
            raise ValueError(f"offsets {base_offset}..{last_offset} do not follow {self._next_offset - 1}")
        if last_offset - self.base_offset > _INT32_MAX:
            raise ValueError("offset does not fit the segment's 32-bit relative offsets")
        if self._size + len(batch_bytes) > _INT32_MAX:
            raise ValueError("segment would exceed 2 GiB")
        position = self._size
        if position == 0:
            self._first_ts = max_timestamp
        self._dirty = True
        written = os.pwrite(self._log_fd, batch_bytes, position)
        if written != len(batch_bytes):   # a short write: the device filled up part way
            raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (a short write to {self.log_path.name}: "
                                        f"{written} of {len(batch_bytes)} bytes)")
        self._size += len(batch_bytes)
        self._recent[base_offset] = position
        if len(self._recent) > _RECENT_BATCHES:
            del self._recent[next(iter(self._recent))]
        n_idx, n_tidx = len(self._idx_offsets), len(self._tidx)
        idx, tidx = self._index_point(position, base_offset, last_offset, max_timestamp, len(batch_bytes))
        if idx:
            os.pwrite(self._index_fd(), idx, n_idx * _INDEX_ENTRY.size)
        if tidx:
            os.pwrite(self._time_index_fd(), tidx, n_tidx * _TIME_ENTRY.size)
        return position

    # ------------------------------------------------------------ reading

    def _header_at(self, position: int) -> BatchHeader:
        header = peek_header(os.pread(self._log_fd, HEADER_SIZE, position), 0)
        if position + header.size_bytes > self._size:
            raise CorruptBatchError("batch overruns the segment", position, incomplete=True)
        return header

    def index_lookup(self, offset: int) -> tuple[int, int]:
        """Largest offset-index entry at or below ``offset`` as (offset, position); (base, 0) if none."""
        i = bisect_right(self._idx_offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._idx_offsets[i], self._idx_positions[i]

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= ``offset``, or None."""
        if offset >= self._next_offset:
            return None
        recent = self._recent.get(offset)
        if recent is not None:
            return recent, self._header_at(recent)
        _, position = self.index_lookup(offset)
        while position < self._size:
            header = self._header_at(position)
            if header.last_offset >= offset:
                return position, header
            position += header.size_bytes
        return None

    def iter_headers(self, start_offset: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of every batch from the one containing ``start_offset``."""
        found = self.find_batch(start_offset)
        if found is None:
            return
        position, header = found
        while True:
            yield position, header
            position += header.size_bytes
            if position >= self._size:
                return
            header = self._header_at(position)

    def read(self, start_offset: int, max_bytes: int, max_offset: int | None = None,
             *, min_one: bool = True) -> bytes:
        """Whole batches from the one containing ``start_offset`` (see :meth:`read_slice`)."""
        return self.read_slice(start_offset, max_bytes, max_offset, min_one=min_one)[0]

    def read_slice(self, start_offset: int, max_bytes: int, max_offset: int | None = None,
                   *, min_one: bool = True) -> tuple[bytes, int]:
        """Whole batches from the one containing ``start_offset``, and the offset after them
        (see :meth:`span`)."""
        start, end, next_offset = self.span(start_offset, max_bytes, max_offset, min_one=min_one)
        if start == end:
            return b"", start_offset
        return os.pread(self._log_fd, end - start, start), next_offset

    def file_slice(self, start_offset: int, max_bytes: int, max_offset: int | None = None,
                   *, min_one: bool = True) -> tuple[FileRecords | None, int]:
        """As :meth:`read_slice`, but the batches stay in the file: a :class:`FileRecords` on a
        duplicate of this segment's descriptor (None when nothing qualifies)."""
        start, end, next_offset = self.span(start_offset, max_bytes, max_offset, min_one=min_one)
        if start == end:
            return None, start_offset
        return FileRecords.of(self._log_fd, start, end - start), next_offset

    def span(self, start_offset: int, max_bytes: int, max_offset: int | None = None,
             *, min_one: bool = True) -> tuple[int, int, int]:
        """The file positions [start, end) of whole batches from the one containing ``start_offset``,
        and the offset after them.

        Stops before the batch that would make the result exceed ``max_bytes`` (the first
        batch is returned whole regardless when ``min_one``) and, with ``max_offset``,
        before the first batch whose last offset is >= ``max_offset``.  Returns
        (0, 0, start_offset) when nothing qualifies.
        """
        start = end = None
        next_offset = start_offset
        for position, header in self.iter_headers(start_offset):
            if max_offset is not None and header.last_offset >= max_offset:
                break
            if start is None:
                if header.size_bytes > max_bytes and not min_one:
                    break
                start = position
            elif position + header.size_bytes - start > max_bytes:
                break
            end, next_offset = position + header.size_bytes, header.next_offset
        if start is None or end is None:
            return 0, 0, start_offset
        return start, end, next_offset

    # ------------------------------------------------------------ truncation and recovery

    def truncate_to(self, offset: int) -> int:
        """Drop the batch containing ``offset`` and all later ones; return the bytes removed."""
        found = self.find_batch(max(offset, self.base_offset))
        if found is None:
            return 0
        position = found[0]
        removed = self._size - position
        self._recent.clear()
        self._first_ts = None
        self._dirty = True
        os.ftruncate(self._log_fd, position)
        self._size = position
        keep = bisect_right(self._idx_positions, position - 1)
        del self._idx_offsets[keep:], self._idx_positions[keep:]
        os.ftruncate(self._index_fd(), keep * _INDEX_ENTRY.size)
        first_dropped = found[1].base_offset - self.base_offset
        self._tidx = [e for e in self._tidx if e[1] < first_dropped]
        os.ftruncate(self._time_index_fd(), len(self._tidx) * _TIME_ENTRY.size)
        self._reload_tail()
        return removed

    def _load_indexes(self) -> bool:
        """Read both index files; False if they fail the sanity checks."""
        raw, traw = self._read_index(self.index_path), self._read_index(self.time_index_path)
        if len(raw) % _INDEX_ENTRY.size or len(traw) % _TIME_ENTRY.size:
            return False
        entries = list(_INDEX_ENTRY.iter_unpack(raw))
        tentries = list(_TIME_ENTRY.iter_unpack(traw))
        for prev, cur in zip(entries, entries[1:]):
            if cur[0] <= prev[0] or cur[1] <= prev[1]:
                return False
        for prev_t, cur_t in zip(tentries, tentries[1:]):
            if cur_t[0] <= prev_t[0] or cur_t[1] < prev_t[1]:
                return False
        if entries and (entries[0][0] < 0 or entries[0][1] < 0 or entries[-1][1] >= self._size):
            return False
        if tentries and tentries[0][1] < 0:
            return False
        self._idx_offsets = [e[0] for e in entries]
        self._idx_positions = [e[1] for e in entries]
        self._tidx = [(t, r) for t, r in tentries]
        return True

    def _read_index(self, path: Path) -> bytes:
        """An index file's bytes (created empty when missing), its descriptor closed again."""
        fd = self._open_index(path)
        try:
            return os.pread(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)

    def _reload_tail(self) -> None:
        """Recompute next offset, max timestamp and index spacing from the last index entry on."""
        self._recent.clear()
        start = self._idx_positions[-1] if self._idx_positions else 0
        if self._tidx:
            self._max_ts, rel = self._tidx[-1]
            self._offset_of_max_ts = self.base_offset + rel
        else:
            self._max_ts, self._offset_of_max_ts = -1, self.base_offset - 1
        self._next_offset = self.base_offset
        position = start
        while position < self._size:
            header = self._header_at(position)
            if header.max_timestamp > self._max_ts:
                self._max_ts, self._offset_of_max_ts = header.max_timestamp, header.last_offset
            self._next_offset = header.next_offset
            position += header.size_bytes
        self._bytes_since_index = self._size - start

    def recover(self) -> tuple[int, int]:
        """Validate every batch from position 0 and rebuild both indexes.

        Stops at the first torn, corrupt (CRC, magic, length) or out-of-order batch and
        truncates the log there: the rule is :func:`kafkacommon.batch_scan.scan_for_recovery`,
        which the simulator's disk applies too.  Returns (valid_bytes, truncated_bytes);
        ``last_dropped_batches`` counts the batches in the dropped tail (best effort:
        the bad one, plus whole-looking ones after it, a trailing fragment counting 1).
        """
        self._idx_offsets, self._idx_positions, self._tidx = [], [], []
        self._recent.clear()
        self._first_ts = None
        self._next_offset, self._bytes_since_index = self.base_offset, 0
        self._max_ts, self._offset_of_max_ts = -1, self.base_offset - 1
        idx_out, tidx_out = bytearray(), bytearray()
        position, dropped = 0, 0
        if self._size:
            with mmap.mmap(self._log_fd, self._size, access=mmap.ACCESS_READ) as mm:
                scan = scan_for_recovery(mm, self.base_offset)
                for pos, header in scan.headers:
                    idx, tidx = self._index_point(pos, header.base_offset, header.last_offset,
                                                  header.max_timestamp, header.size_bytes)
                    idx_out += idx
                    tidx_out += tidx
                position, dropped = scan.valid_bytes, scan.dropped_batches
        truncated = self._size - position
        self._dirty = True
        if truncated:
            os.ftruncate(self._log_fd, position)
            self._size = position
        for fd, data in ((self._index_fd(), idx_out), (self._time_index_fd(), tidx_out)):
            os.ftruncate(fd, 0)
            if data:
                os.pwrite(fd, bytes(data), 0)
        self.last_dropped_batches = dropped
        self.recovery = (position, truncated)
        return position, truncated

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, next={self._next_offset}, size={self._size})"
