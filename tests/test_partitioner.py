"""client/partitioner.py and kafkacommon/hashing.py: Kafka's murmur2, the default (key hash / KIP-480 sticky) and round-robin partitioners."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, strategies as st

from client.partitioner import DefaultPartitioner, RoundRobinPartitioner
from kafkacommon.hashing import murmur2, to_positive

# Kafka's UtilsTest.testMurmur2 (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java)
KAFKA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    bytes([ord("a"), ord("b"), ord("c")]): 479470107,
}


class Scripted:
    """An rng that answers from a script and records what it was asked."""

    def __init__(self, *answers: int) -> None:
        self.answers = list(answers)
        self.asked: list[int] = []

    def __call__(self, n: int) -> int:
        self.asked.append(n)
        return self.answers.pop(0)


# ------------------------------------------------------------------ murmur2

@pytest.mark.parametrize("data, expected", KAFKA_MURMUR2.items())
def test_murmur2_matches_kafka(data, expected):
    assert murmur2(data) == expected


def test_murmur2_covers_every_tail_length_and_accepts_bytearray():
    values = [murmur2(b"abcdefg"[:n]) for n in range(8)]
    assert len(set(values)) == 8 and all(-(2**31) <= v < 2**31 for v in values)
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"foobar")) == -790332482


def test_to_positive_clears_the_sign_bit():
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5
    assert to_positive(-973932308) == -973932308 & 0x7FFFFFFF


# ------------------------------------------------------------------ keyed records

def test_key_picks_murmur2_mod_partitions():
    p = DefaultPartitioner(rng=Scripted())
    for key, h in KAFKA_MURMUR2.items():
        for n in (1, 3, 12, 50):
            assert p.partition("t", key, n) == to_positive(h) % n
    assert p.partition("t", b"foobar", 12) == (-790332482 & 0x7FFFFFFF) % 12 == 6


def test_keyed_partition_ignores_availability_and_randomness():
    a, b = DefaultPartitioner(rng=Scripted()), DefaultPartitioner(rng=random.Random(1).randrange)
    for i in range(50):
        key = f"user-{i}".encode()
        assert a.partition("t", key, 7, available_partitions=[]) == b.partition("t", key, 7) \
            == to_positive(murmur2(key)) % 7


def test_empty_key_is_a_key_not_a_missing_one():
    p = DefaultPartitioner(rng=Scripted())  # an rng call would fail: no scripted answers
    assert p.partition("t", b"", 10) == to_positive(murmur2(b"")) % 10


def test_explicit_partition_wins_and_is_checked():
    p = DefaultPartitioner(rng=Scripted())
    assert p.partition("t", b"foobar", 12, explicit=7) == 7
    assert p.partition("t", None, 12, explicit=0) == 0
    with pytest.raises(ValueError, match=r"Invalid partition given with record: 12 is not in the range \[0...12\)"):
        p.partition("t", None, 12, explicit=12)
    with pytest.raises(ValueError, match="at least one partition"):
        p.partition("t", b"k", 0)


@given(st.binary(max_size=64), st.integers(1, 1000))
def test_keyed_partition_is_in_range_and_stable(key, n):
    p = DefaultPartitioner()
    first = p.partition("t", key, n)
    assert 0 <= first < n and p.partition("t", key, n) == first


# ------------------------------------------------------------------ sticky (KIP-480)

def test_keyless_records_stick_until_a_new_batch():
    rng = Scripted(2, 0, 1)
    p = DefaultPartitioner(rng=rng)
    assert [p.partition("t", None, 4) for _ in range(5)] == [2] * 5
    assert rng.asked == [4]
    assert p.on_new_batch("t", 2, 4) == 0  # drawn among the others [0, 1, 3]
    assert rng.asked == [4, 3]
    assert [p.partition("t", None, 4) for _ in range(3)] == [0] * 3
    assert p.on_new_batch("t", 0, 4) == 2  # others [1, 2, 3], index 1
    assert p.partition("t", None, 4) == 2


def test_new_batch_for_a_partition_that_is_no_longer_sticky_changes_nothing():
    p = DefaultPartitioner(rng=Scripted(1))
    assert p.partition("t", None, 3) == 1
    assert p.on_new_batch("t", 0, 3) == 1
    assert p.partition("t", None, 3) == 1


def test_lazy_new_batch_chooses_on_the_next_record():
    rng = Scripted(0, 0)
    p = DefaultPartitioner(rng=rng)
    assert p.partition("t", None, 3) == 0
    assert p.on_new_batch("t", 0) is None and rng.asked == [3]
    assert p.partition("t", None, 3, available_partitions=[0, 2]) == 2  # never the old one if another is up
    assert rng.asked == [3, 1]


def test_sticky_prefers_available_partitions():
    p = DefaultPartitioner(rng=Scripted(0))
    assert p.partition("t", None, 6, available_partitions=[4]) == 4  # the only one: no draw
    assert p.on_new_batch("t", 4, 6, available_partitions=[4]) == 4
    assert p.on_new_batch("t", 4, 6, available_partitions=[]) == 0  # none available: any partition
    p = DefaultPartitioner(rng=random.Random(7).randrange)
    seen = {p.on_new_batch("t", p.partition("t", None, 10, [1, 3, 5]), 10, [1, 3, 5]) for _ in range(200)}
    assert seen == {1, 3, 5}


def test_sticky_partition_is_per_topic():
    p = DefaultPartitioner(rng=Scripted(1, 2))
    assert (p.partition("a", None, 5), p.partition("b", None, 5)) == (1, 2)
    assert p.partition("a", None, 5) == 1


def test_seeded_rng_reproduces_the_same_sticky_sequence():
    def run(seed):
        p, out = DefaultPartitioner(rng=random.Random(seed).randrange), []
        for _ in range(200):
            part = p.partition("t", None, 8)
            out.append(part)
            p.on_new_batch("t", part, 8)
        return out

    first = run(42)
    assert first == run(42)
    assert all(a != b for a, b in zip(first, first[1:]))  # every new batch moves to another partition
    assert set(first) == set(range(8))


def test_default_rng_works():
    p = DefaultPartitioner()
    assert 0 <= p.partition("t", None, 3) < 3


# ------------------------------------------------------------------ round robin

def test_round_robin_cycles_per_topic_and_ignores_keys():
    p = RoundRobinPartitioner()
    assert [p.partition("t", b"same-key", 3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert [p.partition("u", None, 2) for _ in range(3)] == [0, 1, 0]
    assert p.partition("t", None, 3, explicit=2) == 2
    assert p.partition("t", None, 3) == 1  # explicit records do not advance the counter


def test_round_robin_uses_available_partitions_or_all():
    p = RoundRobinPartitioner()
    assert [p.partition("t", None, 6, available_partitions=[1, 4]) for _ in range(4)] == [1, 4, 1, 4]
    assert [p.partition("t", None, 6, available_partitions=[]) for _ in range(2)] == [4, 5]
    assert p.on_new_batch("t", 5, 6) is None
    assert p.partition("t", None, 6) == 0
