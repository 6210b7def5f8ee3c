"""Which __consumer_offsets partition owns a group: Kafka's ``partitionFor``.

``Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount`` [GMM], where
``hashCode`` is Java's ``String.hashCode`` (over UTF-16 code units, int32
wraparound) and ``Utils.abs(Integer.MIN_VALUE)`` is 0, not MIN_VALUE.
"""
from __future__ import annotations

_MASK = 0xFFFFFFFF
_MIN_INT = -(2 ** 31)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: sum of s[i]*31^(n-1-i) over UTF-16 code units, as an int32."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (h * 31 + ((data[i] << 8) | data[i + 1])) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def java_abs(n: int) -> int:
    """Kafka's Utils.abs: ``0 if n == Integer.MIN_VALUE else Math.abs(n)``."""
    return 0 if n == _MIN_INT else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The __consumer_offsets partition whose leader coordinates ``group_id``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return java_abs(java_string_hash(group_id)) % num_partitions
