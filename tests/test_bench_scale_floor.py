"""bench/scale_floor.py's pure parts: the floor's znodes and writes made like the cluster's, its counts taken from the
run's events, its stages read from the workers' lines, and the verdict of the ratio goal against the floor's ratio."""
from __future__ import annotations

import json

from bench.scale_floor import compare_lines, floor_counts, parse_lines, shrunk_state, state_paths, verdict


def test_the_state_paths_are_the_clusters_the_offsets_topic_last() -> None:
    paths = state_paths(1050)
    assert len(paths) == len(set(paths)) == 1050
    assert paths[0] == "/brokers/topics/scale/partitions/0/state"
    assert paths[999] == "/brokers/topics/scale/partitions/999/state"
    assert paths[1000] == "/brokers/topics/__consumer_offsets/partitions/0/state"
    assert paths[-1] == "/brokers/topics/__consumer_offsets/partitions/49/state"


def test_a_shrunk_state_leaves_the_broker_out_moves_its_leadership_and_bumps_the_epoch() -> None:
    led = b'{"version":1,"leader":3,"leader_epoch":4,"controller_epoch":2,"isr":[3,1,5]}'
    assert json.loads(shrunk_state(led, 3)) == {"version": 1, "leader": 1, "leader_epoch": 5,
                                                "controller_epoch": 2, "isr": [1, 5]}
    followed = b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":2,"isr":[1,3,5]}'
    assert json.loads(shrunk_state(followed, 3))["isr"] == [1, 5]
    assert json.loads(shrunk_state(followed, 3))["leader"] == 1
    # not a replica of this partition: the first ISR member goes (the same size as the stopping broker's writes)
    other = shrunk_state(followed, 4)
    assert json.loads(other)["isr"] == [3, 5] and json.loads(other)["leader"] == 3
    # Kafka's compact JSON, keys in the cluster's order: one member's id and its comma fewer
    assert shrunk_state(led, 3) == b'{"version":1,"leader":1,"leader_epoch":5,"controller_epoch":2,"isr":[1,5]}'
    assert len(shrunk_state(led, 3)) == len(led) - 2


def test_a_last_isr_member_stays() -> None:
    alone = b'{"version":1,"leader":3,"leader_epoch":0,"controller_epoch":1,"isr":[3]}'
    assert json.loads(shrunk_state(alone, 3))["isr"] == [3]


def test_the_counts_are_the_runs_own_batches_else_what_one_broker_holds() -> None:
    assert floor_counts([(2010, 62.7), (4020, 397.0)], 10050) == [2010, 4020]
    assert floor_counts([(210, 40.5), (0, 0.1), (420, 152.1)], 1050) == [210, 420]
    assert floor_counts([], 10050) == [2010, 4020]
    assert floor_counts([], 1050) == [210, 420]


def test_the_stages_from_the_workers_lines() -> None:
    lines = ["ready 11 100", "ready 12 110", "ready 13 120", "elected 11 1000000",
             "signal 11 2000000", "written 11 12000000 4000 5500", "gone 11 12500000",
             "elected 12 15000000", "read 12 3000000"]
    r = parse_lines(lines)
    assert r == {"writes": 10.0, "batches": [4.0, 5.5], "handover": 3.0, "strict": 13.0, "read": 3.0,
                 "kafka": 16.0}
    assert "read" not in parse_lines(lines[:-1])


def test_the_write_methods_compared() -> None:
    lines = ["compare partition 217.4", "compare batched 12.0", "compare partition 404.4", "compare batched 100.1",
             "ready 1 2"]
    assert compare_lines(lines) == {"partition": [217.4, 404.4], "batched": [12.0, 100.1]}


def test_the_verdict_against_the_floors_own_ratio() -> None:
    # the floor's own ratio below the goal: the goal is not below the floor, met or missed on its own
    assert "NOT below the floor" in verdict((677.0, 2755.0), (34.4, 79.4))
    assert "kafkasim meets it" in verdict((677.0, 2755.0), (34.4, 79.4))
    assert "kafkasim misses it" in verdict((500.0, 3500.0), (34.4, 79.4))
    # above it: the goal is below the floor, and kafkasim within or above the floor's ratio
    assert "below the floor (the floor's own ratio 8.00x" in verdict((500.0, 3500.0), (10.0, 80.0))
    assert "kafkasim within the floor's ratio" in verdict((500.0, 3500.0), (10.0, 80.0))
    assert "kafkasim above the floor's ratio" in verdict((500.0, 5000.0), (10.0, 80.0))
