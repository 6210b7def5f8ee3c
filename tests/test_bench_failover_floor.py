"""bench/failover_floor.py's pure parts: the clean coordinator failover's floor from its measured rounds, the
verdict of the goal against it, and the ISR a broker held at a moment, read from the run's events."""
from __future__ import annotations

import math

from bench.failover_floor import GOAL_MS, floor_of, isr_as_of, verdict


def test_the_floor_is_the_median_of_each_rounds_commit_less_its_heartbeat_plus_its_flush() -> None:
    f = floor_of([4.0, 3.0, 10.0], [1.0, 0.5, 2.0], [2.0, 1.5, 9.0])
    assert f["rounds"] == 3
    assert (f["commit"], f["heartbeat"], f["flush"]) == (4.0, 1.0, 2.0)
    # per round 5.0, 4.0, 17.0: the median of the rounds, not the medians' sum (4 - 1 + 2 = 5)
    assert f["floor"] == 5.0
    assert f["floor_even"] == 5.5         # 5.5, 4.25, 18.0 with half the heartbeat taken off
    assert f["floor"] <= f["floor_even"]


def test_no_round_gives_no_floor() -> None:
    f = floor_of([], [], [])
    assert f["rounds"] == 0 and all(math.isnan(f[k]) for k in ("commit", "heartbeat", "flush", "floor", "floor_even"))
    assert verdict(50.0, f["floor"]) == "no floor measured"
    assert verdict(float("nan"), 4.0) == "no floor measured"


def test_the_goal_is_below_a_floor_over_ten_ms_and_not_below_one_under() -> None:
    assert GOAL_MS == 10.0
    assert verdict(60.0, 12.5) == "the goal (+10 ms) is below this floor (+12.5 ms)"
    text = verdict(53.8, 4.8)
    assert text.startswith("the goal (+10 ms) is not below this floor (+4.8 ms)") and "49.0 ms above" in text


def ev(ns: int, broker: int, type_: str, isr: list[int], partition: int = 7) -> dict:
    return {"mono_ns": ns, "broker": broker, "type": type_, "topic": "__consumer_offsets", "partition": partition,
            "isr": isr}


def test_the_isr_as_of_a_moment_is_the_last_change_before_it_on_that_broker_and_partition() -> None:
    events = [ev(10, 2, "became_leader", [2, 1, 3]),
              ev(20, 2, "isr_updated", [2, 3]),
              ev(25, 1, "replica_isr_changed", [1]),               # another broker
              ev(26, 2, "isr_updated", [2], partition=8),          # another partition
              ev(27, 2, "fetch", [9]),                             # not an ISR line
              ev(30, 2, "replica_isr_changed", [2, 3, 1])]
    assert isr_as_of(events, 2, "__consumer_offsets", 7, 5) is None
    assert isr_as_of(events, 2, "__consumer_offsets", 7, 20) == [2, 1, 3]      # a line at the moment is after it
    assert isr_as_of(events, 2, "__consumer_offsets", 7, 29) == [2, 3]
    assert isr_as_of(events, 2, "__consumer_offsets", 7, 31) == [2, 3, 1]
