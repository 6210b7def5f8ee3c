"""kafkacommon/assignment.py: Kafka's rack-unaware replica placement (AdminUtils.assignReplicasToBrokers)."""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, strategies as st

from kafkacommon.assignment import AssignmentError, assign_replicas


def test_worked_example_three_brokers_six_partitions_rf3():
    # n = 3; first replica of p at (p + 0) % 3; follower j at (first + 1 + (shift + j) % 2) % 3,
    # where shift is 0 for p in 0..2 and 1 for p in 3..5.
    assert assign_replicas(6, 3, [1, 2, 3], start_index=0, shift=0) == {
        0: (1, 2, 3),
        1: (2, 3, 1),
        2: (3, 1, 2),
        3: (1, 3, 2),
        4: (2, 1, 3),
        5: (3, 2, 1),
    }


def test_kafka_javadoc_example_five_brokers_ten_partitions():
    # AdminUtils' comment: with start index 0, p0-p4 / p5-p9 first replicas on broker-0..4, then
    # 2nd replicas (p4 p0 p1 p2 p3 / p8 p9 p5 p6 p7) and 3rd (p3 p4 p0 p1 p2 / p7 p8 p9 p5 p6).
    got = assign_replicas(10, 3, [0, 1, 2, 3, 4], start_index=0, shift=0)
    rows = {
        0: ["p0", "p5", "p4", "p8", "p3", "p7"],
        1: ["p1", "p6", "p0", "p9", "p4", "p8"],
        2: ["p2", "p7", "p1", "p5", "p0", "p9"],
        3: ["p3", "p8", "p2", "p6", "p1", "p5"],
        4: ["p4", "p9", "p3", "p7", "p2", "p6"],
    }
    for broker, cells in rows.items():
        first, second, third = cells[0:2], cells[2:4], cells[4:6]
        for position, names in enumerate((first, second, third)):
            for name in names:
                assert got[int(name[1:])][position] == broker, (name, position, got[int(name[1:])])


def test_start_index_rotates_the_first_replica():
    got = assign_replicas(3, 1, [1, 2, 3], start_index=2)
    assert got == {0: (3,), 1: (1,), 2: (2,)}


def test_shift_moves_the_followers():
    assert assign_replicas(1, 3, [1, 2, 3], start_index=0, shift=1) == {0: (1, 3, 2)}


def test_brokers_are_placed_in_id_order_whatever_the_input_order():
    assert assign_replicas(6, 2, [3, 1, 2]) == assign_replicas(6, 2, [1, 2, 3])


def test_single_broker_rf1():
    assert assign_replicas(3, 1, [7]) == {0: (7,), 1: (7,), 2: (7,)}


@pytest.mark.parametrize("partitions, rf, brokers", [
    (3, 4, [1, 2, 3]),
    (0, 1, [1]),
    (-1, 1, [1]),
    (3, 0, [1, 2]),
    (3, -2, [1, 2]),
    (1, 1, []),
])
def test_invalid_inputs_raise_assignment_error(partitions, rf, brokers):
    with pytest.raises(AssignmentError):
        assign_replicas(partitions, rf, brokers)


def test_replication_factor_above_broker_count_names_both():
    with pytest.raises(AssignmentError, match="Replication factor: 4 larger than available brokers: 3"):
        assign_replicas(1, 4, [1, 2, 3])


def test_assignment_error_is_a_value_error():
    assert issubclass(AssignmentError, ValueError)


@st.composite
def layouts(draw):
    brokers = draw(st.lists(st.integers(0, 50), min_size=1, max_size=8, unique=True))
    n = len(brokers)
    return (draw(st.integers(1, 60)), draw(st.integers(1, n)), brokers,
            draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1)))


@given(layouts())
def test_replicas_are_distinct_brokers_and_the_replication_factor_is_respected(layout):
    partitions, rf, brokers, start, shift = layout
    got = assign_replicas(partitions, rf, brokers, start, shift)
    assert sorted(got) == list(range(partitions))
    for replicas in got.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(brokers)


@given(layouts())
def test_each_replica_position_spreads_evenly(layout):
    """Leaders (position 0) and every follower position: per-broker counts differ by at most 1."""
    partitions, rf, brokers, start, shift = layout
    got = assign_replicas(partitions, rf, brokers, start, shift)
    for position in range(rf):
        counts = Counter(r[position] for r in got.values())
        per_broker = [counts.get(b, 0) for b in brokers]
        assert max(per_broker) - min(per_broker) <= 1, (position, counts)


@given(layouts())
def test_a_multiple_of_the_broker_count_gives_every_broker_the_same_load(layout):
    _partitions, rf, brokers, start, shift = layout
    n = len(brokers)
    got = assign_replicas(3 * n, rf, brokers, start, shift)
    load = Counter(b for r in got.values() for b in r)
    assert {load[b] for b in brokers} == {3 * rf}


@given(st.integers(2, 7), st.integers(0, 6), st.integers(0, 6))
def test_followers_of_one_leader_spread_over_all_other_brokers(n, start, shift):
    """The shift grows every n partitions, so over n*(n-1) partitions a leader's second
    replica lands on each other broker exactly once per n-1 partitions it leads."""
    brokers = list(range(1, n + 1))
    got = assign_replicas(n * (n - 1), 2, brokers, start % n, shift % n)
    for leader in brokers:
        seconds = [r[1] for r in got.values() if r[0] == leader]
        assert sorted(seconds) == sorted(b for b in brokers if b != leader), (leader, seconds)
