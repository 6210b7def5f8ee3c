"""The broker's coordinator shell as a typed door: one method per group API, each answering a future.

The shell runs the real cores over an in-memory offsets log whose appends are done at once; its offsets
partitions 0-2 (of 4) are loaded through its own Coordinatorship, so no thread's timing is involved.
"""
from __future__ import annotations

import threading

import pytest

from coordinator import messages as m
from coordinator.core import GroupConfig
from kafkacommon import errors
from kafkacommon.hashing import partition_for
from node.events import EventLog
from node.shells.coordinator_shell import CoordinatorShell

PARTITIONS = 4
LED = (0, 1, 2)   # partition 3 is not coordinated here


class InstantLog:
    """The offsets partitions as the shell's replica manager: empty at the load, every append done at once."""

    def read_log(self, tp, offset, max_bytes):
        return None

    def checkpointed_hw(self, tp) -> int:
        return 0

    def partition_lock(self, tp):
        return None

    def append(self, tp, records, acks, timeout_ms, on_done, producer=None, on_appended=None, inline=False,
               wake_later=False):
        return errors.NONE, 0   # (error, base offset): done already

    def wake_fetches(self):
        pass


def group_in(partition: int) -> str:
    return next(f"g{i}" for i in range(10_000) if partition_for(f"g{i}", PARTITIONS) == partition)


@pytest.fixture
def shell(tmp_path):
    s = CoordinatorShell(1, InstantLog(), EventLog(tmp_path / "events.jsonl", 1),
                         GroupConfig(initial_rebalance_delay_ms=0), num_partitions=lambda: PARTITIONS)
    for p in LED:
        slot, out = s.coordinatorship.begin_load(p, 0, s.clock(), io=threading.Lock())
        s.coordinatorship.finish_load(slot, s.clock())
    yield s
    s.close()


def commit(group: str, offset: int) -> m.OffsetCommitRequest:
    return m.OffsetCommitRequest(group, -1, "", offsets=[m.CommitOffset("t", 0, offset)])


def test_each_api_answers_its_own_response_type_and_not_coordinator_where_no_core_is(shell) -> None:
    here, elsewhere = group_in(0), group_in(3)
    assert shell.offset_commit(commit(here, 7)).result(5) == m.OffsetCommitResponse([("t", 0, errors.NONE)])
    assert shell.offset_fetch(m.OffsetFetchRequest(here)).result(5).partitions[0].offset == 7
    # parked until the (0 ms) initial delayed join fires on the shell's timer thread
    joined = shell.join_group(m.JoinGroupRequest(here, "", 10_000, 10_000, "consumer", [("range", b"")],
                                                 require_known_member_id=False)).result(5)
    assert joined.error_code == errors.NONE and joined.generation_id == 1
    assert shell.heartbeat(m.HeartbeatRequest(here, 1, joined.member_id)).result(5) == m.HeartbeatResponse(
        errors.NONE)
    for api, req, answer in [
            (shell.join_group, m.JoinGroupRequest(elsewhere, "m", 10_000, 10_000, "consumer", []),
             m.JoinGroupResponse(errors.NOT_COORDINATOR, member_id="m")),
            (shell.sync_group, m.SyncGroupRequest(elsewhere, 1, "m"), m.SyncGroupResponse(errors.NOT_COORDINATOR)),
            (shell.heartbeat, m.HeartbeatRequest(elsewhere, 1, "m"), m.HeartbeatResponse(errors.NOT_COORDINATOR)),
            (shell.leave_group, m.LeaveGroupRequest(elsewhere, [("m", None)]),
             m.LeaveGroupResponse(errors.NOT_COORDINATOR)),
            (shell.offset_commit, commit(elsewhere, 1), m.OffsetCommitResponse([("t", 0, errors.NOT_COORDINATOR)])),
            (shell.offset_fetch, m.OffsetFetchRequest(elsewhere), m.OffsetFetchResponse(errors.NOT_COORDINATOR))]:
        assert api(req).result(5) == answer, api.__name__


def test_a_request_for_groups_of_several_cores_is_answered_by_each_in_order(shell) -> None:
    a, b, gone = group_in(0), group_in(1), group_in(3)
    for g in (a, b):
        shell.offset_commit(commit(g, 1)).result(5)
    described = shell.describe_groups(m.DescribeGroupsRequest([b, gone, a])).result(5)
    assert [(g.group_id, g.error_code, g.state) for g in described.groups] == [
        (b, errors.NONE, "Empty"), (gone, errors.NOT_COORDINATOR, ""), (a, errors.NONE, "Empty")]
    listed = shell.list_groups(m.ListGroupsRequest())
    assert listed == m.ListGroupsResponse(errors.NONE, sorted([(a, "", "Empty"), (b, "", "Empty")]))
    deleted = shell.delete_groups(m.DeleteGroupsRequest([a, gone, b])).result(5)
    assert deleted.results == [(a, errors.NONE), (gone, errors.NOT_COORDINATOR), (b, errors.NONE)]
    assert shell.list_groups(m.ListGroupsRequest()).groups == []


def test_without_blocking_a_busy_core_takes_nothing_and_says_so(shell) -> None:
    group = group_in(2)
    slot = shell.coordinatorship.slot_for(group, PARTITIONS)
    with slot.io:   # a load (or the log cleaner's partition lock) holds the core
        assert shell.offset_commit(commit(group, 3), block=False) is None
        assert shell.describe_groups(m.DescribeGroupsRequest([group, group_in(0)]), block=False) is None
        assert shell.offset_fetch(m.OffsetFetchRequest(group_in(3)), block=False).result(5).error_code == \
            errors.NOT_COORDINATOR    # no core here: answered at once, nothing to wait for
    assert shell.offset_fetch(m.OffsetFetchRequest(group), block=False).result(5).partitions == []
    assert shell.offset_commit(commit(group, 3), block=False).result(5).partitions == [("t", 0, errors.NONE)]
