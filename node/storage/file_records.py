"""Record bytes that stay in their segment files until they are written to a socket.

A consumer's Fetch answer carries whole batches straight from the log; Kafka sends
them with ``FileChannel.transferTo`` (sendfile) without reading them into the JVM.
:class:`FileRecords` is that here: ranges of segment files, each on a duplicate of
the segment's descriptor (so a segment closed, deleted or replaced by the cleaner
meanwhile still sends the bytes it had), written by the listener with
``os.sendfile`` (``listener.server``) or read into memory where a copy is wanted.
"""
from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass
class FileSlice:
    file: object          # an unbuffered binary file on a duplicate descriptor (closes with it)
    position: int
    size: int


class FileRecords:
    """Whole batches of one partition's read: ``len()`` bytes in ``slices``, in order."""

    stays_in_file = True   # listener.protocol splices such a field in as a piece of its own

    def __init__(self, slices: list[FileSlice]) -> None:
        self.slices = slices
        self.size = sum(s.size for s in slices)

    @classmethod
    def of(cls, fd: int, position: int, size: int) -> "FileRecords":
        return cls([FileSlice(open(os.dup(fd), "rb", buffering=0), position, size)])

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def extend(self, other: "FileRecords") -> None:
        self.slices += other.slices
        self.size += other.size

    def read(self) -> bytes:
        """The bytes (one read per slice); short when a file was truncated meanwhile."""
        return b"".join(os.pread(s.file.fileno(), s.size, s.position) for s in self.slices)

    def __bytes__(self) -> bytes:
        return self.read()

    def close(self) -> None:
        for s in self.slices:
            s.file.close()
