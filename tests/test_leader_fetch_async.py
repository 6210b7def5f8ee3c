"""The followers' Fetch on the broker's gRPC event loop (``LeaderFetchHandler.fetch_async``): real logs on
disk, no cluster, an event loop of the test's own."""
from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from kafkacommon import errors
from kafkacommon.batch_scan import iter_batches
from kafkacommon.record_batch import encode_batch
from node.events import EventLog
from node.replicas import leader_fetch
from node.replicas.replica_manager import ReplicaManager
from replication.broker_state import PartitionInfo
from proto import kafkasim_pb2 as pb
from replication.partition_types import ReplicaSettings

TP = ("t", 0)
WAIT_S = 30   # a deadline: every wait below ends far sooner, unless a wake-up is missing


def manager(tmp_path: Path) -> ReplicaManager:
    rm = ReplicaManager(1, tmp_path / "logs", ReplicaSettings(), EventLog(tmp_path / "events.jsonl", 1),
                        broker_epoch=lambda: 5, endpoint_of=lambda b: None, controller_endpoint=lambda: None,
                        fetch_wait_ms=100, segment_bytes=1 << 20, checkpoint_interval_ms=60_000)
    rm.apply_leader_and_isrs([PartitionInfo("t", 0, 1, 0, (1, 2), (1, 2), 0, 1)])
    return rm


def fetch(replica_id: int, offset: int, max_wait_ms: int = 0) -> pb.FetchRequest:
    return pb.FetchRequest(replica_id=replica_id, replica_epoch=7, max_wait_ms=max_wait_ms, partitions=[
        pb.FetchPartition(topic="t", partition=0, fetch_offset=offset, last_fetched_epoch=0 if offset else -1,
                          current_leader_epoch=0, max_bytes=1 << 20)])


def test_a_followers_fetch_on_the_loop_completes_acks_all_and_wakes_a_consumer_waiting_for_the_hw(tmp_path):
    """The fetch that moves the HW runs a produce request's callback itself (no hand-off to the
    purgatory's thread), leaves the coordinator's (which takes its core's lock) to that thread, and
    wakes a consumer's fetch parked at the old HW, as Kafka completes its delayed fetch."""
    rm = manager(tmp_path)
    done: dict[str, tuple[int, str]] = {}
    coordinator_done = threading.Event()

    def record(name: str):
        def on_done(code: int) -> None:
            done[name] = (code, threading.current_thread().name)
            if name == "coordinator":
                coordinator_done.set()
        return on_done

    async def scenario() -> tuple[pb.FetchResponse, pb.FetchResponse, str]:
        loop_thread = threading.current_thread().name
        batch = encode_batch(0, 0, [(None, b"listener", 1)])
        assert rm.append_batch(TP, batch, 1, 1, -1, 30_000, record("listener"))[:4] == (0, 0, 0, True)
        assert rm.append(TP, [(None, b"coordinator", None)], -1, 30_000, record("coordinator")) is None
        # a consumer long-polls at offset 0: nothing below the HW (0) yet
        consumer = asyncio.ensure_future(rm.fetch_async(fetch(-1, 0, max_wait_ms=600_000)))
        await asyncio.sleep(0)
        assert rm.parked_fetches() == {} and not consumer.done()   # parked (consumers are not counted)
        # follower 2 has both records: its fetch moves the HW to 2 (ISR 1, 2)
        answer = await asyncio.wait_for(rm.fetch_async(fetch(2, 2)), WAIT_S)
        return answer, await asyncio.wait_for(consumer, WAIT_S), loop_thread

    try:
        answer, consumed, loop_thread = asyncio.run(scenario())
        assert answer.error_code == 0
        assert done["listener"] == (0, loop_thread)   # completed by the fetch itself
        assert coordinator_done.wait(WAIT_S)
        assert done["coordinator"] == (0, "produce-purgatory")
        [part] = consumed.partitions
        assert part.error_code == 0 and part.high_watermark == 2 and part.records
    finally:
        rm.close()


def test_a_fetch_on_the_loop_waits_for_a_busy_partition_lock_on_the_executor(tmp_path):
    """A log cleaner pass or a coordinator's load may hold a partition's lock a while: the loop
    (which also serves the group APIs) must not wait for it.  The fetch goes to the executor, the
    loop keeps running, and the answer is the one the lock's release allows."""
    rm = manager(tmp_path)
    assert rm.append(TP, [(None, b"v", None)], 1, 1000, lambda e: None) == (0, 0, 0)
    try:
        with ThreadPoolExecutor(1) as pool:
            answer = fetch_while_locked(rm, pool)
        [part] = answer.partitions
        assert part.error_code == 0 and part.records and part.high_watermark == 0
    finally:
        rm.close()


def test_a_fetch_on_the_loop_that_finds_a_lock_held_briefly_tries_again_on_the_loop(tmp_path, monkeypatch):
    """A new leader epoch's take-up holds its partition's lock only for a rename: a fetch that finds it held
    tries again on the loop (``_hold_soon``) before it hands itself to a pool thread.  Its retries made
    unbounded here, the fetch waits on the loop (which keeps turning), takes the lock once it is let go, and
    is answered with what the release allows, with no pool thread used."""
    monkeypatch.setattr(leader_fetch, "HOLD_RETRIES", 1_000_000)
    rm = manager(tmp_path)
    assert rm.append(TP, [(None, b"v", None)], 1, 1000, lambda e: None) == (0, 0, 0)
    submitted: list[object] = []

    class CountingPool(ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):
            submitted.append(fn)
            return super().submit(fn, *args, **kwargs)

    try:
        with CountingPool(1) as pool:
            answer = fetch_while_locked(rm, pool)
        [part] = answer.partitions
        assert part.error_code == 0 and part.records and part.high_watermark == 0
        assert submitted == []
    finally:
        rm.close()


def fetch_while_locked(rm: ReplicaManager, pool: ThreadPoolExecutor) -> pb.FetchResponse:
    """A follower's fetch on a loop whose pool is ``pool``, while another thread holds the partition's lock: the
    loop turns 20 times and the fetch must still be waiting; then the lock is let go and its answer awaited."""
    with lock_held(rm.partition_lock(TP)) as release:

        async def scenario() -> pb.FetchResponse:
            pending = asyncio.ensure_future(rm.fetch_async(fetch(2, 0)))
            for _ in range(20):   # the loop turns while the fetch waits for the lock (on the loop or in the pool)
                await asyncio.sleep(0.001)
            assert not pending.done()
            release.set()
            return await asyncio.wait_for(pending, WAIT_S)

        return asyncio.run(scenario_with(pool, scenario))


@contextmanager
def lock_held(lock) -> Iterator[threading.Event]:
    """``lock`` held by another thread until the event it yields is set (or the block ends)."""
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with lock:
            held.set()
            release.wait(WAIT_S)
    t = threading.Thread(target=holder)
    t.start()
    assert held.wait(WAIT_S)
    try:
        yield release
    finally:
        release.set()
        t.join(WAIT_S)


async def scenario_with(pool: ThreadPoolExecutor, scenario):
    asyncio.get_running_loop().set_default_executor(pool)
    return await scenario()


def test_a_fetch_parked_on_the_loop_with_nothing_to_read_is_answered_at_max_wait(tmp_path):
    rm = manager(tmp_path)

    async def scenario() -> pb.FetchResponse:
        return await asyncio.wait_for(rm.fetch_async(fetch(2, 0, max_wait_ms=50)), WAIT_S)

    try:
        answer = asyncio.run(scenario())
        assert answer.error_code == 0 and answer.partitions == []   # nothing new for the follower
        assert rm.parked_fetches() == {}
    finally:
        rm.close()


def test_the_purgatory_times_out_a_waiter_the_hw_did_not_reach_and_never_one_it_completed(tmp_path):
    """The purgatory's timer drops the waiters a follower's fetch completed (``AckWaiter.settled``) without
    their partition's lock: each acks=all append gets exactly one outcome, NONE for the one the HW covered
    and REQUEST_TIMED_OUT at its deadline for the one it did not."""
    rm = manager(tmp_path)
    outcomes: dict[str, list[int]] = {"acked": [], "late": []}
    both = threading.Event()

    def record(name: str):
        def on_done(code: int) -> None:
            outcomes[name].append(code)
            if outcomes["acked"] and outcomes["late"]:
                both.set()
        return on_done

    try:
        assert rm.append(TP, [(None, b"a", None)], -1, 200, record("acked"), inline=True) is None
        assert rm.fetch(fetch(2, 1)).error_code == 0           # follower 2 has offset 0: the HW moves to 1
        assert rm.append(TP, [(None, b"b", None)], -1, 200, record("late"), inline=True) is None
        assert both.wait(WAIT_S)                               # no fetch reaches offset 1: it times out
        # the first waiter's deadline came before the second's: had the timer not dropped it, its second
        # outcome would have come first
        assert outcomes == {"acked": [errors.NONE], "late": [errors.REQUEST_TIMED_OUT]}
    finally:
        rm.close()


def test_a_parked_follower_fetch_wakes_for_a_wake_later_append_only_at_wake_fetches(tmp_path):
    """Group commit (issue 49): an append made with ``wake_later`` leaves the follower's parked fetch parked
    until ``wake_fetches``; two appends before the loop runs again reach the follower in one answer."""
    rm = manager(tmp_path)

    async def turns(n: int = 10) -> None:   # the loop runs its ready callbacks n times (no timing involved)
        for _ in range(n):
            await asyncio.sleep(0)

    async def scenario() -> tuple[pb.FetchResponse, pb.FetchResponse]:
        parked = asyncio.ensure_future(rm.fetch_async(fetch(2, 0, max_wait_ms=600_000)))
        await turns()
        assert rm.parked_fetches() == {2: 1}
        assert rm.append(TP, [(None, b"a", None)], 1, 1000, lambda e: None, wake_later=True) == (0, 0, 0)
        await turns()
        assert not parked.done()            # not woken by the append itself
        rm.wake_fetches()
        first = await asyncio.wait_for(parked, WAIT_S)
        rm.wake_fetches()                   # nothing owed: a no-op
        again = asyncio.ensure_future(rm.fetch_async(fetch(2, 1, max_wait_ms=600_000)))
        await turns()
        assert rm.parked_fetches() == {2: 1}
        # two ordinary appends before the loop turns: one wake-up on its way, both records in its answer
        assert rm.append(TP, [(None, b"b", None)], 1, 1000, lambda e: None) == (0, 1, 1)
        assert rm.append(TP, [(None, b"c", None)], 1, 1000, lambda e: None) == (0, 2, 2)
        return first, await asyncio.wait_for(again, WAIT_S)

    try:
        first, second = asyncio.run(scenario())
        [p1] = first.partitions
        assert p1.error_code == 0 and p1.records and p1.log_end_offset == 1
        [p2] = second.partitions
        assert p2.error_code == 0 and p2.log_end_offset == 3
        assert [b.base_offset for _, b in iter_batches(p2.records)] == [1, 2]
    finally:
        rm.close()
