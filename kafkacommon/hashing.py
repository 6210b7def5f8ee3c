"""Kafka's two hashes, bit for bit, and what each one places.

* :func:`java_string_hash` with :func:`java_abs` (``Utils.abs``): which
  ``__consumer_offsets`` partition coordinates a group, GroupMetadataManager's
  ``partitionFor``: ``Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount``
  (:func:`partition_for`).  ``hashCode`` is Java's ``String.hashCode`` over
  UTF-16 code units with int32 wraparound; ``Utils.abs(Integer.MIN_VALUE)`` is
  0, not MIN_VALUE.
* :func:`murmur2` with :func:`to_positive` (``Utils.toPositive``): the
  producer's key partitioning, ``toPositive(murmur2(key)) % numPartitions``.
  ``Utils.murmur2`` is MurmurHash2 with seed ``0x9747b28c`` and a signed 32-bit
  result, so a key lands on the same partition as with a Java producer.

Pure: no I/O.
"""
from __future__ import annotations

_MASK32 = 0xFFFFFFFF
_MIN_INT = -(2 ** 31)
MURMUR2_SEED = 0x9747B28C
_M = 0x5BD1E995


def _int32(h: int) -> int:
    h &= _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: sum of s[i]*31^(n-1-i) over UTF-16 code units, as an int32."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (h * 31 + ((data[i] << 8) | data[i + 1])) & _MASK32
    return _int32(h)


def java_abs(n: int) -> int:
    """Kafka's Utils.abs: ``0 if n == Integer.MIN_VALUE else Math.abs(n)``."""
    return 0 if n == _MIN_INT else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The __consumer_offsets partition whose leader coordinates ``group_id``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return java_abs(java_string_hash(group_id)) % num_partitions


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2``: a signed 32-bit MurmurHash2 of ``data``."""
    data = bytes(data)
    length = len(data)
    h = (MURMUR2_SEED ^ length) & _MASK32
    tail = length & ~3
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return _int32(h)


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``)."""
    return n & 0x7FFFFFFF
