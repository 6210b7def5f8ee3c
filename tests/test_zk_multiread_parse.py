"""zk/batch.py's lean multiRead parse against kazoo's own types: the same data and versions, the same errors."""
from __future__ import annotations

import struct

import pytest

from zk.batch import GET_DATA, _MultiRead, _MultiReadData

HEADER = struct.Struct("!iBi")
INT = struct.Struct("!i")
STAT = struct.Struct("!qqqqiiiqiiq")   # ZooKeeper's Stat (czxid, mzxid, ctime, mtime, version, ...)


def data_result(data: bytes | None, version: int) -> bytes:
    stat = STAT.pack(11, 12, 13, 14, version, 0, 0, 0, len(data or b""), 0, 15)
    return HEADER.pack(GET_DATA, 0, -1) + INT.pack(-1 if data is None else len(data)) + (data or b"") + stat


def error_result(code: int) -> bytes:
    return HEADER.pack(-1, 0, -1) + INT.pack(code)


DONE = HEADER.pack(-1, 1, -1)


def test_data_none_empty_and_errors_as_kazoos_generic_parse_has_them():
    body = (data_result(b'{"leader":1}', 7) + error_result(-101) + data_result(None, 0) + data_result(b"", 3)
            + error_result(-102) + data_result(b"x" * 300, 2**31 - 1) + DONE)
    buf = b"\xff" * 5 + body          # the reply header before the results
    lean = _MultiReadData.deserialize(buf, 5)
    generic = _MultiRead.deserialize(buf, 5)
    assert [type(r).__name__ for r in lean] == ["tuple", "NoNodeError", "tuple", "tuple", "NoAuthError", "tuple"]
    assert [r if isinstance(r, tuple) else type(r) for r in lean] == \
        [(g[0], g[1].version) if isinstance(g, tuple) else type(g) for g in generic]
    assert lean[2] == (None, 0) and lean[3] == (b"", 3) and lean[5] == (b"x" * 300, 2**31 - 1)


def test_no_results_and_a_bytearray_buffer():
    assert _MultiReadData.deserialize(DONE, 0) == []
    assert _MultiReadData.deserialize(bytearray(data_result(b"ab", 1) + DONE), 0) == [(b"ab", 1)]


@pytest.mark.parametrize("cut", [1, 9, 40])
def test_an_answer_cut_short_is_an_error(cut):
    whole = data_result(b"abc", 1) + data_result(b"defg", 2) + DONE
    with pytest.raises((ValueError, struct.error)):
        _MultiReadData.deserialize(whole[:-cut], 0)
