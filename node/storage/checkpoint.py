"""Kafka-style text checkpoint files, written atomically.

Every checkpoint file has the same shape::

    0                 <- version
    2                 <- number of entries
    <entry line>
    <entry line>

Three kinds are used:

* ``leader-epoch-checkpoint`` in each partition folder, entries ``epoch startOffset``;
* ``replication-offset-checkpoint`` per log directory (broker-wide), entries
  ``topic partition offset`` holding high watermarks;
* ``cleaner-offset-checkpoint`` in each compacted partition's folder, the log
  cleaner's state (:class:`CleanerState`): tagged entries ``dirty <firstDirtyOffset>``,
  ``cleaned <startOffset> <firstCleanedAtMs>`` and ``swap <baseOffset> <endOffset>``.
  Kafka keeps first dirty offsets in one file per log directory; here the file sits
  with the partition because callers lock per partition, not per directory.

Writes go to ``<file>.tmp``, which is fsynced, renamed over the file, and then the
directory is fsynced, so a reader sees either the old or the new content (with ``sync_dir=False`` the
directory is not fsynced: the leader epoch checkpoint, as every checkpoint in Kafka 2.8.2).  A missing
file reads as empty; anything malformed raises :class:`CheckpointError` naming the
file and the 1-based line number.
"""
from __future__ import annotations

import itertools
import os
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, TypeVar

from .errors import StorageError

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CHECKPOINT_VERSION = 0

T = TypeVar("T")


class CheckpointError(StorageError):
    """A checkpoint file could not be parsed."""

    def __init__(self, path: Path, line: int, reason: str) -> None:
        super().__init__(f"malformed checkpoint file {path}, line {line}: {reason}")
        self.path = Path(path)
        self.line = line
        self.reason = reason


def write_checkpoint(path: Path, entries: Iterable[str], sync_dir: bool = True) -> None:
    """Atomically replace ``path`` with a version-0 checkpoint of the given entry lines; with ``sync_dir``
    False the caller fsyncs the directory afterwards (the rename is durable only then)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    write_synced(tmp, entries)
    os.replace(tmp, path)
    if sync_dir:
        fsync_directory(path.parent)


def write_synced(tmp: Path, entries: Iterable[str]) -> None:
    """A version-0 checkpoint of the given entry lines written to ``tmp`` and fsynced (the first half of
    :func:`write_checkpoint`; renaming ``tmp`` over the checkpoint is the second)."""
    lines = list(entries)
    body = "\n".join(lines)
    if body.count("\n") != max(len(lines) - 1, 0):   # one entry holds a newline: name the first
        bad = next(line for line in lines if "\n" in line)
        raise ValueError(f"checkpoint entry contains a newline: {bad!r}")
    text = f"{CHECKPOINT_VERSION}\n{len(lines)}\n" + body + ("\n" if lines else "")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = text.encode("utf-8")
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(directory: Path) -> None:
    """fsync a directory: the renames in it so far are durable."""
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_checkpoint(path: Path, parse: Callable[[list[str]], T]) -> list[T]:
    """Parse ``path``; ``parse`` gets the whitespace-split fields of one entry line.

    ``parse`` may raise ValueError, which is reported with the line number.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except UnicodeDecodeError as exc:
        raise CheckpointError(path, 1, f"not UTF-8 text ({exc.reason})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise CheckpointError(path, 1, "empty file, expected a version line")

    def integer(lineno: int, what: str) -> int:
        if lineno > len(lines):
            raise CheckpointError(path, lineno, f"missing {what} line")
        raw = lines[lineno - 1].strip()
        try:
            return int(raw)
        except ValueError:
            raise CheckpointError(path, lineno, f"{what} is not an integer: {raw!r}") from None

    version = integer(1, "version")
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(path, 1, f"unsupported version {version}")
    count = integer(2, "entry count")
    if count < 0:
        raise CheckpointError(path, 2, f"negative entry count {count}")
    if len(lines) - 2 < count:
        raise CheckpointError(path, len(lines) + 1, f"expected {count} entries, found {len(lines) - 2}")
    if len(lines) - 2 > count:
        raise CheckpointError(path, 3 + count, f"unexpected line after {count} entries")
    out: list[T] = []
    for lineno in range(3, 3 + count):
        fields = lines[lineno - 1].split()
        try:
            out.append(parse(fields))
        except ValueError as exc:
            raise CheckpointError(path, lineno, f"{exc} in {lines[lineno - 1]!r}") from None
    return out


def _ints(fields: list[str], n: int) -> list[int]:
    if len(fields) != n:
        raise ValueError(f"expected {n} fields, got {len(fields)}")
    return [int(f) for f in fields]


class LeaderEpochCheckpointFile:
    """``leader-epoch-checkpoint``: (epoch, start offset) entries of one partition."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def read(self) -> list[tuple[int, int]]:
        def parse(fields: list[str]) -> tuple[int, int]:
            epoch, start = _ints(fields, 2)
            if epoch < 0 or start < 0:
                raise ValueError("negative epoch or offset")
            return epoch, start
        return read_checkpoint(self.path, parse)

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        """As Kafka 2.8.2's ``CheckpointFile.write``: the new file fsynced and renamed over the old one, the
        directory not fsynced (this one is written on every new leader epoch, on the failover's path)."""
        write_checkpoint(self.path, (f"{epoch} {start}" for epoch, start in entries), sync_dir=False)

    def prepare(self, entries: Iterable[tuple[int, int]]) -> "PreparedCheckpoint":
        """:meth:`write`'s first half ahead of time: ``entries`` written to a file of their own next to the
        checkpoint and fsynced, not renamed (:meth:`install` does that; a ``.tmp`` file, so one a crash leaves
        behind is removed when the log is loaded)."""
        entries = tuple(entries)
        tmp = self.path.with_name(f"{self.path.name}.{next(_prepared_ids)}.tmp")
        try:
            write_synced(tmp, (f"{epoch} {start}" for epoch, start in entries))
        except BaseException:
            discard_file(tmp)
            raise
        return PreparedCheckpoint(tmp, entries)

    def install(self, prepared: "PreparedCheckpoint") -> None:
        """:meth:`write`'s second half: the prepared file renamed over the checkpoint (the same file, fsync and
        rename as :meth:`write` of its entries)."""
        os.replace(prepared.tmp, self.path)


@dataclass(frozen=True)
class PreparedCheckpoint:
    """A leader epoch checkpoint written and fsynced ahead of time (``tmp``), with the ``entries`` it holds."""
    tmp: Path
    entries: tuple[tuple[int, int], ...]

    def discard(self) -> None:
        discard_file(self.tmp)


def discard_file(path: Path) -> None:
    """Remove ``path`` if it is there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


_prepared_ids = itertools.count(1)


class OffsetCheckpointFile:
    """``replication-offset-checkpoint``: ``topic partition offset`` entries (high watermarks)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def read(self) -> dict[tuple[str, int], int]:
        def parse(fields: list[str]) -> tuple[tuple[str, int], int]:
            if len(fields) != 3:
                raise ValueError(f"expected 3 fields, got {len(fields)}")
            partition, offset = int(fields[1]), int(fields[2])
            if partition < 0:
                raise ValueError("negative partition")
            return (fields[0], partition), offset
        result: dict[tuple[str, int], int] = {}
        for lineno, (key, offset) in enumerate(read_checkpoint(self.path, parse), start=3):
            if key in result:
                raise CheckpointError(self.path, lineno, f"duplicate entry for {key[0]}-{key[1]}")
            result[key] = offset
        return result

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        lines = []
        usable: set[str] = set()   # each topic checked once (a broker's thousands of partitions share a few)
        for key in sorted(offsets):
            topic, partition = key
            if topic not in usable:
                if not topic or any(c.isspace() for c in topic):
                    raise ValueError(f"topic name unusable in a checkpoint: {topic!r}")
                usable.add(topic)
            lines.append(f"{topic} {partition} {offsets[key]}")
        write_checkpoint(self.path, lines)


@dataclass(frozen=True)
class CleanerState:
    """What the log cleaner remembers about one partition between runs.

    * ``first_dirty_offset``: offsets below it have been cleaned at least once.
    * ``cleaned_at``: ``(start offset, ms)`` pairs, starts increasing; offsets from a
      start up to the next start were first cleaned at that time (the "cleaned at"
      stamp that starts a tombstone's ``delete.retention.ms``).
    * ``pending_swap``: ``(base offset, end offset)`` of a cleaned segment being
      swapped in: it replaces every segment whose base offset is in [base, end).
    """

    first_dirty_offset: int = 0
    cleaned_at: tuple[tuple[int, int], ...] = ()
    pending_swap: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.first_dirty_offset < 0:
            raise ValueError(f"negative first dirty offset {self.first_dirty_offset}")
        starts = [start for start, _ in self.cleaned_at]
        if any(b <= a for a, b in zip(starts, starts[1:])) or (starts and starts[0] < 0):
            raise ValueError("cleaned-at start offsets must be >= 0 and increasing")
        if self.pending_swap is not None and not 0 <= self.pending_swap[0] < self.pending_swap[1]:
            raise ValueError(f"bad pending swap range {self.pending_swap}")

    def cleaned_at_ms(self, offset: int) -> int | None:
        """When ``offset`` was first cleaned, or None if it never was (or is not known)."""
        if offset >= self.first_dirty_offset:
            return None
        i = bisect_right([start for start, _ in self.cleaned_at], offset) - 1
        return self.cleaned_at[i][1] if i >= 0 else None

    def truncated(self, offset: int) -> "CleanerState":
        """The state after the log was truncated to ``offset`` (nothing at or above it stays cleaned)."""
        dirty = min(self.first_dirty_offset, offset)
        return CleanerState(dirty, tuple(e for e in self.cleaned_at if e[0] < dirty), self.pending_swap)


class CleanerCheckpointFile:
    """``cleaner-offset-checkpoint``: one partition's :class:`CleanerState`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def read(self) -> CleanerState | None:
        """The stored state, or None when there is no file."""
        if not self.path.exists():
            return None

        def parse(fields: list[str]) -> tuple[str, list[int]]:
            arity = {"dirty": 1, "cleaned": 2, "swap": 2}
            if not fields or fields[0] not in arity:
                raise ValueError("unknown entry tag")
            values = _ints(fields[1:], arity[fields[0]])
            if any(v < 0 for v in values):
                raise ValueError("negative value")
            return fields[0], values

        entries = read_checkpoint(self.path, parse)
        dirty = [v[0] for tag, v in entries if tag == "dirty"]
        swaps = [(v[0], v[1]) for tag, v in entries if tag == "swap"]
        if len(dirty) != 1 or len(swaps) > 1:
            raise CheckpointError(self.path, 2, "expected one dirty entry and at most one swap entry")
        try:
            return CleanerState(dirty[0], tuple((v[0], v[1]) for tag, v in entries if tag == "cleaned"),
                                swaps[0] if swaps else None)
        except ValueError as exc:
            raise CheckpointError(self.path, 3, str(exc)) from None

    def write(self, state: CleanerState) -> None:
        lines = [f"dirty {state.first_dirty_offset}"]
        lines += [f"cleaned {start} {ms}" for start, ms in state.cleaned_at]
        if state.pending_swap is not None:
            lines.append(f"swap {state.pending_swap[0]} {state.pending_swap[1]}")
        write_checkpoint(self.path, lines)
