"""ZooKeeper's multiRead (opcode 22, ZooKeeper >= 3.6) for kazoo.

kazoo has no batched read.  A controller that reads every partition state
one znode at a time pays one round trip (and ~0.4 ms of Python) per
partition: Kafka's KAFKA-5642 problem.  multiRead carries any number of
getData/getChildren operations in one request and one response, so a
controller's failover reads cost a constant number of round trips.

Unlike multi, multiRead is not atomic: each operation succeeds or fails on
its own, and failures come back as kazoo exception *instances* in the
result list (e.g. ``NoNodeError()``).
"""
from __future__ import annotations

from collections import namedtuple
from typing import Any, Sequence

from kazoo.client import KazooClient
from kazoo.protocol.serialization import (
    EXCEPTIONS, MultiHeader, ZnodeStat, int_struct, multiheader_struct,
    read_buffer, read_string, stat_struct, write_string,
)

GET_DATA = 4
GET_CHILDREN = 8
_ERROR = -1


class _MultiRead(namedtuple("_MultiRead", "ops")):
    """The request; ``ops`` is a sequence of (opcode, absolute path)."""

    type = 22

    def serialize(self) -> bytearray:
        b = bytearray()
        for code, path in self.ops:
            b.extend(MultiHeader(code, False, -1).serialize())
            b.extend(write_string(path))
            b.append(0)  # no watch
        b.extend(multiheader_struct.pack(-1, True, -1))
        return b

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> list[Any]:
        results: list[Any] = []
        header, offset = MultiHeader.deserialize(buf, offset)
        while not header.done:
            if header.type == GET_DATA:
                data, offset = read_buffer(buf, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(buf, offset))
                offset += stat_struct.size
                results.append((data, stat))
            elif header.type == GET_CHILDREN:
                (count,) = int_struct.unpack_from(buf, offset)
                offset += int_struct.size
                children = []
                for _ in range(count):
                    name, offset = read_string(buf, offset)
                    children.append(name)
                results.append(children)
            elif header.type == _ERROR:
                (err,) = int_struct.unpack_from(buf, offset)
                offset += int_struct.size
                results.append(EXCEPTIONS[err]())
            else:  # pragma: no cover - the server sends only the types we asked for
                raise ValueError(f"multiRead: unexpected result type {header.type}")
            header, offset = MultiHeader.deserialize(buf, offset)
        return results


def multi_read(client: KazooClient, ops: Sequence[tuple[int, str]], timeout: float = 10.0) -> list[Any]:
    """Run ``ops`` ((GET_DATA|GET_CHILDREN, path), ...) in one round trip.

    Returns, per op in order: ``(data, ZnodeStat)`` for GET_DATA, a list of
    child names for GET_CHILDREN, or an exception instance when that op failed.
    Paths are relative to the client's chroot.
    """
    if not ops:
        return []
    chroot = client.chroot or ""
    request = _MultiRead([(code, chroot + path if path != "/" or not chroot else chroot) for code, path in ops])
    result = client.handler.async_result()
    client._call(request, result)  # kazoo's own request path; no public hook exists
    return result.get(timeout=timeout)
