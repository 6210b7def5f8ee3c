"""The group coordinator's door on an event loop (node/server/groups_servicer.py ``GroupsDoor``), with a shell of
the test's own: answers handed over from other threads, the safety-net deadline, and the one wake-up of the
followers' fetches per turn of the loop (issue 49's group commit)."""
from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

from coordinator import messages as m
from kafkacommon import errors
from node.server import groups_servicer
from node.server.groups_servicer import GroupsDoor
from node.shells.coordinator_shell import Answer

WAIT_S = 30


class Shell:
    """``offset_commit`` hands back an unanswered Answer per request (kept in ``asked``); ``wake_fetches`` counts."""

    def __init__(self, commit_timeout_ms: int) -> None:
        self.config = SimpleNamespace(commit_timeout_ms=commit_timeout_ms)
        self.broker_id = 1
        self.asked: list[tuple[m.OffsetCommitRequest, Answer]] = []
        self.wakes = 0

    def offset_commit(self, req: m.OffsetCommitRequest, block: bool = True) -> Answer:
        a = Answer()
        self.asked.append((req, a))
        return a

    def wake_fetches(self) -> None:
        self.wakes += 1


def commit(group: str) -> m.OffsetCommitRequest:
    return m.OffsetCommitRequest(group_id=group, generation_id=-1, member_id="", group_instance_id=None,
                                 retention_time_ms=-1, offsets=[m.CommitOffset("t", 0, 5, -1, "")])


def test_answers_from_another_thread_reach_their_requests_and_an_unanswered_one_gets_not_coordinator(monkeypatch):
    monkeypatch.setattr(groups_servicer, "_EXTRA_WAIT_S", 0.0)
    shell = Shell(commit_timeout_ms=200)
    door = GroupsDoor(state=None, shell=shell)

    async def scenario():
        tasks = [asyncio.ensure_future(door.offset_commit(commit(f"g{i}"))) for i in range(3)]
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(shell.asked) == 3 and not any(t.done() for t in tasks)
        # one wake-up of the followers' fetches for the three requests handed over in one turn
        assert shell.wakes == 1

        def answer() -> None:   # g0 and g2 answered on another thread; g1 never
            for i in (0, 2):
                req, a = shell.asked[i]
                a.set_result(m.OffsetCommitResponse(partitions=[("t", 0, errors.NONE)]))
        t = threading.Thread(target=answer)
        t.start()
        t.join(WAIT_S)
        return await asyncio.wait_for(asyncio.gather(*tasks), WAIT_S)

    r0, r1, r2 = asyncio.run(scenario())
    assert r0.partitions == [("t", 0, errors.NONE)] and r2.partitions == [("t", 0, errors.NONE)]
    assert r1 == commit("g1").error_response(errors.NOT_COORDINATOR)   # its deadline passed, no answer


def test_a_cancelled_request_leaves_no_deadline_behind(monkeypatch):
    """A request cancelled with its connection is settled: the deadline's queue drops it, and a later request's
    deadline is kept."""
    monkeypatch.setattr(groups_servicer, "_EXTRA_WAIT_S", 0.0)
    shell = Shell(commit_timeout_ms=100)
    door = GroupsDoor(state=None, shell=shell)

    async def scenario():
        first = asyncio.ensure_future(door.offset_commit(commit("a")))
        for _ in range(5):
            await asyncio.sleep(0)
        first.cancel()
        second = asyncio.ensure_future(door.offset_commit(commit("b")))
        return await asyncio.wait_for(second, WAIT_S), first

    second, first = asyncio.run(scenario())
    assert first.cancelled()
    assert second == commit("b").error_response(errors.NOT_COORDINATOR)
