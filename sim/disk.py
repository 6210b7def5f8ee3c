"""A simulated disk for the deterministic simulator: files whose unsynced tail a crash can lose or tear.

Pure: no clock, no randomness, no I/O.  A file is its current content (what reads see: the page
cache) and its durable content (as of its last ``fsync``).  What a crash keeps:

* a file only appended to since its last fsync keeps its durable content plus a *prefix* of the
  unsynced tail, of a length the caller chooses (``crash(keep)``): nothing, all of it, or a torn
  part, as a real disk that wrote some of the dirty pages before power went;
* a file truncated or overwritten since its last fsync goes back to its durable content (the
  metadata change was not on disk);
* a file never fsynced keeps a prefix of its content, like an appended one (its directory entry
  is taken to be durable: the model has no directory fsync);
* ``rename`` and ``delete`` are durable at once (the real log fsyncs the directory after both).

The disk takes no randomness: ``crash`` is handed the choice (a fraction, or a function of the
file and its unsynced length), which the simulator draws from its seed.

Latency: ``latency_ms(op, nbytes)`` is what an operation costs, for the scheduler to apply;
``slow(factor, extra_ms)`` turns the disk slow (a fault) and ``heal()`` back.

Failures (the ``disk-full`` and ``disk-error`` faults): ``fill()`` leaves no free byte, so every call that
would grow a file (append, a longer write, a new file) raises ``OSError(ENOSPC)``, while reads, truncations,
deletions and fsyncs of what was written still work, as on a full filesystem; ``fail_writes()`` is a
filesystem the kernel took read-only after an I/O error: every call that changes anything raises
``OSError(EROFS)``.  ``repair()`` ends both.  The broker treats any such error as its real log does
(an offline log directory).

Recovery of a log file after a crash must use the project's own rule: Kafka's LogSegment.recover,
:func:`kafkacommon.batch_scan.scan_for_recovery` (pure: every whole, valid, in-order batch from the
start, stopping at the first torn or corrupt one).  :meth:`SimDisk.recover_log` applies it and cuts
the file there, as node/storage/segment.py's ``LogSegment.recover`` does on a real file.
"""
from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Callable

from kafkacommon.batch_scan import RecoveryScan, scan_for_recovery

KeepChoice = float | Callable[[str, int], int]


class DiskError(Exception):
    """A missing file, or a bad argument (a negative size, a read past the end)."""


@dataclass(frozen=True)
class DiskTiming:
    """Base costs of the operations, in simulated milliseconds (fractions allowed)."""

    write_ms: float = 0.0         # per append/write call
    fsync_ms: float = 1.0         # per fsync
    read_ms: float = 0.0          # per read
    per_mib_ms: float = 1.0       # per MiB moved (append, write, read, fsync of dirty bytes)


class _File:
    __slots__ = ("data", "durable", "dirty_overwrite")

    def __init__(self) -> None:
        self.data = bytearray()
        self.durable = b""
        self.dirty_overwrite = False  # truncated below its durable size, or overwritten, since the last fsync

    @property
    def unsynced(self) -> int:
        """Bytes a crash may lose."""
        if self.dirty_overwrite:
            return len(self.data)
        return len(self.data) - len(self.durable)


class SimDisk:
    """One broker's disk: a flat namespace of paths (strings; '/' is only a character)."""

    def __init__(self, timing: DiskTiming | None = None) -> None:
        self.timing = timing or DiskTiming()
        self._files: dict[str, _File] = {}
        self._factor = 1.0
        self._extra_ms = 0.0
        self.crashes = 0
        self.full = False        # the disk-full fault: nothing may grow
        self.failing = False     # the disk-error fault: nothing may change

    # ------------------------------------------------------------ failures

    def fill(self) -> None:
        self.full = True

    def fail_writes(self) -> None:
        self.failing = True

    def repair(self) -> None:
        self.full = self.failing = False

    def _may(self, op: str, grows: bool, path: str) -> None:
        if self.failing:
            raise OSError(errno.EROFS, f"Read-only file system: {op} {path}")
        if self.full and grows:
            raise OSError(errno.ENOSPC, f"No space left on device: {op} {path}")

    # ------------------------------------------------------------ files

    def exists(self, path: str) -> bool:
        return path in self._files

    def listdir(self, prefix: str = "") -> list[str]:
        """Every path starting with ``prefix``, sorted."""
        return sorted(p for p in self._files if p.startswith(prefix))

    def size(self, path: str) -> int:
        return len(self._file(path).data)

    def unsynced_bytes(self, path: str) -> int:
        return self._file(path).unsynced

    def create(self, path: str) -> None:
        """An empty file (an existing one is left as it is)."""
        if path not in self._files:
            self._may("create", True, path)
        self._files.setdefault(path, _File())

    def append(self, path: str, data: bytes) -> int:
        """Append ``data`` (creating the file); returns the position it starts at."""
        self._may("append", bool(data) or path not in self._files, path)
        f = self._files.setdefault(path, _File())
        position = len(f.data)
        f.data += data
        return position

    def write(self, path: str, data: bytes) -> None:
        """Replace the whole content (creating the file).  Content that only extends the current one
        is an append; anything else is an overwrite, lost by a crash before the next fsync."""
        self._may("write", path not in self._files or len(data) > len(self._files[path].data), path)
        f = self._files.setdefault(path, _File())
        if len(data) >= len(f.data) and data[:len(f.data)] == f.data:
            f.data += data[len(f.data):]
        else:
            f.data = bytearray(data)
            f.dirty_overwrite = True

    def read(self, path: str, offset: int = 0, size: int | None = None) -> bytes:
        """What a read sees now (unsynced bytes included); short at the end of the file."""
        f = self._file(path)
        if offset < 0 or offset > len(f.data):
            raise DiskError(f"read of {path} at {offset}: the file has {len(f.data)} bytes")
        end = len(f.data) if size is None else min(len(f.data), offset + max(0, size))
        return bytes(f.data[offset:end])

    def truncate(self, path: str, size: int) -> None:
        """Cut the file to ``size`` bytes (extending is not allowed); durable at the next fsync."""
        f = self._file(path)
        self._may("truncate", False, path)
        if size < 0 or size > len(f.data):
            raise DiskError(f"truncate of {path} to {size}: the file has {len(f.data)} bytes")
        del f.data[size:]
        if size < len(f.durable):
            f.dirty_overwrite = True

    def fsync(self, path: str) -> int:
        """Make the file's content durable; returns how many bytes that wrote."""
        f = self._file(path)
        self._may("fsync", False, path)
        written = f.unsynced
        f.durable = bytes(f.data)
        f.dirty_overwrite = False
        return written

    def rename(self, src: str, dst: str) -> None:
        """Atomic and durable at once (replacing ``dst``)."""
        self._may("rename", False, src)
        self._files[dst] = self._file(src)
        del self._files[src]

    def delete(self, path: str) -> None:
        self._file(path)
        self._may("delete", False, path)
        del self._files[path]

    def _file(self, path: str) -> _File:
        f = self._files.get(path)
        if f is None:
            raise DiskError(f"no such file: {path}")
        return f

    # ------------------------------------------------------------ crash and recovery

    def crash(self, keep: KeepChoice = 0.0) -> dict[str, tuple[int, int]]:
        """Power loss: every file falls back to what was durable, plus (for a file only appended to)
        a prefix of its unsynced tail.  ``keep`` is the fraction of each unsynced tail kept (0 drops
        it all, 1 keeps it all; in between tears it), or ``keep(path, unsynced_len) -> bytes kept``.
        Files are visited in sorted order.  Returns {path: (size before, size after)} for every file
        whose content changed."""
        kept = {path: self._kept(keep, path, len(f.data) - len(f.durable))   # all chosen before any change
                for path, f in sorted(self._files.items()) if not f.dirty_overwrite}
        changed: dict[str, tuple[int, int]] = {}
        self.crashes += 1
        for path in sorted(self._files):
            f = self._files[path]
            before = bytes(f.data)
            if f.dirty_overwrite:
                f.data = bytearray(f.durable)
            else:
                del f.data[len(f.durable) + kept[path]:]
            f.durable = bytes(f.data)
            f.dirty_overwrite = False
            if f.data != before:
                changed[path] = (len(before), len(f.data))
        return changed

    @staticmethod
    def _kept(keep: KeepChoice, path: str, tail: int) -> int:
        if tail <= 0:
            return 0
        n = keep(path, tail) if callable(keep) else int(tail * keep)
        if not 0 <= n <= tail:
            raise DiskError(f"crash: keep {n} of {tail} unsynced bytes of {path}")
        return n

    def recover_log(self, path: str, base_offset: int) -> RecoveryScan:
        """Kafka's segment recovery on a simulated file: scan it with the project's rule and cut it
        where valid data ends (the cut is fsynced, as the real recovery's truncation is durable
        before the broker serves)."""
        scan = scan_for_recovery(self.read(path), base_offset)
        if scan.valid_bytes < self.size(path):
            self.truncate(path, scan.valid_bytes)
            self.fsync(path)
        return scan

    # ------------------------------------------------------------ latency

    def slow(self, factor: float = 1.0, extra_ms: float = 0.0) -> None:
        """A slow disk (a fault): every operation costs ``factor`` times as much plus ``extra_ms``."""
        if factor < 1.0 or extra_ms < 0:
            raise DiskError(f"slow: factor {factor} must be >= 1 and extra_ms {extra_ms} >= 0")
        self._factor, self._extra_ms = factor, extra_ms

    def heal(self) -> None:
        self._factor, self._extra_ms = 1.0, 0.0

    @property
    def is_slow(self) -> bool:
        return self._factor != 1.0 or self._extra_ms != 0.0

    def latency_ms(self, op: str, nbytes: int = 0) -> float:
        """What ``op`` (append, write, read, fsync, truncate, rename, delete) on ``nbytes`` costs now."""
        t = self.timing
        base = {"append": t.write_ms, "write": t.write_ms, "read": t.read_ms, "fsync": t.fsync_ms}.get(op)
        if base is None:
            if op not in ("truncate", "rename", "delete", "create"):
                raise DiskError(f"unknown disk operation {op!r}")
            base = 0.0
        cost = base + t.per_mib_ms * nbytes / (1 << 20)
        return cost * self._factor + self._extra_ms
