"""The main job's check (cli/demo.py's ``Acked``): an acknowledged commit is lost when the committed offset is below
it, unless a lower commit of the same partition, not failed, was acknowledged after it or never answered (the
coordinator applies commits in arrival order, as Kafka's does; librdkafka sends a commit that failed on
NOT_COORDINATOR again, late)."""
from __future__ import annotations

from cli.demo import Acked

TP = ("orders", 0)


def test_a_commit_below_an_acknowledged_one_is_a_loss() -> None:
    a = Acked()
    for o in (10, 26, 39):
        a.add("g", 2, {TP: o})
    assert a.lost("g", {TP: 39}) == ([], 0)
    assert a.lost("g", {TP: 26}) == ([(TP, 39, 26)], 0)
    assert a.lost("g", {}) == ([(TP, 39, -1)], 0)


def test_a_lower_commit_acknowledged_later_overwrites() -> None:
    a = Acked()
    for o in (11, 26):               # sent, failed on NOT_COORDINATOR inside librdkafka, not yet answered
        a.send("g", {TP: o})
    for o in (27, 39):
        a.send("g", {TP: o})
        a.add("g", -1, {TP: o}, sent=True)
    assert a.lost("g", {TP: 26}) == ([], 2)     # 11 and 26 still open: either may land after 39
    for o in (11, 26):               # sent again at close and acknowledged after 39
        a.add("g", -1, {TP: o}, sent=True)
    assert a.lost("g", {TP: 26}) == ([], 2)
    assert a.latest("g") == {TP: 39}


def test_a_failed_or_earlier_lower_commit_explains_nothing() -> None:
    a = Acked()
    a.send("g", {TP: 20})
    a.fail("g", {TP: 20})            # the client said it failed: it cannot have landed
    a.add("g", 2, {TP: 25})          # acknowledged before 39: it cannot overwrite 39
    a.send("g", {TP: 39})
    a.add("g", -1, {TP: 39}, sent=True)
    assert a.lost("g", {TP: 25}) == ([(TP, 39, 25)], 0)
    assert a.lost("g", {TP: 39}) == ([], 0)


def test_partitions_are_judged_apart() -> None:
    a = Acked()
    other = ("orders", 1)
    a.add("g", 1, {TP: 5, other: 7})
    a.add("g", 1, {other: 3})        # a lower commit of the other partition, acknowledged later
    assert a.lost("g", {TP: 5, other: 3}) == ([], 1)
    assert a.lost("g", {TP: 4, other: 3}) == ([(TP, 5, 4)], 1)
