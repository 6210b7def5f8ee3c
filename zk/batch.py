"""Batched ZooKeeper requests for kazoo: multiRead, and a lean multi for many small writes.

multiRead (opcode 22, ZooKeeper >= 3.6):

kazoo has no batched read.  A controller that reads every partition state
one znode at a time pays one round trip (and ~0.4 ms of Python) per
partition: Kafka's KAFKA-5642 problem.  multiRead carries any number of
getData/getChildren operations in one request and one response, so a
controller's failover reads cost a constant number of round trips.

Unlike multi, multiRead is not atomic: each operation succeeds or fails on
its own, and failures come back as kazoo exception *instances* in the
result list (e.g. ``NoNodeError()``).

:func:`multi_read_data` is a multiRead of getData ops only that returns each
znode's data and version and nothing else: a controller reading 10,000
partition states spends most of the read on the stats it does not use.

Lean multi (opcode 14): kazoo's Transaction builds one namedtuple per op and
serialises it through several layers; a controller writing 1,000 partition
states spends most of its failover there.  :func:`multi_write` sends the
same wire format from pre-encoded (path, data, version) triples and parses
only what the caller needs: per op, the new version or the error.
"""
from __future__ import annotations

from collections import namedtuple
from typing import Any, Callable, Iterable, Sequence

from kazoo.client import KazooClient
import struct

from kazoo.exceptions import RolledBackError, RuntimeInconsistency
from kazoo.protocol.serialization import (
    EXCEPTIONS, MultiHeader, ZnodeStat, int_struct, multiheader_struct,
    read_string, stat_struct, write_string,
)

GET_DATA = 4
GET_CHILDREN = 8
CHECK = 13
SET_DATA = 5
CREATE = 1
DELETE = 2
_ERROR = -1
_INT = struct.Struct("!i")
_STAT = stat_struct
_STAT_SIZE = stat_struct.size
_HEADER = struct.Struct("!iBi")  # type, done, err
_RESULT = struct.Struct("!iBii")  # a multiRead result's header and the int after it
_STAT_VERSION = struct.Struct("!qqqqiii")  # czxid, mzxid, ctime, mtime, version, cversion, aversion
_VERSION = struct.Struct("!32xi")  # a stat's version, after czxid, mzxid, ctime and mtime


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
                (length,) = _INT.unpack_from(buf, offset)
                offset += 4
                data = bytes(buf[offset:offset + length]) if length >= 0 else None
                offset += max(length, 0)
                results.append((data, ZnodeStat._make(_STAT.unpack_from(buf, offset))))
                offset += _STAT_SIZE
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
    return multi_read_async(client, ops).get(timeout=timeout)


def multi_read_async(client: KazooClient, ops: Sequence[tuple[int, str]]):
    """:func:`multi_read` without waiting: kazoo's async result (``.get(timeout)``), so that it can
    share a round trip with other requests sent meanwhile."""
    chroot = client.chroot or ""
    request = _MultiRead([(code, chroot + path if path != "/" or not chroot else chroot) for code, path in ops])
    result = client.handler.async_result()
    client._call(request, result)  # kazoo's own request path; no public hook exists
    return result


class _MultiReadData(namedtuple("_MultiReadData", "body")):
    """A multiRead of getData ops only, already serialised; results are (data, version) or an exception.

    A controller reads every partition state at once (10,000 znodes and more): kazoo's generic multiRead makes
    a MultiHeader and a ZnodeStat per op, and the caller a Stat, where only the data and the version are used."""

    type = 22

    def serialize(self) -> bytes:
        return self.body

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> list[Any]:
        # one struct read per result: its header (type, done, err) and the int after it (a getData's data length,
        # or an error's code); the 9-byte done header ends the buffer
        if type(buf) is not bytes:
            buf = bytes(buf)   # its slices are the data
        results: list[Any] = []
        append = results.append
        unpack_result, unpack_version, stat_size = _RESULT.unpack_from, _VERSION.unpack_from, _STAT_SIZE
        end = len(buf) - _HEADER.size
        while offset < end:
            kind, done, _err, n = unpack_result(buf, offset)
            offset += 13
            if done:   # (never before the end)
                return results
            if kind == GET_DATA:
                if n >= 0:
                    data = buf[offset:offset + n]
                    offset += n
                else:
                    data = None
                append((data, unpack_version(buf, offset)[0]))
                offset += stat_size
            elif kind == _ERROR:
                append(EXCEPTIONS[n]())
            else:  # pragma: no cover - the server sends only the types we asked for
                raise ValueError(f"multiRead: unexpected result type {kind}")
        if offset == end and _HEADER.unpack_from(buf, offset)[1]:
            return results
        raise ValueError("multiRead: the answer does not end with its done header")


def multi_read_data(client: KazooClient, paths: Sequence[str], timeout: float = 10.0) -> list[Any]:
    """getData of every path in one multiRead (one round trip, no watch): per path, in order, ``(data,
    version)`` (the znode's zkVersion), or the exception instance of that op's failure (``NoNodeError()``).
    Paths are relative to the client's chroot."""
    if not paths:
        return []
    chroot = client.chroot or ""
    get = _HEADER.pack(GET_DATA, 0, -1)
    body = b"".join([get + _string(chroot + p) + b"\0" for p in paths])
    result = client.handler.async_result()
    client._call(_MultiReadData(body + _HEADER.pack(-1, 1, -1)), result)  # kazoo's request path, as multi_read
    return result.get(timeout=timeout)


def multi_read_numbered(client: KazooClient, prefix: Callable[[str], str], items: Iterable[tuple[str, int]],
                        suffix: str, timeout: float = 10.0) -> list[Any]:
    """:func:`multi_read_data` of the paths ``prefix(name) + str(number) + suffix`` for ``(name, number)`` in
    ``items`` (every partition state: ``/brokers/topics/<t>/partitions/`` ``<p>`` ``/state``), the request built
    without making each path's string: a new controller reads 10,000 states and more at once."""
    chroot = client.chroot or ""
    get = _HEADER.pack(GET_DATA, 0, -1)
    pack = _INT.pack
    tail = suffix.encode() + b"\0"
    heads: dict[str, tuple[bytes, int]] = {}
    parts: list[bytes] = []
    append = parts.append
    for name, number in items:
        head = heads.get(name)
        if head is None:
            raw = (chroot + prefix(name)).encode()
            head = heads[name] = (raw, len(raw) + len(tail) - 1)
        digits = b"%d" % number
        append(get + pack(head[1] + len(digits)) + head[0] + digits + tail)
    if not parts:
        return []
    result = client.handler.async_result()
    client._call(_MultiReadData(b"".join(parts) + _HEADER.pack(-1, 1, -1)), result)
    return result.get(timeout=timeout)


_STRINGS: dict[str, bytes] = {}


def _string(s: str) -> bytes:
    """ZooKeeper's length-prefixed string; paths repeat, so their encodings are kept."""
    b = _STRINGS.get(s)
    if b is None:
        raw = s.encode()
        b = _INT.pack(len(raw)) + raw
        if len(_STRINGS) < 200_000:
            _STRINGS[s] = b
    return b


class _LeanMulti(namedtuple("_LeanMulti", "body")):
    """A multi whose ops are already serialised; results are (op type, version or exception)."""

    type = 14

    def serialize(self) -> bytes:
        return self.body

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> list[Any]:
        results: list[Any] = []
        unpack_header = _HEADER.unpack_from
        while True:
            kind, done, _err = unpack_header(buf, offset)
            offset += 9
            if done:
                return results
            if kind == SET_DATA:
                results.append(_STAT_VERSION.unpack_from(buf, offset)[4])
                offset += _STAT_SIZE
            elif kind == CREATE:
                (length,) = _INT.unpack_from(buf, offset)
                offset += 4 + max(length, 0)
                results.append(0)
            elif kind in (CHECK, DELETE):
                results.append(True)
            elif kind == _ERROR:
                (err,) = _INT.unpack_from(buf, offset)
                offset += 4
                results.append(EXCEPTIONS[err]())
            else:  # pragma: no cover
                raise ValueError(f"multi: unexpected result type {kind}")


def multi_write(client: KazooClient, check: tuple[str, int] | None,
                ops: Sequence[tuple[int, str, bytes | None, int]], timeout: float = 30.0) -> list[Any]:
    """One atomic multi: an optional (path, version) check, then (CREATE|SET_DATA|DELETE, path, data, version).

    Created nodes are persistent with the open ACL.  Returns one result per
    op after the check: the new version for SET_DATA, 0 for CREATE, True for
    DELETE; when the multi fails, every entry is an exception and the failing
    op's is the real cause (the others are RolledBackError/RuntimeInconsistency),
    and index 0 of the returned list is the check's result when a check was given.
    """
    return multi_write_async(client, check, ops).get(timeout=timeout)


def multi_write_async(client: KazooClient, check: tuple[str, int] | None,
                      ops: Sequence[tuple[int, str, bytes | None, int]]):
    """:func:`multi_write` without waiting: kazoo's async result (``.get(timeout)``).  Multis sent one after
    the other on a session are applied by ZooKeeper in the order sent, each atomic on its own."""
    chroot = client.chroot or ""
    header = _HEADER.pack
    parts: list[bytes] = []
    if check is not None:
        parts.append(header(CHECK, 0, -1) + _string(chroot + check[0]) + _INT.pack(check[1]))
    acl = _OPEN_ACL
    for kind, path, data, version in ops:
        p = _string(chroot + path)
        if kind == SET_DATA:
            parts.append(header(SET_DATA, 0, -1) + p + _buffer(data) + _INT.pack(version))
        elif kind == CREATE:
            parts.append(header(CREATE, 0, -1) + p + _buffer(data) + acl + _INT.pack(0))
        elif kind == DELETE:
            parts.append(header(DELETE, 0, -1) + p + _INT.pack(version))
        else:
            raise ValueError(f"multi_write: unsupported op {kind}")
    parts.append(header(-1, 1, -1))
    result = client.handler.async_result()
    client._call(_LeanMulti(b"".join(parts)), result)
    return result


def _buffer(data: bytes | None) -> bytes:
    if data is None:
        return _INT.pack(-1)
    return _INT.pack(len(data)) + data


# one ACL entry: perms ALL (31), scheme "world", id "anyone"
_OPEN_ACL = _INT.pack(1) + _INT.pack(31) + _string("world") + _string("anyone")

__all__ = ["GET_DATA", "GET_CHILDREN", "CHECK", "SET_DATA", "CREATE", "DELETE", "multi_read", "multi_read_async",
           "multi_read_data", "multi_read_numbered", "multi_write",
           "multi_write_async",
           "RolledBackError", "RuntimeInconsistency"]
