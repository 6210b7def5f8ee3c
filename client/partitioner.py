"""Kafka's producer partitioners: murmur2 key hashing, the sticky default, round robin.

Keys are hashed with :func:`kafkacommon.hashing.murmur2` (Kafka's ``Utils.murmur2``
bit for bit), so a key lands on the same partition as with a Java producer:
``to_positive(murmur2(key)) % num_partitions``.

:class:`DefaultPartitioner` is Kafka 2.4–3.2's ``DefaultPartitioner``:

1. an explicit partition wins (``KafkaProducer`` checks it is in range);
2. a key (``bytes``, possibly empty) picks ``to_positive(murmur2(key)) % n``
   over *all* partitions, available or not;
3. no key: the sticky partitioner of KIP-480 (``StickyPartitionCache``).  It
   sticks to one partition per topic until :meth:`~DefaultPartitioner.on_new_batch`
   is called with that partition, then picks another one: at random among the
   available partitions other than the previous one; the only available one if
   there is just one; at random among all partitions if none is available.

:class:`RoundRobinPartitioner` is Kafka's ``RoundRobinPartitioner``: a
per-topic counter from 0, taken modulo the available partitions (or all
partitions when none is available); keys are ignored.

Randomness is injected: ``rng(n)`` must return an int in ``[0, n)``.
"""
from __future__ import annotations

import random
from typing import Callable, Sequence

from kafkacommon.hashing import murmur2, to_positive


def _int32(n: int) -> int:
    """``n`` wrapped to a signed 32-bit int, as Java's int arithmetic does."""
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n & 0x80000000 else n


def _default_rng(n: int) -> int:
    return random.randrange(n)


def _check(num_partitions: int, explicit: int | None) -> None:
    if num_partitions < 1:
        raise ValueError(f"a topic needs at least one partition, got {num_partitions}")
    if explicit is not None and not 0 <= explicit < num_partitions:
        raise ValueError(f"Invalid partition given with record: {explicit} is not in the range "
                         f"[0...{num_partitions}).")


def _available(num_partitions: int, available_partitions: Sequence[int] | None) -> list[int]:
    """Partitions with a leader; ``None`` means all of them."""
    if available_partitions is None:
        return list(range(num_partitions))
    return [p for p in available_partitions if 0 <= p < num_partitions]


class DefaultPartitioner:
    """Explicit partition, else murmur2 of the key, else the KIP-480 sticky partition."""

    def __init__(self, rng: Callable[[int], int] | None = None) -> None:
        self._rng = rng or _default_rng
        self._sticky: dict[str, int] = {}
        self._stale: dict[str, int] = {}  # topic -> partition whose batch filled, awaiting a successor

    def partition(self, topic: str, key: bytes | None, num_partitions: int,
                  available_partitions: Sequence[int] | None = None, explicit: int | None = None) -> int:
        _check(num_partitions, explicit)
        if explicit is not None:
            return explicit
        if key is not None:
            return to_positive(murmur2(key)) % num_partitions
        return self.sticky_partition(topic, num_partitions, available_partitions)

    def sticky_partition(self, topic: str, num_partitions: int,
                         available_partitions: Sequence[int] | None = None) -> int:
        """The topic's current sticky partition, choosing one when there is none yet."""
        current = self._sticky.get(topic)
        if current is None or topic in self._stale or current >= num_partitions:
            current = self._choose(topic, num_partitions, available_partitions)
        return current

    def on_new_batch(self, topic: str, prev_partition: int, num_partitions: int | None = None,
                     available_partitions: Sequence[int] | None = None) -> int | None:
        """A batch for ``prev_partition`` was completed: move the sticky partition on.

        As in Kafka, nothing changes unless ``prev_partition`` is the topic's
        current sticky partition (another thread may have moved it already).
        With ``num_partitions`` the next partition is chosen now and returned;
        without, it is chosen by the next keyless :meth:`partition` call.
        """
        current = self._sticky.get(topic)
        if current is not None and current != prev_partition:
            return current
        self._stale[topic] = prev_partition
        if num_partitions is None:
            return None
        _check(num_partitions, None)
        return self._choose(topic, num_partitions, available_partitions)

    def _choose(self, topic: str, num_partitions: int, available_partitions: Sequence[int] | None) -> int:
        old = self._sticky.get(topic)
        self._stale.pop(topic, None)
        available = _available(num_partitions, available_partitions)
        if not available:
            new = self._rng(num_partitions)
        elif len(available) == 1:
            new = available[0]
        else:
            # Kafka redraws until it differs from the old partition; drawing among the others is the same law
            others = [p for p in available if p != old]
            new = others[self._rng(len(others))]
        self._sticky[topic] = new
        return new


class RoundRobinPartitioner:
    """Kafka's RoundRobinPartitioner: every record to the next partition, keys ignored.

    Kafka 2.4–3.2 also advanced the counter when ``onNewBatch`` made the
    producer call ``partition`` twice (KAFKA-9965), skipping partitions; here
    :meth:`on_new_batch` does nothing and no partition is skipped.
    """

    def __init__(self) -> None:
        self._counters: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, num_partitions: int,
                  available_partitions: Sequence[int] | None = None, explicit: int | None = None) -> int:
        _check(num_partitions, explicit)
        if explicit is not None:
            return explicit
        value = self._counters.get(topic, 0)
        self._counters[topic] = _int32(value + 1)  # Java's AtomicInteger wraps
        available = _available(num_partitions, available_partitions)
        if available:
            return available[to_positive(value) % len(available)]
        return to_positive(value) % num_partitions

    def on_new_batch(self, topic: str, prev_partition: int, num_partitions: int | None = None,
                     available_partitions: Sequence[int] | None = None) -> None:
        return None
