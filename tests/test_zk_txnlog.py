"""ZooKeeper's transaction log read back (zk/txnlog.py): entries written here in ZooKeeper's own Jute layout,
and a real server's log (the cluster test at the end)."""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from zk import txnlog
from zk.txnlog import Op, TxnLogError, parse_log, read_log_dir, writes

SESSION = 0x1000_0000_0000_0001


def s(text: str) -> bytes:
    b = text.encode()
    return struct.pack(">i", len(b)) + b


def buf(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


ACL = struct.pack(">i", 1) + struct.pack(">i", 31) + s("world") + s("anyone")


def create(path: str, data: bytes, ephemeral: bool = False) -> bytes:
    return s(path) + buf(data) + ACL + (b"\x01" if ephemeral else b"\x00") + struct.pack(">i", 1)


def set_data(path: str, data: bytes, version: int) -> bytes:
    return s(path) + buf(data) + struct.pack(">i", version)


def entry(zxid: int, kind: int, record: bytes, session: int = SESSION, digest: bool = True) -> bytes:
    body = struct.pack(">qiqqi", session, 7, zxid, 1_700_000_000_000 + zxid, kind) + record
    if digest:   # 3.6+: TxnDigest (int version, long tree digest) after the record
        body += struct.pack(">iq", 2, 12345)
    return struct.pack(">qi", zlib.adler32(body), len(body)) + body + b"B"


def log_file(*entries: bytes, padding: int = 64) -> bytes:
    return struct.pack(">iiq", txnlog.MAGIC, 2, 0) + b"".join(entries) + b"\x00" * padding


def multi(*parts: tuple[int, bytes]) -> bytes:
    return struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", k) + buf(r) for k, r in parts)


def test_creates_sets_deletes_and_a_multi_in_order() -> None:
    data = log_file(
        entry(1, txnlog.CREATE_SESSION, struct.pack(">i", 6000)),
        entry(2, txnlog.CREATE, create("/cmp", b"")),
        entry(3, txnlog.CREATE2, create("/cmp/controller", b'{"brokerid":1}', ephemeral=True)),
        entry(4, txnlog.MULTI, multi((txnlog.CHECK, s("/cmp/controller_epoch") + struct.pack(">i", 0)),
                                     (txnlog.SET_DATA, set_data("/cmp/controller_epoch", b"2", 0)))),
        entry(5, txnlog.DELETE, s("/cmp/x")),
    )
    txns = list(parse_log(data))
    assert [t.zxid for t in txns] == [1, 2, 3, 4, 5]
    assert txns[2].ops == (Op("create", "/cmp/controller", b'{"brokerid":1}', True),)
    assert txns[3].ops == (Op("set", "/cmp/controller_epoch", b"2"),)
    assert txns[4].ops == (Op("delete", "/cmp/x"),)
    assert [(w.path, w.data) for w in writes(txns, chroot="/cmp")] == [
        ("/", b""), ("/controller", b'{"brokerid":1}'), ("/controller_epoch", b"2"), ("/x", None)]


def test_a_failed_multi_changes_nothing() -> None:
    err = struct.pack(">i", -101)
    txns = list(parse_log(log_file(entry(9, txnlog.MULTI, multi((txnlog.ERROR, err), (txnlog.ERROR, err))))))
    assert txns[0].ops == () and writes(txns) == []


def test_a_closed_session_takes_its_ephemerals() -> None:
    other = SESSION + 1
    close = struct.pack(">i", 1) + s("/b/ids/1")   # 3.6+: CloseSessionTxn lists the paths it deletes
    txns = list(parse_log(log_file(
        entry(1, txnlog.CREATE, create("/b/ids/1", b"one", ephemeral=True)),
        entry(2, txnlog.CREATE, create("/b/ids/2", b"two", ephemeral=True), session=other),
        entry(3, txnlog.CREATE, create("/b/persistent", b"p")),
        entry(4, txnlog.CLOSE_SESSION, close))))
    assert [(w.path, w.data) for w in writes(txns)][-1] == ("/b/ids/1", None)
    assert ("/b/ids/2", None) not in [(w.path, w.data) for w in writes(txns)]
    # an older server lists nothing: the session's own ephemerals still go
    txns = list(parse_log(log_file(entry(1, txnlog.CREATE, create("/e", b"", ephemeral=True)),
                                   entry(2, txnlog.CLOSE_SESSION, b"", digest=False))))
    assert [(w.path, w.data) for w in writes(txns)] == [("/e", b""), ("/e", None)]


def test_paths_outside_the_chroot_are_left_out_and_a_torn_tail_ends_the_log() -> None:
    good = entry(1, txnlog.CREATE, create("/other", b"x"))
    torn = entry(2, txnlog.CREATE, create("/cmp/y", b"y"))[:-10]
    txns = list(parse_log(log_file(good, entry(3, txnlog.CREATE, create("/cmp", b"")), torn, padding=0)))
    assert [t.zxid for t in txns] == [1, 3]
    assert [w.path for w in writes(txns, chroot="/cmp")] == ["/"]


def test_a_corrupt_checksum_ends_the_log_and_a_wrong_magic_is_an_error() -> None:
    bad = bytearray(entry(1, txnlog.CREATE, create("/a", b"")))
    bad[20] ^= 0xFF
    assert list(parse_log(log_file(bytes(bad)))) == []
    with pytest.raises(TxnLogError, match="not a ZooKeeper transaction log"):
        list(parse_log(b"NOPE" + b"\x00" * 40))


def test_log_files_are_read_in_zxid_order(tmp_path: Path) -> None:
    (tmp_path / "log.a").write_bytes(log_file(entry(10, txnlog.CREATE, create("/late", b""))))
    (tmp_path / "log.1").write_bytes(log_file(entry(1, txnlog.CREATE, create("/early", b""))))
    assert [t.zxid for t in read_log_dir(tmp_path)] == [1, 10]


@pytest.mark.cluster
def test_a_real_servers_log_has_every_write(tmp_path: Path) -> None:
    from kazoo.client import KazooClient

    from zk.server import EmbeddedZooKeeper

    with EmbeddedZooKeeper(tmp_path / "zk", tick_ms=100) as server:
        kz = KazooClient(server.connect_string)
        kz.start()
        try:
            kz.create("/cmp/a", b"1", makepath=True)
            kz.create("/cmp/e", b"eph", ephemeral=True)
            for v in (b"2", b"3"):   # two writes a few microseconds apart: a poll would see one at best
                kz.set("/cmp/a", v)
            t = kz.transaction()
            t.create("/cmp/b", b"B")
            t.set_data("/cmp/a", b"4")
            t.commit()
        finally:
            kz.stop()
            kz.close()
        got = [(w.path, w.data) for w in writes(read_log_dir(server.servers[0].data_dir / "version-2"), "/cmp")]
    assert got == [("/", b""), ("/a", b"1"), ("/e", b"eph"), ("/a", b"2"), ("/a", b"3"), ("/b", b"B"),
                   ("/a", b"4"), ("/e", None)]
