"""ZooKeeper's transaction log, read back: every write a server applied, in zxid order.

A ZooKeeper server appends each transaction it commits to ``<dataDir>/version-2/log.<zxid>`` (Jute
encoding, ZooKeeper's ``FileTxnLog``) before it answers.  Reading those files after a run gives the exact
sequence of values every znode took, with none of the gaps a poll or a watch leaves when two writes come
a few milliseconds apart (Kafka's controller does that at a failover).  ``kafkasim compare`` records both
sides' ZooKeeper this way.

    for w in writes(read_log_dir(server_data_dir / "version-2"), chroot="/cmp"):
        w.path, w.data, w.zxid, w.time_ms     # data None: the znode was deleted

The format (ZooKeeper 3.5-3.8, ``FileTxnLog``/``Util.marshallTxnEntry``):

- a file header: int magic ``ZKLG``, int version (2), long dbid;
- entries: long checksum (Adler-32), int length, that many bytes, the byte ``B``; a length of 0 (the
  preallocated zeros) ends the file;
- an entry: TxnHeader (long session id, int cxid, long zxid, long time in ms, int type), then the record
  for the type, then, since 3.6, a digest this reader skips.

A multi is applied whole or not at all: a failed one holds only error records.  Ephemeral znodes
go with their session: a ``closeSession`` (a close, or the server expiring it) deletes them.

Pure: bytes in, values out (reading the files is :func:`read_log_dir`'s only I/O).
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

MAGIC = 0x5A4B4C47  # "ZKLG"

# ZooDefs.OpCode: the transaction types a log holds
CREATE, DELETE, SET_DATA, SET_ACL, CHECK, MULTI, CREATE2, RECONFIG = 1, 2, 5, 7, 13, 14, 15, 16
CREATE_CONTAINER, DELETE_CONTAINER, CREATE_TTL = 19, 20, 21
CREATE_SESSION, CLOSE_SESSION, ERROR = -10, -11, -1
CREATES = (CREATE, CREATE2, CREATE_CONTAINER, CREATE_TTL)


class TxnLogError(ValueError):
    """A transaction log that is not one, or is cut in the middle of an entry's header."""


@dataclass(frozen=True)
class Op:
    """One change of one znode: ``create`` (with its data and whether it is ephemeral), ``set`` or ``delete``."""
    kind: str
    path: str
    data: bytes | None = None
    ephemeral: bool = False


@dataclass(frozen=True)
class Txn:
    zxid: int
    time_ms: int
    session: int
    type: int
    ops: tuple[Op, ...]                   # what it changed ((): a session's start, a failed multi, a check)
    closed_paths: tuple[str, ...] = ()    # a closeSession's ephemerals, when the server lists them


@dataclass(frozen=True)
class Write:
    """A znode's new value after one transaction (``data`` None: deleted)."""
    zxid: int
    time_ms: int
    path: str
    data: bytes | None
    created: bool = False


class _Reader:
    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None) -> None:
        self.buf, self.pos, self.end = buf, pos, len(buf) if end is None else end

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise TxnLogError(f"a record runs past its entry (needs {n} bytes at {self.pos})")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def int(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def long(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def bool(self) -> bool:
        return self.take(1) != b"\x00"

    def buffer(self) -> bytes | None:
        n = self.int()
        return None if n < 0 else self.take(n)

    def string(self) -> str:
        b = self.buffer()
        return "" if b is None else b.decode("utf-8", errors="replace")

    def acls(self) -> None:
        for _ in range(max(0, self.int())):
            self.int()
            self.string()
            self.string()


def _record(kind: int, r: _Reader) -> list[Op]:
    """The ops of one record of type ``kind`` (a multi's parts come through here one by one)."""
    if kind in CREATES:
        path, data = r.string(), r.buffer()
        r.acls()
        ephemeral = r.bool() if kind in (CREATE, CREATE2) else False
        return [Op("create", path, data or b"", ephemeral)]
    if kind in (DELETE, DELETE_CONTAINER):
        return [Op("delete", r.string())]
    if kind in (SET_DATA, RECONFIG):
        path, data = r.string(), r.buffer()
        return [Op("set", path, data or b"")]
    return []   # SET_ACL, CHECK, ERROR, sessions: no data changes


def parse_entry(entry: bytes) -> Txn:
    """One log entry's bytes (header and record) -> a Txn."""
    r = _Reader(entry)
    session = r.long()
    r.int()   # cxid
    zxid, time_ms, kind = r.long(), r.long(), r.int()
    if kind == MULTI:
        parts = []
        failed = False
        for _ in range(max(0, r.int())):
            sub_kind, data = r.int(), r.buffer() or b""
            failed |= sub_kind == ERROR
            parts.append((sub_kind, data))
        ops: list[Op] = [] if failed else [op for k, d in parts for op in _record(k, _Reader(d))]
        return Txn(zxid, time_ms, session, kind, tuple(ops))
    if kind == CLOSE_SESSION and r.pos < r.end:
        try:   # 3.6+: CloseSessionTxn lists the ephemerals it deletes (a digest may follow instead)
            n = r.int()
            paths = tuple(p for p in (r.string() for _ in range(n)) if p.startswith("/")) if 0 <= n < 1_000_000 else ()
        except TxnLogError:
            paths = ()
        return Txn(zxid, time_ms, session, kind, (), paths)
    return Txn(zxid, time_ms, session, kind, tuple(_record(kind, r)))


def parse_log(data: bytes) -> Iterator[Txn]:
    """Every transaction of one ``log.<zxid>`` file's bytes, in order; stops at the preallocated zeros
    or at an entry cut short (a server still writing), and skips none in between."""
    if len(data) < 16:
        return
    magic, _version = struct.unpack(">ii", data[:8])
    if magic != MAGIC:
        raise TxnLogError(f"not a ZooKeeper transaction log (magic {magic:#x})")
    pos = 16
    while pos + 12 <= len(data):
        crc, length = struct.unpack(">qi", data[pos:pos + 12])
        if length <= 0 or pos + 12 + length + 1 > len(data):
            return
        entry = data[pos + 12:pos + 12 + length]
        if crc != zlib.adler32(entry) or data[pos + 12 + length] != 0x42:
            return   # a torn tail: the rest was never committed
        yield parse_entry(entry)
        pos += 12 + length + 1


def read_log_dir(version_dir: Path | str) -> list[Txn]:
    """Every transaction in a server's ``version-2`` directory, across its log files, in zxid order."""
    files = sorted(Path(version_dir).glob("log.*"), key=lambda p: int(p.name.split(".", 1)[1], 16))
    seen: set[int] = set()
    out = []
    for f in files:
        for t in parse_log(f.read_bytes()):
            if t.zxid not in seen:
                seen.add(t.zxid)
                out.append(t)
    out.sort(key=lambda t: t.zxid)
    return out


def writes(txns: Iterable[Txn], chroot: str = "") -> list[Write]:
    """The value every znode under ``chroot`` took, write by write, with paths relative to it (the chroot
    itself is ``/``).  Ephemerals are deleted when their session closes or expires."""
    chroot = chroot.rstrip("/")
    owned: dict[int, set[str]] = {}
    out: list[Write] = []

    def rel(path: str) -> str | None:
        if not chroot:
            return path
        if path == chroot:
            return "/"
        return path[len(chroot):] if path.startswith(chroot + "/") else None

    def emit(t: Txn, path: str, data: bytes | None, created: bool = False) -> None:
        p = rel(path)
        if p is not None:
            out.append(Write(t.zxid, t.time_ms, p, data, created))

    for t in txns:
        if t.type == CLOSE_SESSION:
            gone = set(t.closed_paths) | owned.pop(t.session, set())
            for path in sorted(gone):
                emit(t, path, None)
            continue
        for op in t.ops:
            if op.kind == "create":
                if op.ephemeral:
                    owned.setdefault(t.session, set()).add(op.path)
                emit(t, op.path, op.data, created=True)
            elif op.kind == "set":
                emit(t, op.path, op.data)
            else:
                for paths in owned.values():
                    paths.discard(op.path)
                emit(t, op.path, None)
    return out
