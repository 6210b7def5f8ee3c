"""Kafka's varints (ByteUtils): zigzag-encoded base-128, least significant group first.

A ``varint`` holds a signed 32-bit integer (1 to 5 bytes), a ``varlong`` a
signed 64-bit one (1 to 10 bytes).  Record batch v2 uses them for every
per-record length, delta and count.

Pure: no I/O.
"""
from __future__ import annotations


def zigzag_encode(value: int, bits: int = 64) -> int:
    """Map a signed integer to unsigned: 0→0, -1→1, 1→2, -2→3, ..."""
    return ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)


def zigzag_decode(value: int) -> int:
    """Inverse of :func:`zigzag_encode`."""
    return (value >> 1) ^ -(value & 1)


def put_unsigned(out: bytearray, u: int) -> None:
    """Append the unsigned base-128 varint of ``u`` (>= 0) to ``out``."""
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def _encode_signed(value: int, bits: int) -> bytes:
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise ValueError(f"{value} does not fit int{bits}")
    out = bytearray()
    put_unsigned(out, zigzag_encode(value, bits))
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag varint of a signed 32-bit integer (1 to 5 bytes)."""
    return _encode_signed(value, 32)


def encode_varlong(value: int) -> bytes:
    """Zigzag varint of a signed 64-bit integer (1 to 10 bytes)."""
    return _encode_signed(value, 64)


def _read_unsigned(buf: bytes | memoryview, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    result = shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise ValueError("varint runs past the end of its record")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise ValueError(f"varint longer than {max_bytes} bytes")


def decode_varint(buf: bytes | memoryview, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """Read a zigzag varint (int32) at ``pos``; return (value, next position)."""
    u, pos = _read_unsigned(buf, pos, len(buf) if end is None else end, 5)
    if u >> 32:
        raise ValueError("varint exceeds 32 bits")
    return zigzag_decode(u), pos


def decode_varlong(buf: bytes | memoryview, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """Read a zigzag varlong (int64) at ``pos``; return (value, next position)."""
    u, pos = _read_unsigned(buf, pos, len(buf) if end is None else end, 10)
    if u >> 64:
        raise ValueError("varlong exceeds 64 bits")
    return zigzag_decode(u), pos
