"""Kafka-style text checkpoint files, written atomically.

Every checkpoint file has the same shape::

    0                 <- version
    2                 <- number of entries
    <entry line>
    <entry line>

Two kinds are used:

* ``leader-epoch-checkpoint`` in each partition folder, entries ``epoch startOffset``;
* ``replication-offset-checkpoint`` per log directory (broker-wide), entries
  ``topic partition offset`` holding high watermarks.

Writes go to ``<file>.tmp``, which is fsynced, renamed over the file, and then the
directory is fsynced, so a reader sees either the old or the new content.  A missing
file reads as empty; anything malformed raises :class:`CheckpointError` naming the
file and the 1-based line number.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable, Mapping, TypeVar

from .batch import StorageError

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CHECKPOINT_VERSION = 0

T = TypeVar("T")


class CheckpointError(StorageError):
    """A checkpoint file could not be parsed."""

    def __init__(self, path: Path, line: int, reason: str) -> None:
        super().__init__(f"malformed checkpoint file {path}, line {line}: {reason}")
        self.path = Path(path)
        self.line = line
        self.reason = reason


def write_checkpoint(path: Path, entries: Iterable[str]) -> None:
    """Atomically replace ``path`` with a version-0 checkpoint of the given entry lines."""
    path = Path(path)
    lines = list(entries)
    for line in lines:
        if "\n" in line:
            raise ValueError(f"checkpoint entry contains a newline: {line!r}")
    text = f"{CHECKPOINT_VERSION}\n{len(lines)}\n" + "".join(f"{line}\n" for line in lines)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = text.encode("utf-8")
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
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
        write_checkpoint(self.path, (f"{epoch} {start}" for epoch, start in entries))


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
        for (topic, partition), offset in sorted(offsets.items()):
            if not topic or any(c.isspace() for c in topic):
                raise ValueError(f"topic name unusable in a checkpoint: {topic!r}")
            lines.append(f"{topic} {partition} {offset}")
        write_checkpoint(self.path, lines)
