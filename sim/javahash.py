"""The iteration order of a Java ``HashSet<String>``, which ZooKeeper's answers expose.

ZooKeeper (3.8) keeps a znode's children in a ``HashSet<String>`` and hands them
out in its iteration order (``getChildren``), and deletes an expired or closed
session's ephemerals in the iteration order of a clone of that session's
``HashSet<String>`` of paths.  So the order of ``get_children`` and of the watch
events an expiry fires is Java's ``HashMap`` bucket order, which is deterministic:

* a string's hash is ``String.hashCode`` (31-polynomial over UTF-16 code units,
  32-bit), spread as ``h ^ (h >>> 16)``; its bucket is ``spread & (capacity - 1)``;
* iteration walks the buckets in index order and each bucket's list in insertion
  order (a resize splits a bucket keeping the relative order, so this stays true);
* the table doubles when the size passes ``capacity * 0.75``, and also when an
  insert finds 8 entries already in its bucket while the table is below 64
  (``treeifyBin``); it never shrinks.

Not modelled: a bucket turned into a tree (8+ colliding strings in a table of 64+),
whose order differs; ZooKeeper's znode names do not collide like that in practice.
"""
from __future__ import annotations

from typing import Iterable, Iterator

from kafkacommon.hashing import java_string_hash

_MASK = 0xFFFFFFFF


def spread(h: int) -> int:
    """``HashMap.hash``: the high half folded into the low one."""
    return (h ^ (h >> 16)) & _MASK


def table_size_for(c: int) -> int:
    """``HashMap.tableSizeFor``: the smallest power of two >= ``c`` (at least 1)."""
    n = 1
    while n < c:
        n <<= 1
    return n


class JavaHashSet:
    """A set of strings that iterates as ``java.util.HashSet<String>`` would."""

    __slots__ = ("_capacity", "_seq", "_entries", "_hashes")

    def __init__(self, initial_capacity: int = 16, items: Iterable[str] = ()) -> None:
        self._capacity = table_size_for(initial_capacity)
        self._seq = 0
        self._entries: dict[str, int] = {}     # item -> insertion sequence number
        self._hashes: dict[str, int] = {}
        for item in items:
            self.add(item)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, item: object) -> bool:
        return item in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.ordered())

    def _bucket(self, item: str, capacity: int | None = None) -> int:
        return self._hashes[item] & ((capacity or self._capacity) - 1)

    def add(self, item: str) -> bool:
        if item in self._entries:
            return False
        self._hashes[item] = spread(java_string_hash(item) & _MASK)
        bucket = self._bucket(item)
        if self._capacity < 64 and sum(1 for e in self._entries if self._bucket(e) == bucket) >= 8:
            self._capacity <<= 1                # treeifyBin on a small table resizes instead
        self._seq += 1
        self._entries[item] = self._seq
        if len(self._entries) > int(self._capacity * 0.75):
            self._capacity <<= 1
        return True

    def discard(self, item: str) -> bool:
        if self._entries.pop(item, None) is None:
            return False
        del self._hashes[item]
        return True

    def ordered(self) -> list[str]:
        """The items in Java's iteration order."""
        return sorted(self._entries, key=lambda e: (self._bucket(e), self._entries[e]))

    def copy(self) -> "JavaHashSet":
        """An exact copy: same table, same insertion order (not Java's clone, see ``clone``)."""
        out = JavaHashSet.__new__(JavaHashSet)
        out._capacity, out._seq = self._capacity, self._seq
        out._entries, out._hashes = dict(self._entries), dict(self._hashes)
        return out

    def clone(self) -> "JavaHashSet":
        """``HashSet.clone()``: a table sized for the current size, filled in this set's order."""
        out = JavaHashSet(table_size_for(int(len(self._entries) / 0.75 + 1.0)))
        for item in self.ordered():
            out.add(item)
        return out
