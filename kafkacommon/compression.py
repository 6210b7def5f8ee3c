"""The record batch's compression codecs (Kafka's CompressionType ids 1-4), on kafka-python's codec
module (``kafka.codec``, over the pinned ``python-snappy``, ``lz4`` and ``zstandard`` packages).

What a v2 batch compresses is its records section (everything after the 61-byte header); the
header stays uncompressed.  The formats are Kafka's:

- gzip: a gzip stream;
- snappy: Java clients write xerial's framed stream (``SnappyOutputStream``), librdkafka writes raw
  snappy; :func:`decompress` reads both (the xerial magic tells them apart), :func:`compress`
  writes xerial's framing, as Kafka's broker does;
- lz4: an LZ4 frame with independent blocks (Kafka reads no linked blocks);
- zstd: a zstd frame (frames without a content size included).

:func:`decompress` takes a ``limit``: a batch whose records would decompress to more bytes
than that (a zip bomb) raises :class:`DecompressedTooLarge` once the limit is passed, having
produced no more than ``limit + 1`` bytes (each codec is read as a stream, snappy's blocks by
their stated lengths).

Pure: no I/O.
"""
from __future__ import annotations

import struct
import zlib

import lz4.frame
import snappy
import zstandard
from kafka import codec as _codec

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4

_DECODE = {GZIP: _codec.gzip_decode, SNAPPY: _codec.snappy_decode, LZ4: _codec.lz4_decode,
           ZSTD: _codec.zstd_decode}
_ENCODE = {GZIP: _codec.gzip_encode, SNAPPY: _codec.snappy_encode, LZ4: _codec.lz4_encode,
           ZSTD: _codec.zstd_encode}


class CompressionError(ValueError):
    """The codec is unknown, or the data does not decompress."""


class DecompressedTooLarge(CompressionError):
    """The data decompresses to more than the limit allows."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"decompresses to more than {limit} bytes")
        self.limit = limit


def decompress(codec: int, data: bytes | memoryview, limit: int | None = None) -> bytes:
    """The records section of a batch compressed with ``codec``, decompressed; with ``limit``, at
    most that many bytes (else :class:`DecompressedTooLarge`)."""
    fn = _DECODE.get(codec)
    if fn is None:
        raise CompressionError(f"unknown compression codec {codec}")
    try:
        if limit is None:
            return bytes(fn(bytes(data)))
        return _BOUNDED[codec](bytes(data), limit)
    except DecompressedTooLarge:
        raise
    except Exception as e:  # each codec library raises its own errors on bad input
        raise CompressionError(f"does not decompress: {e!r}") from None


def _gzip(data: bytes, limit: int) -> bytes:
    out, d = [], zlib.decompressobj(16 + zlib.MAX_WBITS)
    size = 0
    while data:
        chunk = d.decompress(data, limit + 1 - size)
        size += len(chunk)
        out.append(chunk)
        if size > limit:
            raise DecompressedTooLarge(limit)
        if d.unconsumed_tail:
            data = d.unconsumed_tail
        elif d.eof and d.unused_data:   # another gzip member follows
            data, d = d.unused_data, zlib.decompressobj(16 + zlib.MAX_WBITS)
        else:
            break
    if not d.eof:
        raise CompressionError("truncated gzip stream")
    return b"".join(out)


def _raw_snappy_length(block: bytes) -> int:
    """The uncompressed length a raw snappy block states in its preamble (a varint)."""
    n = shift = 0
    for i in range(min(len(block), 5)):
        b = block[i]
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n
        shift += 7
    raise CompressionError("bad snappy preamble")


def _snappy(data: bytes, limit: int) -> bytes:
    if not (len(data) > 16 and data[:8] == b"\x82SNAPPY\x00"):
        blocks = [data]
    else:   # xerial's framing: 16 bytes of header, then (int32 length, raw block)*
        blocks, pos = [], 16
        while pos < len(data):
            (n,) = struct.unpack_from(">i", data, pos)
            if n < 0 or pos + 4 + n > len(data):
                raise CompressionError("truncated xerial snappy block")
            blocks.append(data[pos + 4:pos + 4 + n])
            pos += 4 + n
    if sum(_raw_snappy_length(b) for b in blocks) > limit:
        raise DecompressedTooLarge(limit)
    return b"".join(snappy.decompress(b) for b in blocks)


def _lz4(data: bytes, limit: int) -> bytes:
    d = lz4.frame.LZ4FrameDecompressor()
    out = d.decompress(data, max_length=limit + 1)
    if len(out) > limit:
        raise DecompressedTooLarge(limit)
    if not d.eof:
        raise CompressionError("truncated lz4 frame")
    return out


def _zstd(data: bytes, limit: int) -> bytes:
    out, size = [], 0
    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as r:
        while chunk := r.read(min(limit + 1 - size, 1 << 20) or 1):
            size += len(chunk)
            out.append(chunk)
            if size > limit:
                raise DecompressedTooLarge(limit)
    return b"".join(out)


_BOUNDED = {GZIP: _gzip, SNAPPY: _snappy, LZ4: _lz4, ZSTD: _zstd}


def compress(codec: int, data: bytes) -> bytes:
    """``data`` (encoded records) compressed with ``codec`` as Kafka writes it."""
    fn = _ENCODE.get(codec)
    if fn is None:
        raise CompressionError(f"unknown compression codec {codec}")
    return bytes(fn(data))
