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

Pure: no I/O.
"""
from __future__ import annotations

from kafka import codec as _codec

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4

_DECODE = {GZIP: _codec.gzip_decode, SNAPPY: _codec.snappy_decode, LZ4: _codec.lz4_decode,
           ZSTD: _codec.zstd_decode}
_ENCODE = {GZIP: _codec.gzip_encode, SNAPPY: _codec.snappy_encode, LZ4: _codec.lz4_encode,
           ZSTD: _codec.zstd_encode}


class CompressionError(ValueError):
    """The codec is unknown, or the data does not decompress."""


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """The records section of a batch compressed with ``codec``, decompressed."""
    fn = _DECODE.get(codec)
    if fn is None:
        raise CompressionError(f"unknown compression codec {codec}")
    try:
        return bytes(fn(bytes(data)))
    except Exception as e:  # each codec library raises its own errors on bad input
        raise CompressionError(f"does not decompress: {e!r}") from None


def compress(codec: int, data: bytes) -> bytes:
    """``data`` (encoded records) compressed with ``codec`` as Kafka writes it."""
    fn = _ENCODE.get(codec)
    if fn is None:
        raise CompressionError(f"unknown compression codec {codec}")
    return bytes(fn(data))
