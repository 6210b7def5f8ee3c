"""The group member's rules after a generation reset, as Kafka 2.8's consumer coordinator has them."""
from __future__ import annotations

import pytest

from client import member_rules as rules
from client.member_rules import MemberState
from kafkacommon import errors

OWNED = [("t", 1), ("t", 0)]


@pytest.mark.parametrize("code", [errors.ILLEGAL_GENERATION, errors.UNKNOWN_MEMBER_ID])
def test_a_reset_error_forgets_generation_and_member_id_and_the_next_join_loses_the_partitions(code) -> None:
    s = MemberState(member_id="m-1", generation=7, assignment=list(OWNED))
    assert rules.group_error(s, code) == rules.RESET
    assert (s.generation, s.member_id, s.assignment) == (-1, "", OWNED)   # lost only when it rejoins
    assert rules.join_prepare(s, eager=False) == (rules.LOST, sorted(OWNED))


@pytest.mark.parametrize("code", [errors.ILLEGAL_GENERATION, errors.UNKNOWN_MEMBER_ID])
def test_a_heartbeat_reset_is_the_same_reset(code) -> None:
    s = MemberState(member_id="m-1", generation=7, assignment=list(OWNED))
    assert rules.heartbeat_result(s, code, sent_generation=7) is True
    assert (s.generation, s.member_id) == (-1, "")
    assert rules.join_prepare(s, eager=True) == (rules.LOST, sorted(OWNED))


def test_without_a_reset_eager_revokes_everything_and_cooperative_keeps_its_partitions() -> None:
    s = MemberState(member_id="m-1", generation=7, assignment=list(OWNED))
    assert rules.group_error(s, errors.REBALANCE_IN_PROGRESS) == rules.REJOIN
    assert (s.generation, s.member_id) == (7, "m-1")
    assert rules.join_prepare(s, eager=True) == (rules.REVOKED, sorted(OWNED))
    assert rules.join_prepare(s, eager=False) == ("", [])
    assert rules.join_prepare(MemberState(), eager=True) == ("", [])   # a first join gives up nothing


def test_a_heartbeat_answer_for_an_old_generation_changes_nothing() -> None:
    s = MemberState(member_id="m-1", generation=8, assignment=list(OWNED))
    assert rules.heartbeat_result(s, errors.ILLEGAL_GENERATION, sent_generation=7) is False
    assert (s.generation, s.member_id) == (8, "m-1")
