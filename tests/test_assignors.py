"""client/protocol.py and client/assignors.py: Kafka's consumer protocol bytes and partition assignors.

Worked examples come from the seed articles (000: round robin with C0, C1 on
T0, T1; 002: range / round robin / sticky on a 10-partition topic; 004 draws
its range example as a picture, with no partitions to encode) and from the
Javadoc of Kafka 2.8.2's RangeAssignor, RoundRobinAssignor and StickyAssignor
(CooperativeStickyAssignor's Javadoc has no example).  The seed numbers
partitions from 1 (T0P1); Kafka, and these tests, from 0.  The expected
results are Kafka 2.8.2's code; where its Javadoc or a seed says otherwise,
a comment says so.
"""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from client.assignors import (
    ASSIGNORS, COOPERATIVE, EAGER, CooperativeStickyAssignor, StickyAssignor, get_assignor, partitions_to_revoke,
)
from client.protocol import Assignment, ProtocolError, StickyAssignorUserData, Subscription

RANGE, RR, STICKY, COOP = (get_assignor(n) for n in ("range", "roundrobin", "sticky", "cooperative-sticky"))


def tps(spec: str) -> list[tuple[str, int]]:
    """'t0p0 t1p2' -> [('t0', 0), ('t1', 2)], sorted like the assignors' output."""
    out = []
    for word in spec.split():
        topic, _, p = word.rpartition("p")
        out.append((topic, int(p)))
    return sorted(out)


def parts(topic: str, *ps: int) -> list[tuple[str, int]]:
    return [(topic, p) for p in ps]


def subs(topics: list[str], *members: str) -> dict[str, Subscription]:
    return {m: Subscription(list(topics)) for m in members}


def sticky_subs(topics_of: dict[str, list[str]], previous: dict[str, list], generation: int = 1):
    return {m: Subscription(topics, user_data=StickyAssignor.subscription_user_data(previous.get(m, []), generation))
            for m, topics in topics_of.items()}


# ------------------------------------------------------------------ registry

def test_registry_names_and_protocols():
    assert list(ASSIGNORS) == ["range", "roundrobin", "sticky", "cooperative-sticky"]
    assert [a.rebalance_protocol for a in ASSIGNORS.values()] == [EAGER, EAGER, EAGER, COOPERATIVE]
    assert COOP.supported_protocols == (COOPERATIVE, EAGER)
    assert all(get_assignor(n).name == n for n in ASSIGNORS)


def test_unknown_assignor_is_a_clear_error():
    with pytest.raises(ValueError, match=r"unknown partition assignor 'fair'.*range, roundrobin, sticky"):
        get_assignor("fair")


# ------------------------------------------------------------------ seed 000: round robin, C0 C1 on T0 T1

def test_seed_round_robin_two_consumers_two_topics():
    # seed 000_cf566e64cec242c4.txt, "RoundRobinAssignor" (also RoundRobinAssignor's first Javadoc example):
    # C0: [T0P1, T0P3, T1P2], C1: [T0P2, T1P1, T1P3] in the article's 1-based names
    got = RR.assign({"t0": 3, "t1": 3}, subs(["t0", "t1"], "C0", "C1"))
    assert got == {"C0": tps("t0p0 t0p2 t1p1"), "C1": tps("t0p1 t1p0 t1p2")}


def test_three_consumers_two_topics_of_three_partitions():
    s = subs(["t0", "t1"], "C0", "C1", "C2")
    expected = {"C0": tps("t0p0 t1p0"), "C1": tps("t0p1 t1p1"), "C2": tps("t0p2 t1p2")}
    assert RANGE.assign({"t0": 3, "t1": 3}, s) == expected
    assert RR.assign({"t0": 3, "t1": 3}, s) == expected


def test_range_javadoc_two_consumers_two_topics():
    got = RANGE.assign({"t0": 3, "t1": 3}, subs(["t0", "t1"], "C0", "C1"))
    assert got == {"C0": tps("t0p0 t0p1 t1p0 t1p1"), "C1": tps("t0p2 t1p2")}


def test_range_javadoc_rolling_bounce_shuffles_unless_static():
    # new member ids C3 (was C0) and C2 (was C1) swap the ranges ...
    bounced = RANGE.assign({"t0": 3, "t1": 3}, subs(["t0", "t1"], "C3", "C2"))
    assert bounced == {"C3": tps("t0p2 t1p2"), "C2": tps("t0p0 t0p1 t1p0 t1p1")}
    # ... unless the members are static: ordered by group.instance.id, whatever their member ids
    static = {"C3": Subscription(["t0", "t1"], group_instance_id="I0"),
              "C2": Subscription(["t0", "t1"], group_instance_id="I1")}
    assert RANGE.assign({"t0": 3, "t1": 3}, static) == {"C3": tps("t0p0 t0p1 t1p0 t1p1"), "C2": tps("t0p2 t1p2")}


def test_round_robin_javadoc_rolling_bounce_shuffles_unless_static():
    # C0 -> C5, C1 -> C3, C2 -> C4
    bounced = RR.assign({"t0": 3, "t1": 3}, subs(["t0", "t1"], "C5", "C3", "C4"))
    assert bounced == {"C3": tps("t0p0 t1p0"), "C4": tps("t0p1 t1p1"), "C5": tps("t0p2 t1p2")}
    static = {"C5": Subscription(["t0", "t1"], group_instance_id="I0"),
              "C3": Subscription(["t0", "t1"], group_instance_id="I1"),
              "C4": Subscription(["t0", "t1"], group_instance_id="I2")}
    assert RR.assign({"t0": 3, "t1": 3}, static) == {"C5": tps("t0p0 t1p0"), "C3": tps("t0p1 t1p1"),
                                                     "C4": tps("t0p2 t1p2")}


def test_three_consumers_one_topic_of_six_partitions():
    s = subs(["t"], "C0", "C1", "C2")
    assert RANGE.assign({"t": 6}, s) == {"C0": parts("t", 0, 1), "C1": parts("t", 2, 3), "C2": parts("t", 4, 5)}
    assert RR.assign({"t": 6}, s) == {"C0": parts("t", 0, 3), "C1": parts("t", 1, 4), "C2": parts("t", 2, 5)}


# ------------------------------------------------------------------ seed 002: ten partitions, three consumers

def test_seed_range_ten_partitions():
    # seed 002_e2c8c9aff16a44e9.txt, "range策略": partitions 0-3, 4-6, 7-9
    got = RANGE.assign({"t": 10}, subs(["t"], "C1", "C2", "C3"))
    assert got == {"C1": parts("t", 0, 1, 2, 3), "C2": parts("t", 4, 5, 6), "C3": parts("t", 7, 8, 9)}


def test_seed_round_robin_ten_partitions():
    # seed 002_e2c8c9aff16a44e9.txt, "round-robin策略": 0, 3, 6, 9 / 1, 4, 7 / 2, 5, 8
    got = RR.assign({"t": 10}, subs(["t"], "C1", "C2", "C3"))
    assert got == {"C1": parts("t", 0, 3, 6, 9), "C2": parts("t", 1, 4, 7), "C3": parts("t", 2, 5, 8)}


def test_seed_sticky_after_the_third_consumer_dies():
    """Seed 002_e2c8c9aff16a44e9.txt, "sticky策略": the range layout 0-3 / 4-6 / 7-9 loses C3: C1 keeps 0-3 and
    gets 7, C2 keeps 4-6 and gets 8, 9 (2.8.2's code agrees)."""
    previous = {"C1": parts("t", 0, 1, 2, 3), "C2": parts("t", 4, 5, 6)}
    got = STICKY.assign({"t": 10}, sticky_subs({"C1": ["t"], "C2": ["t"]}, previous))
    assert got == {"C1": parts("t", 0, 1, 2, 3, 7), "C2": parts("t", 4, 5, 6, 8, 9)}
    # round robin instead reshuffles: C2 loses 5 of its partitions
    assert RR.assign({"t": 10}, subs(["t"], "C1", "C2")) == {"C1": parts("t", 0, 2, 4, 6, 8),
                                                            "C2": parts("t", 1, 3, 5, 7, 9)}


# ------------------------------------------------------------------ Kafka Javadoc examples

FOUR_TOPICS = {f"t{i}": 2 for i in range(4)}


def test_sticky_javadoc_example_1_fresh_is_round_robin():
    s = subs(list(FOUR_TOPICS), "C0", "C1", "C2")
    expected = {"C0": tps("t0p0 t1p1 t3p0"), "C1": tps("t0p1 t2p0 t3p1"), "C2": tps("t1p0 t2p1")}
    assert RR.assign(FOUR_TOPICS, s) == expected
    assert STICKY.assign(FOUR_TOPICS, sticky_subs({m: list(FOUR_TOPICS) for m in s}, {})) == expected


def test_sticky_javadoc_example_1_after_c1_leaves_keeps_everything():
    previous = {"C0": tps("t0p0 t1p1 t3p0"), "C2": tps("t1p0 t2p1")}
    got = STICKY.assign(FOUR_TOPICS, sticky_subs({"C0": list(FOUR_TOPICS), "C2": list(FOUR_TOPICS)}, previous))
    # every previous assignment is kept; C1's t0p1, t2p0, t3p1 are dealt round-robin to the sorted members short
    # of the quota (2.8.2's constrainedAssign). The Javadoc, written for the older algorithm, gives C0 t2p0
    # and C2 t0p1; we follow the code.
    assert set(previous["C0"]) <= set(got["C0"]) and set(previous["C2"]) <= set(got["C2"])
    assert got == {"C0": tps("t0p0 t0p1 t1p1 t3p0"), "C2": tps("t1p0 t2p0 t2p1 t3p1")}
    # round robin moves t1p0, t1p1 and t2p0/t2p1 between the survivors
    assert RR.assign(FOUR_TOPICS, subs(list(FOUR_TOPICS), "C0", "C2")) == {
        "C0": tps("t0p0 t1p0 t2p0 t3p0"), "C2": tps("t0p1 t1p1 t2p1 t3p1")}


EX2_TOPICS = {"t0": 1, "t1": 2, "t2": 3}
EX2_SUBS = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}


def test_javadoc_example_2_unequal_subscriptions():
    s = {m: Subscription(t) for m, t in EX2_SUBS.items()}
    assert RR.assign(EX2_TOPICS, s) == {"C0": tps("t0p0"), "C1": tps("t1p0"), "C2": tps("t1p1 t2p0 t2p1 t2p2")}
    assert STICKY.assign(EX2_TOPICS, s) == {"C0": tps("t0p0"), "C1": tps("t1p0 t1p1"), "C2": tps("t2p0 t2p1 t2p2")}


def test_javadoc_example_2_after_c0_leaves():
    previous = {"C1": tps("t1p0 t1p1"), "C2": tps("t2p0 t2p1 t2p2")}
    left = {m: EX2_SUBS[m] for m in ("C1", "C2")}
    assert RR.assign(EX2_TOPICS, {m: Subscription(t) for m, t in left.items()}) == {
        "C1": tps("t0p0 t1p1"), "C2": tps("t1p0 t2p0 t2p1 t2p2")}  # preserves 3
    assert STICKY.assign(EX2_TOPICS, sticky_subs(left, previous)) == {
        "C1": tps("t0p0 t1p0 t1p1"), "C2": tps("t2p0 t2p1 t2p2")}  # preserves 5


def test_round_robin_skips_members_not_subscribed():
    s = {m: Subscription(t) for m, t in EX2_SUBS.items()}
    got = RR.assign({**EX2_TOPICS, "unsubscribed": 4}, s)
    assert "unsubscribed" not in {t for v in got.values() for t, _ in v}


def test_range_orders_static_members_by_instance_id_first():
    s = {"a": Subscription(["t"]), "b": Subscription(["t"], group_instance_id="z"),
         "c": Subscription(["t"], group_instance_id="y")}
    assert RANGE.assign({"t": 3}, s) == {"c": parts("t", 0), "b": parts("t", 1), "a": parts("t", 2)}


def test_range_gives_members_without_topics_an_empty_list():
    s = {"a": Subscription(["t"]), "b": Subscription(["missing"])}
    assert RANGE.assign({"t": 2}, s) == {"a": parts("t", 0, 1), "b": []}


# ------------------------------------------------------------------ generations and cooperative

def test_higher_generation_keeps_a_doubly_claimed_partition():
    s = {"A": Subscription(["t"], user_data=StickyAssignor.subscription_user_data(parts("t", 0, 1), 3)),
         "B": Subscription(["t"], user_data=StickyAssignor.subscription_user_data(parts("t", 0), 5))}
    assert STICKY.assign({"t": 2}, s) == {"A": parts("t", 1), "B": parts("t", 0)}
    s["B"] = Subscription(["t"], user_data=StickyAssignor.subscription_user_data(parts("t", 1), 2))
    assert STICKY.assign({"t": 2}, s) == {"A": parts("t", 0), "B": parts("t", 1)}


def test_same_generation_claims_are_void_and_cooperative_withholds_them():
    s = {"A": Subscription(["t"], user_data=CooperativeStickyAssignor.encode_generation(4),
                           owned_partitions=parts("t", 0, 1, 2)),
         "B": Subscription(["t"], user_data=CooperativeStickyAssignor.encode_generation(4),
                           owned_partitions=parts("t", 2))}
    assignment, withheld = COOP.assign_with_transfers({"t": 4}, s)
    assert ("t", 2) in withheld and ("t", 2) not in assignment[withheld[("t", 2)]]


def test_sticky_ignores_unreadable_user_data():
    s = {"A": Subscription(["t"], user_data=b"\x00\x01"), "B": Subscription(["t"])}
    assert STICKY.assign({"t": 2}, s) == {"A": parts("t", 0), "B": parts("t", 1)}


def test_sticky_reads_v0_user_data_and_not_the_owned_partitions():
    v0 = StickyAssignorUserData(parts("t", 0)).encode()
    s = {"A": Subscription(["t"], user_data=v0), "B": Subscription(["t"], owned_partitions=parts("t", 0, 1))}
    assert STICKY.assign({"t": 3}, s) == {"A": parts("t", 0, 2), "B": parts("t", 1)}


def test_cooperative_withholds_moving_partitions_until_the_next_round():
    topics = {"t": 6}
    first = COOP.assign(topics, subs(["t"], "C0", "C1"))
    assert first == {"C0": parts("t", 0, 2, 4), "C1": parts("t", 1, 3, 5)}
    owned = {m: coop_sub(["t"], first.get(m, []), 1 if m in first else -1) for m in ("C0", "C1", "C2")}
    second, withheld = COOP.assign_with_transfers(topics, owned)
    assert withheld == {("t", 4): "C2", ("t", 5): "C2"}
    assert second == {"C0": parts("t", 0, 2), "C1": parts("t", 1, 3), "C2": []}
    assert partitions_to_revoke(first["C0"], second["C0"]) == parts("t", 4)
    # after revoking, the members rejoin owning only what they kept: the withheld partitions arrive
    owned = {m: coop_sub(["t"], second[m], 2) for m in second}
    third, withheld = COOP.assign_with_transfers(topics, owned)
    assert withheld == {} and third == {"C0": parts("t", 0, 2), "C1": parts("t", 1, 3), "C2": parts("t", 4, 5)}


def test_cooperative_general_case_withholds_only_real_moves():
    owned = {"C1": coop_sub(["t0", "t1"], tps("t0p0 t1p0 t1p1"), 1),
             "C2": coop_sub(["t0", "t1", "t2"], tps("t2p0 t2p1 t2p2"), 1),
             "C3": coop_sub(["t1"], [], -1)}
    assignment, withheld = COOP.assign_with_transfers(EX2_TOPICS, owned)
    for tp, new_owner in withheld.items():
        assert any(tp in s.owned_partitions for m, s in owned.items() if m != new_owner)
        assert tp not in assignment[new_owner]


def coop_sub(topics: list[str], owned: list, generation: int | None = None) -> Subscription:
    """A cooperative-sticky subscription as Kafka 2.8 sends it: owned partitions, the generation in the user data."""
    user_data = None if generation is None else CooperativeStickyAssignor.encode_generation(generation)
    return Subscription(list(topics), user_data=user_data, owned_partitions=list(owned))


def test_sticky_drops_every_claim_of_an_older_generation():
    """Kafka 2.8.2's allSubscriptionsEqual keeps only the claims of the highest generation: C1's [p2, p3] from
    generation 1 count for nothing although nobody else claims them (Kafka 3.x would let C1 keep them)."""
    s = {"C0": Subscription(["t"], user_data=StickyAssignor.subscription_user_data(parts("t", 0), 2)),
         "C1": Subscription(["t"], user_data=StickyAssignor.subscription_user_data(parts("t", 2, 3), 1)),
         "C2": Subscription(["t"])}
    assert STICKY.assign({"t": 4}, s) == {"C0": parts("t", 0, 3), "C1": parts("t", 1), "C2": parts("t", 2)}


def test_cooperative_drops_every_claim_of_an_older_generation_and_withholds_nothing():
    # the same rule on the cooperative path; 2.8.2 marks as transferring only partitions revoked over the quota
    # or claimed twice, so C1's dropped p2 goes straight to C2 in this round
    s = {"C0": coop_sub(["t"], parts("t", 0), 2), "C1": coop_sub(["t"], parts("t", 2, 3), 1),
         "C2": coop_sub(["t"], [], -1)}
    assert COOP.assign_with_transfers({"t": 4}, s) == (
        {"C0": parts("t", 0, 3), "C1": parts("t", 1), "C2": parts("t", 2)}, {})


def test_cooperative_reads_the_generation_from_the_user_data_only():
    assert CooperativeStickyAssignor.encode_generation(7) == b"\x00\x00\x00\x07"
    assert CooperativeStickyAssignor.encode_generation(-1) == b"\xff\xff\xff\xff"
    owned = parts("t", 1)
    assert COOP.member_data(Subscription(["t"], owned_partitions=owned, generation_id=9)) == (owned, None)
    assert COOP.member_data(Subscription(["t"], b"\x00\x00\x00\x05", owned)) == (owned, 5)
    assert COOP.member_data(Subscription(["t"], b"\x00\x00\x00\x05extra", owned)) == (owned, 5)  # Struct.read
    assert COOP.member_data(Subscription(["t"], b"\x00\x05", owned)) == (owned, -1)  # unreadable: default
    # a v2 subscription's generation field is not what 2.8.2 reads: C1's generation 1 loses to C0's 2
    s = {"C0": coop_sub(["t"], parts("t", 0), 2),
         "C1": Subscription(["t"], user_data=CooperativeStickyAssignor.encode_generation(1),
                            owned_partitions=parts("t", 1), generation_id=5)}
    assert COOP.assign({"t": 2}, s) == {"C0": parts("t", 0), "C1": parts("t", 1)}
    s["C0"] = coop_sub(["t"], parts("t", 0, 1), 2)
    assert COOP.assign_with_transfers({"t": 2}, s) == ({"C0": parts("t", 0), "C1": []}, {("t", 1): "C1"})


def test_sticky_without_user_data_owns_nothing():
    # 2.8.2's StickyAssignor.memberData: no user data (or an empty one) is no previous assignment, no generation;
    # the subscription's owned partitions are not looked at
    assert STICKY.member_data(Subscription(["t"], owned_partitions=parts("t", 1), generation_id=3)) == ([], None)
    assert STICKY.member_data(Subscription(["t"], user_data=b"")) == ([], None)
    assert STICKY.member_data(Subscription(["t"], user_data=b"\x00\x01")) == ([], -1)  # unreadable
    v0 = StickyAssignorUserData(parts("t", 1)).encode()
    assert STICKY.member_data(Subscription(["t"], user_data=v0)) == (parts("t", 1), None)
    assert STICKY.member_data(Subscription(["t"], user_data=v0 + b"\x00\x00")) == (parts("t", 1), None)  # V1 short
    v1 = StickyAssignorUserData(parts("t", 1), 4).encode()
    assert STICKY.member_data(Subscription(["t"], user_data=v1 + b"\x00")) == (parts("t", 1), 4)  # extra ignored


def test_constrained_order_is_javas_hash_map_order():
    """2.8.2 walks its HashMap of members: "q" (bucket 1) comes before "b" (bucket 2), so "q" is first in the queue
    of members at the minimum quota and gets the partition left over (sorted order would give it to "b")."""
    s = {"b": Subscription(["t"], user_data=StickyAssignor.subscription_user_data(parts("t", 0), 1)),
         "q": Subscription(["t"], user_data=StickyAssignor.subscription_user_data(parts("t", 1), 1))}
    assert STICKY.assign({"t": 3}, s) == {"b": parts("t", 0), "q": parts("t", 1, 2)}


def test_constrained_members_keep_up_to_the_max_quota_then_the_short_one_steals():
    """2.8.2 lets every member keep up to ceil(P/M) of what it owns; a member left short then takes the first
    partition of a member at the max quota (Kafka's "stealing" step)."""
    s = {m: Subscription(["t"], user_data=StickyAssignor.subscription_user_data(owned, 1))
         for m, owned in (("A", parts("t", 0, 1)), ("B", parts("t", 2, 3)), ("C", []))}
    # P=4, M=3: quotas 1..2; A and B keep two each, nothing is left for C, which takes A's first partition
    assert STICKY.assign({"t": 4}, s) == {"A": parts("t", 1), "B": parts("t", 2, 3), "C": parts("t", 0)}
    coop = {m: coop_sub(["t"], owned, 1) for m, owned in (("A", parts("t", 0, 1)), ("B", parts("t", 2, 3)),
                                                           ("C", []))}
    assert COOP.assign_with_transfers({"t": 4}, coop) == (
        {"A": parts("t", 1), "B": parts("t", 2, 3), "C": []}, {("t", 0): "C"})


def test_general_case_same_generation_tie_goes_to_the_first_member_in_hash_map_order():
    """2.8.2's prepopulateCurrentAssignments keeps the first claim it meets at a generation and skips the others
    (no voiding); it meets "q" (bucket 1) before "b" (bucket 2), so "q" keeps t0p0."""
    s = {"b": Subscription(["t0", "t1"], user_data=StickyAssignor.subscription_user_data(tps("t0p0 t1p0"), 3)),
         "q": Subscription(["t0", "t1", "t2"], user_data=StickyAssignor.subscription_user_data(tps("t0p0 t2p0"), 3))}
    assert STICKY.assign({"t0": 1, "t1": 1, "t2": 1}, s) == {"b": tps("t1p0"), "q": tps("t0p0 t2p0")}


def test_live_client_sends_the_generation_and_previous_assignment(monkeypatch):
    """GroupMember's JoinGroup metadata: cooperative-sticky puts the generation of its last assignment in the user
    data; sticky (eager) its last assignment and generation, although it revoked everything before rejoining."""
    from client.assignors import get_assignor as ga
    from client.group import GroupMember
    from proto import groups_pb2 as gpb

    for name in ("cooperative-sticky", "sticky"):
        m = GroupMember(object(), "g", ["t"], assignors=[name])
        try:
            sent: list = []
            assigned = Assignment(parts("t", 0, 1)).encode()

            def call(rpc, request, error_of, timeout_s, m=m, sent=sent, assigned=assigned):
                m._answered.node = None
                sent.append(request)
                if rpc == "JoinGroup":
                    return gpb.JoinGroupResponse(generation_id=3, protocol_name=name, leader="other",
                                                 member_id="me")
                return gpb.SyncGroupResponse(assignment=assigned)

            monkeypatch.setattr(m, "_call", call)
            monkeypatch.setattr(m, "_start_fetching", lambda added: None)
            m.ensure_active()  # first join: nothing assigned yet
            first = Subscription.decode(sent[0].protocols[0].metadata)
            assert first.owned_partitions == []
            if name == "sticky":
                assert first.user_data is None
            else:
                assert first.user_data == CooperativeStickyAssignor.encode_generation(-1)
            m._rejoin.set()
            m.ensure_active()
            again = Subscription.decode(sent[2].protocols[0].metadata)
            if name == "sticky":
                assert again.owned_partitions == []  # eager: revoked before the join
                assert StickyAssignorUserData.decode(again.user_data) == StickyAssignorUserData(parts("t", 0, 1), 3)
            else:
                assert again.owned_partitions == parts("t", 0, 1)
                assert ga(name).member_data(again) == (parts("t", 0, 1), 3)
        finally:
            m.close(leave=False)


def test_kafka_2_8_2_unit_test_cases():
    """Cases from Kafka 2.8.2's CooperativeStickyAssignorTest and AbstractStickyAssignorTest, same member names."""
    c1, c2, c3 = "consumer1", "consumer2", "consumer3"  # HashMap order: consumer3, consumer2, consumer1
    s = {c1: coop_sub(["topic"], parts("topic", 0, 1), -1), c2: coop_sub(["topic"], parts("topic", 0, 2), -1),
         c3: coop_sub(["topic"], [], -1)}
    # ...ClaimedByMultipleConsumersInSameGenerationWithEqualPartitionsPerConsumer: topic-0 is withheld
    assert COOP.assign({"topic": 3}, s) == {c1: parts("topic", 1), c2: parts("topic", 2), c3: []}
    # ...WithUnequalPartitionsPerConsumer: topic-3 goes to consumer2, met before consumer1 in the HashMap
    assert COOP.assign({"topic": 4}, s) == {c1: parts("topic", 1), c2: parts("topic", 2, 3), c3: []}
    # testAllConsumersReachExpectedQuotaAndAreConsideredFilled
    s = {c1: coop_sub(["topic"], parts("topic", 0, 1), -1), c2: coop_sub(["topic"], parts("topic", 2), -1),
         c3: coop_sub(["topic"], [], -1)}
    assert COOP.assign({"topic": 4}, s) == {c1: parts("topic", 0, 1), c2: parts("topic", 2), c3: parts("topic", 3)}
    # testOwnedPartitionsAreInvalidatedForConsumerWithStaleGeneration / ...WithNoGeneration, both assignors
    claimed = tps("topicp0 topicp2 topic2p1")
    for stale in (9, -1):
        sticky = {c1: Subscription(["topic", "topic2"], user_data=StickyAssignor.subscription_user_data(claimed, 10)),
                  c2: Subscription(["topic", "topic2"], user_data=StickyAssignor.subscription_user_data(claimed, stale))}
        coop = {c1: coop_sub(["topic", "topic2"], claimed, 10), c2: coop_sub(["topic", "topic2"], claimed, stale)}
        want = {c1: claimed, c2: tps("topicp1 topic2p0 topic2p2")}
        assert STICKY.assign({"topic": 3, "topic2": 3}, sticky) == want
        assert COOP.assign({"topic": 3, "topic2": 3}, coop) == want


def test_java_iteration_order_matches_a_real_jvm():
    """Orders printed by Java 17's HashMap/HashSet (default construction) for the same inserts and removes."""
    from client.java_order import JavaHashSet, hash_map_order, topic_partition_hash
    keys = [f"c-{i}" for i in range(1, 15)]  # 14 keys: the table grows to 32 buckets on the 13th
    assert hash_map_order(keys) == ["c-14", "c-13", "c-10", "c-1", "c-12", "c-11", "c-3", "c-2", "c-5", "c-4",
                                    "c-7", "c-6", "c-9", "c-8"]
    keys = ["consumer-1-7f3a", "consumer-2-01bc", "consumer-3-e9d2", "member-zz", "q", "b"]
    assert hash_map_order(keys) == ["q", "b", "consumer-3-e9d2", "consumer-1-7f3a", "member-zz", "consumer-2-01bc"]
    s = JavaHashSet(topic_partition_hash)
    for tp in (("t", 3), ("t", 19), ("t", 35), ("t", 0)):
        s.add(tp)
    s.discard(("t", 19))
    s.add(("t", 19))  # back at the tail of its bucket (3, 19, 35 and 51 share one)
    s.add(("t", 51))
    assert list(s) == [("t", 3), ("t", 35), ("t", 19), ("t", 51), ("t", 0)] and s.first() == ("t", 3)


def test_partitions_to_revoke():
    assert partitions_to_revoke(tps("a0p1 a0p0 b0p3"), tps("a0p0")) == tps("a0p1 b0p3")
    assert partitions_to_revoke([], tps("a0p0")) == []


# ------------------------------------------------------------------ protocol bytes

def test_subscription_v1_exact_bytes():
    sub = Subscription(["ab"], user_data=b"\x07", owned_partitions=[("ab", 1), ("ab", 0)])
    assert sub.encode() == (b"\x00\x01" + b"\x00\x00\x00\x01" + b"\x00\x02ab" + b"\x00\x00\x00\x01\x07"
                            + b"\x00\x00\x00\x01" + b"\x00\x02ab" + b"\x00\x00\x00\x02"
                            + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00")
    assert Subscription.decode(sub.encode()) == sub


def test_subscription_v0_and_v2_and_null_user_data():
    v0 = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    assert Subscription.decode(v0) == Subscription(["t"])
    sub = Subscription(["t"], owned_partitions=[("t", 3)], generation_id=9)
    assert Subscription.decode(sub.encode(version=2)) == sub
    assert Subscription.decode(sub.encode(version=0)) == Subscription(["t"])
    # a future version is read with the newest known layout; extra fields are skipped
    future = b"\x00\x03" + sub.encode(version=2)[2:] + b"\x00\x04rack"
    assert Subscription.decode(future) == sub


def test_owned_partitions_come_back_grouped_by_topic():
    sub = Subscription(["a", "b"], owned_partitions=[("a", 0), ("b", 0), ("a", 1)])
    assert Subscription.decode(sub.encode()).owned_partitions == [("a", 0), ("a", 1), ("b", 0)]


def test_assignment_exact_bytes_and_round_trip():
    a = Assignment([("t", 2)], user_data=None)
    assert a.encode() == b"\x00\x01" + b"\x00\x00\x00\x01\x00\x01t" + b"\x00\x00\x00\x01\x00\x00\x00\x02" + \
        b"\xff\xff\xff\xff"
    assert Assignment.decode(a.encode()) == a
    assert Assignment.decode(Assignment([], b"").encode(version=0)) == Assignment([], b"")


@pytest.mark.parametrize("data, message", [
    (b"", "truncated reading version"),
    (b"\xff\xff", "unsupported version -1"),
    (b"\x00\x01\x00\x00\x00\x01\x00\x05ab", "truncated reading subscribed topic name"),
    (b"\x00\x01\xff\xff\xff\xfe", "topics has negative count"),
    (b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe\xff\xff\xff\xff", "not valid UTF-8"),
    (b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xf0", "user data has invalid length -16"),
    (b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\x00", "1 trailing bytes after a version 0 body"),
    (b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff", "truncated reading owned partitions count"),
    (b"\x00\x01\x7f\xff\xff\xff\x00\x00", "topics count 2147483647 exceeds"),
])
def test_malformed_subscriptions(data, message):
    with pytest.raises(ProtocolError, match=message):
        Subscription.decode(data)


def test_malformed_assignment_and_values():
    with pytest.raises(ProtocolError, match="assignment: truncated reading assigned partitions partition"):
        Assignment.decode(b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x02\x00\x00\x00\x01")
    with pytest.raises(ProtocolError, match="does not fit in an int32"):
        Assignment([("t", 2**31)]).encode()
    with pytest.raises(ProtocolError, match="can only write versions"):
        Subscription(["t"]).encode(version=5)
    with pytest.raises(ProtocolError, match="expected bytes"):
        Subscription.decode("text")  # type: ignore[arg-type]
    assert issubclass(ProtocolError, ValueError)


def test_sticky_user_data_v1_layout():
    data = StickyAssignorUserData([("t", 0), ("t", 2)], generation=7).encode()
    assert data == b"\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x02" + struct.pack(">i", 7)
    assert StickyAssignorUserData.decode(data) == StickyAssignorUserData([("t", 0), ("t", 2)], 7)
    with pytest.raises(ProtocolError, match="trailing"):
        StickyAssignorUserData.decode(data + b"\x00")


NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
TPS = st.lists(st.tuples(NAMES, st.integers(0, 2**31 - 1)), max_size=6)


@given(st.lists(NAMES, max_size=4), st.none() | st.binary(max_size=16), TPS,
       st.integers(-(2**31), 2**31 - 1))
def test_subscription_round_trips(topics, user_data, owned, generation):
    sub = Subscription(topics, user_data, owned, generation)
    back = Subscription.decode(sub.encode(version=2))
    assert (back.topics, back.user_data, sorted(back.owned_partitions), back.generation_id) == \
        (topics, user_data, sorted(owned), generation)


@given(st.binary(max_size=40))
def test_random_bytes_decode_or_raise_protocol_error(data):
    for cls in (Subscription, Assignment, StickyAssignorUserData):
        try:
            cls.decode(data)
        except ProtocolError:
            pass


# ------------------------------------------------------------------ properties

TOPIC_NAMES = ["a", "b", "c", "d"]


@st.composite
def groups(draw, equal: bool | None = None):
    """(partitions_per_topic, member ids, topics per member, previous owner per partition, generation per member)."""
    topics = draw(st.dictionaries(st.sampled_from(TOPIC_NAMES), st.integers(0, 7), min_size=1))
    members = draw(st.lists(st.sampled_from([f"m{i}" for i in range(7)]), min_size=1, max_size=6, unique=True))
    if equal is None:
        equal = draw(st.booleans())
    names = sorted(topics) + ["ghost"]
    if equal:
        shared = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
        topics_of = {m: shared for m in members}
    else:
        topics_of = {m: draw(st.lists(st.sampled_from(names), min_size=1, unique=True)) for m in members}
    old = members + ["gone1", "gone2"]
    owner = {(t, p): draw(st.sampled_from(old + [None])) for t, n in topics.items() for p in range(n)}
    return topics, members, topics_of, owner


def owned_by(owner, m):
    return [tp for tp, o in owner.items() if o == m]


def check_valid(topics, topics_of, got, exactly_once=True):
    assert set(got) == set(topics_of)
    seen = [tp for v in got.values() for tp in v]
    assert len(seen) == len(set(seen))
    for m, v in got.items():
        assert all(t in topics_of[m] and 0 <= p < topics[t] for t, p in v)
    wanted = {(t, p) for t, n in topics.items() for p in range(n) if any(t in ts for ts in topics_of.values())}
    if exactly_once:
        assert set(seen) == wanted
    else:
        assert set(seen) <= wanted


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(groups())
def test_every_assignor_assigns_each_subscribed_partition_once(group):
    topics, members, topics_of, owner = group
    fresh = {m: Subscription(topics_of[m]) for m in members}
    for assignor in (RANGE, RR, STICKY, COOP):
        check_valid(topics, topics_of, assignor.assign(topics, fresh))
    sticky = {m: Subscription(topics_of[m], user_data=StickyAssignor.subscription_user_data(owned_by(owner, m), 1))
              for m in members}
    check_valid(topics, topics_of, STICKY.assign(topics, sticky))
    coop = {m: coop_sub(topics_of[m], owned_by(owner, m), 1) for m in members}
    got, withheld = COOP.assign_with_transfers(topics, coop)
    check_valid(topics, topics_of, got, exactly_once=not withheld)
    for tp, new_owner in withheld.items():  # withheld = still claimed by another member this round
        assert any(o != new_owner and tp in s.owned_partitions for o, s in coop.items())
    restored = {m: got[m] + [tp for tp, o in withheld.items() if o == m] for m in got}
    check_valid(topics, topics_of, restored)


@FAST
@given(groups(equal=True))
def test_sticky_is_balanced_and_keeps_what_fits_the_quota(group):
    topics, members, topics_of, owner = group
    s = {m: Subscription(topics_of[m], user_data=StickyAssignor.subscription_user_data(owned_by(owner, m), 2))
         for m in members}
    got = STICKY.assign(topics, s)
    counts = [len(v) for v in got.values()]
    assert max(counts) - min(counts) <= 1
    subscribed = {t for t in topics if t in topics_of[members[0]]}
    min_quota = sum(topics[t] for t in subscribed) // len(members)
    for m in members:
        mine = [tp for tp in owned_by(owner, m) if tp[0] in subscribed]
        kept = set(mine) & set(got[m])
        if len(mine) <= min_quota:
            assert kept == set(mine)
        else:
            assert len(kept) >= min_quota
    # cooperative: the assignment plus what it withholds is the same balanced, sticky layout
    c = {m: coop_sub(topics_of[m], owned_by(owner, m), 2) for m in members}
    coop, withheld = COOP.assign_with_transfers(topics, c)
    restored = {m: sorted(coop[m] + [tp for tp, o in withheld.items() if o == m]) for m in coop}
    assert restored == got


@FAST
@given(groups())
def test_sticky_is_stable_when_nothing_changes(group):
    topics, members, topics_of, _ = group
    first = STICKY.assign(topics, {m: Subscription(topics_of[m]) for m in members})
    again = STICKY.assign(topics, {m: Subscription(topics_of[m], user_data=StickyAssignor.subscription_user_data(
        first[m], 1)) for m in members})
    assert again == first
    coop = COOP.assign_with_transfers(topics, {m: coop_sub(topics_of[m], first[m], 1) for m in members})
    assert coop == (first, {})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups(equal=True), st.data())
def test_only_the_highest_generations_claims_count(group, data):
    """Kafka 2.8.2 (equal subscriptions): a member below the highest generation is treated as owning nothing,
    and a partition claimed by two members of the highest generation as owned by nobody."""
    topics, members, topics_of, _ = group
    gens = {m: data.draw(st.integers(-1, 3)) for m in members}
    claims = {m: data.draw(st.lists(st.sampled_from(sorted((t, p) for t, n in topics.items() for p in range(n))
                                                    or [("a", 0)]), unique=True, max_size=4)) for m in members}
    s = {m: coop_sub(topics_of[m], claims[m], gens[m]) for m in members}
    got, withheld = COOP.assign_with_transfers(topics, s)
    check_valid(topics, topics_of, got, exactly_once=not withheld)
    top = max(gens.values())
    fewer = {m: coop_sub(topics_of[m], claims[m] if gens[m] == top else [], gens[m]) for m in members}
    assert COOP.assign_with_transfers(topics, fewer) == (got, withheld)
    for tp, new_owner in withheld.items():  # withheld: claimed twice at the top, or over a claimant's quota
        assert any(o != new_owner and gens[o] == top and tp in claims[o] for o in members)
