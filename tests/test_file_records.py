"""A consumer Fetch's records from the segment file to the socket (node/storage/file_records,
listener.server.write_pieces): sendfile on a real loopback socket, the bytes as they are in the file,
after the response's head and before its tail; a file cut short under the send fails it."""
from __future__ import annotations

import asyncio
import os

import pytest

from listener.server import write_pieces
from node.storage.file_records import FileRecords


def send(pieces: list) -> bytes:
    """The pieces written by write_pieces to a loopback TCP connection, as the peer reads them."""
    async def run() -> bytes:
        got = asyncio.get_running_loop().create_future()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await write_pieces(writer, pieces)
                await writer.drain()
            except Exception as e:  # handed to the test
                got.set_exception(e)
            writer.close()
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        data = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        server.close()
        if got.done():
            got.result()
        return data
    return asyncio.run(run())


def test_records_go_from_the_file_between_the_head_and_the_tail(tmp_path) -> None:
    body = os.urandom(300_000)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(body)
    fd = os.open(path, os.O_RDONLY)
    try:
        recs = FileRecords.of(fd, 1000, 200_000)
        recs.extend(FileRecords.of(fd, 250_000, 50_000))
    finally:
        os.close(fd)   # the segment closes: the records keep their own descriptors
    assert len(recs) == 250_000 and bytes(recs) == body[1000:201_000] + body[250_000:]
    assert send([b"head", recs, b"tail"]) == b"head" + body[1000:201_000] + body[250_000:] + b"tail"
    assert all(s.file.closed for s in recs.slices)


def test_a_file_cut_short_under_the_send_fails_it(tmp_path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"x" * 100_000)
    fd = os.open(path, os.O_RDWR)
    recs = FileRecords.of(fd, 0, 100_000)
    os.ftruncate(fd, 60_000)
    os.close(fd)
    with pytest.raises(ConnectionError, match="truncated"):
        send([b"head", recs])
