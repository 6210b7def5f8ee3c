"""The iteration order of Java's HashMap and HashSet, where Kafka's assignors depend on it.

Kafka 2.8.2's sticky assignors walk ``HashMap``s of member ids and take the
first element of a ``HashSet`` of partitions; the outcome can depend on that
order.  A ``java.util.HashMap`` built with the default constructor iterates
its table bucket by bucket (bucket = ``(h ^ (h >>> 16)) & (capacity - 1)``),
and inside a bucket in insertion order (a resize splits buckets keeping that
order).  The table starts at 16 buckets and doubles when the size passes
0.75 of the capacity, or when a bucket reaches 9 entries while the table has
fewer than 64 buckets.  A bucket of 9+ entries in a larger table becomes a
tree whose order we do not model; it needs 9 colliding keys and does not
happen with the member counts and partition counts seen here.
"""
from __future__ import annotations

from typing import Callable, Hashable, Iterable, TypeVar

from kafkacommon.hashing import java_string_hash

K = TypeVar("K", bound=Hashable)
_MASK = 0xFFFFFFFF


def _spread(h: int) -> int:
    h &= _MASK
    return h ^ (h >> 16)


def topic_partition_hash(tp: tuple[str, int]) -> int:
    """TopicPartition.hashCode: 31 * (31 + partition) + topic.hashCode(), as an int32."""
    topic, partition = tp
    return (31 * (31 + partition) + java_string_hash(topic)) & _MASK


class JavaHashSet:
    """The elements and their iteration order as in a java.util.HashSet with the same adds and removes."""

    def __init__(self, hash_of: Callable[[K], int]) -> None:
        self._hash_of = hash_of
        self._seq: dict = {}  # element -> (spread hash, insertion counter); a re-add goes to its bucket's tail
        self._counter = 0
        self.capacity = 16
        self._sizes: dict[int, int] = {}  # bucket -> entries, at the current capacity

    def _resize(self) -> None:
        self.capacity *= 2
        self._sizes = {}
        for h, _ in self._seq.values():
            b = h & (self.capacity - 1)
            self._sizes[b] = self._sizes.get(b, 0) + 1

    def add(self, x) -> None:
        if x in self._seq:
            return
        h = _spread(self._hash_of(x))
        b = h & (self.capacity - 1)
        in_bucket = self._sizes.get(b, 0)
        self._seq[x] = (h, self._counter)
        self._sizes[b] = in_bucket + 1
        self._counter += 1
        if in_bucket >= 8 and self.capacity < 64:  # treeifyBin on a small table resizes instead
            self._resize()
        if len(self._seq) > self.capacity * 3 // 4:
            self._resize()

    def discard(self, x) -> None:
        if x in self._seq:
            h, _ = self._seq.pop(x)
            self._sizes[h & (self.capacity - 1)] -= 1

    def __contains__(self, x) -> bool:
        return x in self._seq

    def __len__(self) -> int:
        return len(self._seq)

    def _key(self, x) -> tuple[int, int]:
        h, seq = self._seq[x]
        return h & (self.capacity - 1), seq

    def __iter__(self):
        return iter(sorted(self._seq, key=self._key))

    def first(self):
        """``iterator().next()``."""
        return min(self._seq, key=self._key)


def hash_map_order(keys: Iterable[K], hash_of: Callable[[K], int] = java_string_hash) -> list[K]:
    """The iteration order of a java.util.HashMap after putting these distinct keys in this order."""
    s = JavaHashSet(hash_of)
    for k in keys:
        s.add(k)
    return list(s)
