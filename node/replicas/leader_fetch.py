"""A leader's Fetch handler: followers' and consumers' fetches, long polls, fetch sessions.

The shell around the replication cores for a Fetch request: it holds the
locks, parks the long poll and moves the bytes.  Every rule and every step's
order is a core's: the session's bookkeeping is
:class:`replication.fetch_session.LeaderSessions`', and a fetch goes from its
arrival to its answer through :class:`replication.long_poll.LeaderFetch` (the
positions recorded by :class:`replication.partition.PartitionReplication`, the
wait, which partitions the answer carries), as the simulator's fetches do.
The replica manager hands it what it uses, explicitly.
"""
from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from kafkacommon import errors
from node.clock import now_ms
from node.storage.errors import KafkaStorageError
from node.storage.log import OffsetOutOfRangeError
from node.replicas.purgatory import run_callbacks
from node.net.wire import fetch_message, partition_fetch
from proto import kafkasim_pb2 as pb
from replication import long_poll
from replication.fetch_session import LeaderSessions
from replication.long_poll import LeaderFetch, Part
from replication.partition_types import AlterIsrProposal

if TYPE_CHECKING:
    from node.replicas.hosted import Hosted


TP = tuple[str, int]
Event = tuple[str, dict[str, Any]]

#: how many times, and how far apart, a fetch on the loop tries its partitions' locks again before a pool thread
#: waits for them (:meth:`LeaderFetchHandler._hold_soon`): about 2 ms in all
HOLD_RETRIES = 4
HOLD_RETRY_S = 0.0005


class LeaderFetchHandler:
    """Answers Fetch requests for the partitions this broker leads.

    ``hosted``: the broker's partitions (read, never changed here); ``sessions`` (guarded by
    ``sessions_lock``); ``data``: the condition notified on every append or HW move, which parked
    fetches wait on; ``stopping``: set when the broker stops; ``log_events``, ``wake`` (with a
    partition's lock held: the acks=all waiters the HW now covers, into the list it is given, whose
    callbacks this handler runs once the lock is let go) and ``send_alter_isr``: the replica
    manager's; ``offline``: whether a partition this broker does not host is offline (its log
    directory failed): it answers KAFKA_STORAGE_ERROR.
    """

    def __init__(self, hosted: Mapping[TP, "Hosted"], sessions: LeaderSessions, sessions_lock: threading.Lock,
                 data: threading.Condition, stopping: threading.Event,
                 log_events: Callable[[list[Event]], None], wake: Callable[["Hosted", list], None],
                 send_alter_isr: Callable[["Hosted", AlterIsrProposal], None],
                 offline: Callable[[TP], bool] = lambda tp: False) -> None:
        self.hosted = hosted
        self._offline = offline
        self.sessions = sessions
        self._sessions_lock = sessions_lock
        self._data = data
        self._stopping = stopping
        self._log_events = log_events
        self._wake = wake
        self._send_alter_isr = send_alter_isr
        self._parked: dict[int, int] = {}   # replica id (-1: consumers) -> fetches now in their long poll
        self._async_waiters: set[_Waker] = set()  # long polls parked as coroutines, guarded by data

    def parked(self) -> dict[int, int]:
        """Followers' fetches now long-polling here, per follower broker."""
        with self._data:
            return {r: n for r, n in self._parked.items() if n and r >= 0}

    def fetch(self, req: pb.FetchRequest) -> pb.FetchResponse:
        """Answer a follower's (replica_id >= 0) or a consumer's fetch for many partitions.

        A follower's position is recorded first (it moves the HW and may
        expand the ISR); then, while no partition has anything to return, the
        request long-polls up to max_wait_ms.  Followers read up to the LEO,
        consumers up to the HW.  A follower's request belongs to a fetch
        session (``replication.fetch_session``): the session's partitions it did not
        list are fetched again where it last listed them, and answered only
        when they have news.
        """
        f = self._begin(req)
        if isinstance(f, pb.FetchResponse):
            return f
        self._begun(f)
        with self._data:
            self._parked[req.replica_id] = self._parked.get(req.replica_id, 0) + 1
            try:
                while f.waits() and not self._stopping.is_set():
                    remaining = f.deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._data.wait(remaining)
            finally:
                self._parked[req.replica_id] -= 1
        return self._complete(f)

    async def fetch_async(self, req: pb.FetchRequest, executor: Executor | None = None) -> pb.FetchResponse:
        """:meth:`fetch` for a handler on an event loop (the broker's gRPC loop): the same answer,
        its long poll parked as a coroutine rather than a thread of the pool, so a follower's
        fetch costs no hand-off to a worker thread and back.  Its partitions' locks are only taken
        on the loop when they are all free at once (a log cleaner pass or a coordinator's load may
        hold one a while); otherwise that part of the fetch runs on ``executor``."""
        loop = asyncio.get_running_loop()
        held = await self._hold_soon(self._partitions_of(req))
        if held is None:
            return await loop.run_in_executor(executor, self.fetch, req)
        try:
            f = self._begin(req)
        finally:
            for lock in held:
                lock.release()
        if isinstance(f, pb.FetchResponse):
            return f
        self._begun(f)
        if not f.core.urgent:   # the long poll asks whether it still waits before it parks
            await self._park(req.replica_id, f)
        held = await self._hold_soon([part.handle for part in f.core.parts() + f.core.ahead
                                      if part.handle is not None])
        if held is None:
            return await loop.run_in_executor(executor, self._complete, f)
        try:
            answer = self._finish(f)
        finally:
            for lock in held:
                lock.release()
        self._begun(f)   # what the ahead partitions' positions did
        return answer

    def _partitions_of(self, req: pb.FetchRequest) -> list["Hosted"]:
        """The hosted partitions a fetch's first part locks: those it lists or forgets and, of its session's,
        those it will look at (not bound to the session's clock, or touched since: ``LeaderSession.dirty`` and
        its clock's inbox; in no particular order: :meth:`_hold` never waits for a lock, and a partition
        touched after this is locked when it is looked at)."""
        hosted = self.hosted
        tps = {(fp.topic, fp.partition) for fp in req.partitions}
        if req.replica_id >= 0:
            tps.update((tp.topic, tp.partition) for tp in req.forgotten)
            with self._sessions_lock:
                session = self.sessions.get(req.replica_id)
                if session is not None:
                    tps.update(list(session.dirty))
                    tps.update(list(session.clock.inbox))
        return [h for tp in tps if (h := hosted.get(tp)) is not None]

    async def _hold_soon(self, parts: list["Hosted"]) -> list[Any] | None:
        """:meth:`_hold`, tried again on the loop a few times (``HOLD_RETRIES``, ``HOLD_RETRY_S`` apart) while a
        lock is busy, before the caller hands the fetch to a pool thread that waits for each lock in turn.  A
        partition's lock is held briefly (a new leader epoch's take-up renames its prepared checkpoint under it;
        an append): a fetch that finds one held mostly finds it free a fraction of a millisecond later, and the
        hand-off to a pool thread and back (and, when the pool starts a thread, the loop's wait in its start)
        costs the loop and the fetch far more under load (issue 49).  Nothing else changes: the same locks,
        taken together, and the same steps in the same order."""
        held = self._hold(parts)
        for _ in range(HOLD_RETRIES):
            if held is not None:
                break
            await asyncio.sleep(HOLD_RETRY_S)
            held = self._hold(parts)
        return held

    @staticmethod
    def _hold(parts: list["Hosted"]) -> list[Any] | None:
        """Every partition's lock taken without waiting, or None (and none held) when one is busy."""
        held: list[Any] = []
        for h in parts:
            if not h.cond.acquire(blocking=False):
                for lock in held:
                    lock.release()
                return None
            held.append(h.cond)
        return held

    async def _park(self, replica_id: int, f: "_Fetch") -> None:
        """The long poll as a coroutine, if the fetch waits: woken by :meth:`notify_async` on every append or
        HW move (a future per wake-up, set from the notifying thread; a timer at the deadline)."""
        loop = asyncio.get_running_loop()
        waker = _Waker(loop)
        with self._data:
            if self._stopping.is_set() or not f.waits():
                return
            timer = loop.call_later(max(f.deadline - time.monotonic(), 0), waker.expire)
            self._parked[replica_id] = self._parked.get(replica_id, 0) + 1
            self._async_waiters.add(waker)
            woken = waker.arm()
        try:
            while True:
                await woken
                if self._stopping.is_set() or waker.expired:
                    break
                with self._data:
                    if not f.waits():
                        break
                    woken = waker.arm()
        finally:
            timer.cancel()
            with self._data:
                self._async_waiters.discard(waker)
                self._parked[replica_id] -= 1

    def notify_async(self) -> None:
        """With ``data`` held, after its ``notify_all``: wake the long polls parked as coroutines."""
        for waker in self._async_waiters:
            waker.wake_threadsafe()

    def _begin(self, req: pb.FetchRequest) -> "_Fetch | pb.FetchResponse":
        """A fetch's first part, which never waits (``replication.long_poll.LeaderFetch``'s steps 1 and 2): a
        follower's positions recorded (the HW moved, acks=all waiters completed, ISR expansions to send),
        the partitions to answer."""
        follower = req.replica_id >= 0
        f = LeaderFetch(follower, long_poll.deadline_ms(time.monotonic() * 1000, req.max_wait_ms))
        waits_for_epoch = f.waits_for_epoch
        hosted = self.hosted
        listed = [Part(tp, hosted.get(tp), partition_fetch(fp))
                  for fp in req.partitions for tp in ((fp.topic, fp.partition),)]
        if follower:
            with self._sessions_lock:
                code, session = self.sessions.open(req.replica_id, req.session_id, req.session_epoch,
                                                   [(part.tp, part.fetch) for part in listed],
                                                   [(tp.topic, tp.partition) for tp in req.forgotten])
            if code != errors.NONE:
                return pb.FetchResponse(error_code=code)
            if session is not None:
                f.session_id = session.id
                for tp in f.open_session(session, [part.tp for part in listed],
                                         [(tp.topic, tp.partition) for tp in req.forgotten]):
                    h = self.hosted.get(tp)
                    # (only this follower's fetches bind its replica: one found unbound stays so meanwhile)
                    if h is not None and h.repl.follower_bound(req.replica_id):
                        with h.cond:
                            h.repl.release_follower(req.replica_id)
                now = now_ms()
                unlisted, replica_id = f.unlisted, req.replica_id
                for tp, pf in f.stamp(now):
                    h = hosted.get(tp)
                    part = Part(tp, h, pf)
                    if h is None:
                        listed.append(part)
                        continue
                    with h.cond:
                        if not unlisted(part, replica_id, h.repl, h.log, now):
                            listed.append(part)
        acked: list = []   # acks=all waiters this fetch's position completes
        record, pending, log_events, wake, replica_id = f.record, f.pending, self._log_events, self._wake, req.replica_id
        for part in listed:
            h = part.handle
            if h is None:
                f.not_leader(part, self._offline(part.tp))
                continue
            repl = h.repl
            if follower and waits_for_epoch(part, repl):
                continue   # parked until this broker reaches the epoch the follower names
            if not repl.is_leader:
                f.not_leader(part, False)
                continue
            with h.cond:
                if follower:
                    hw = repl.high_watermark
                    out = record(part, replica_id, repl, h.log, now_ms())
                    if out.events:
                        log_events(out.events)
                    # the HW moved (the core then touched the partition itself) or the ISR may grow: acks=all
                    # waiters now done; nothing else a waiter or another follower's session reads moved
                    if h.waiters or repl.high_watermark != hw or out.alter_isr is not None:
                        wake(h, acked)
                else:
                    pending.append(part)
        return _Fetch(f, acked, req.replica_id)

    def _begun(self, f: "_Fetch") -> None:
        """After the first part (and again after the answer's, for the *ahead* partitions' positions), outside
        every partition lock: the acks=all callbacks the positions completed, the wake-up of long polls when
        the HW moved (consumers' wait for it: Kafka completes their delayed fetches), the ISR expansions sent;
        each once."""
        core = f.core
        acked, f.acked = f.acked, []
        run_callbacks(acked)
        if core.hw_moved:
            core.hw_moved = False
            with self._data:
                self._data.notify_all()
                self.notify_async()
        proposals, core.proposals = core.proposals, []
        for h, proposal in proposals:
            self._send_alter_isr(h, proposal)

    def _complete(self, f: "_Fetch") -> pb.FetchResponse:
        """:meth:`_finish`, then what its *ahead* partitions' positions did (:meth:`_begun`)."""
        answer = self._finish(f)
        self._begun(f)
        return answer

    def _finish(self, f: "_Fetch") -> pb.FetchResponse:
        """A fetch's last part, after its long poll (``LeaderFetch.answers``): the answers read."""
        core = f.core
        answers = [self._answered(part, out) for part, out in core.answered]
        answer, follower = core.answer, core.follower
        for part in core.parts():
            h = part.handle
            if h is None:
                answers.append(self._error(fetch_message(part.tp, part.fetch), errors.NOT_LEADER_OR_FOLLOWER))
                continue
            with h.cond:
                log = h.log
                code = answer(part, h.repl, log, not log.closed, log.failed)
                if code is not None:   # (None: nothing new, left out; most of an idle follower's session)
                    fp = fetch_message(part.tp, part.fetch)
                    answers.append(self._read(fp, h, follower) if code == errors.NONE else self._error(fp, code))
        for part in core.ahead:
            answers.append(self._late(f, part))
        return pb.FetchResponse(error_code=errors.NONE, partitions=answers, session_id=core.session_id)

    def _late(self, f: "_Fetch", part: Part) -> pb.FetchPartitionResponse:
        """An *ahead* partition after the wait (``LeaderFetch.record_late``): the follower's position recorded
        now, and the partition answered as on arrival (the acks=all waiters it completes go to ``f.acked``)."""
        h = part.handle
        fp = fetch_message(part.tp, part.fetch)
        with h.cond:
            if h.log.closed or self.hosted.get(part.tp) is not h:
                return self._error(fp, errors.KAFKA_STORAGE_ERROR if h.log.failed else errors.NOT_LEADER_OR_FOLLOWER)
            out = f.core.record_late(part, f.replica_id, h.repl, h.log, now_ms())
            self._log_events(out.events)
            self._wake(h, f.acked)
            return self._read(fp, h, True) if long_poll.reads(out) else self._answered(part, out)

    def _answered(self, part: Part, out) -> pb.FetchPartitionResponse:
        """A partition answered when the fetch arrived: its error, or its diverging epoch."""
        a = self._error(fetch_message(part.tp, part.fetch), out.error, part.handle)
        if out.diverging_epoch is not None:
            a.diverging_epoch, a.diverging_end_offset = out.diverging_epoch
        return a

    def _read(self, fp: pb.FetchPartition, h: "Hosted", follower: bool) -> pb.FetchPartitionResponse:
        """With ``h.cond`` held: one partition's records from its fetch offset (up to the HW for a consumer)."""
        hw = h.repl.high_watermark
        try:
            data = h.log.read(fp.fetch_offset, fp.max_bytes or 1 << 20, None if follower else hw)
        except OffsetOutOfRangeError:
            return self._error(fp, errors.OFFSET_OUT_OF_RANGE, h)
        except KafkaStorageError:
            return self._error(fp, errors.KAFKA_STORAGE_ERROR)
        return pb.FetchPartitionResponse(
            topic=fp.topic, partition=fp.partition, error_code=errors.NONE, high_watermark=hw,
            log_start_offset=h.log.log_start_offset, log_end_offset=h.log.log_end_offset,
            records=bytes(data), diverging_epoch=-1, leader_epoch=h.repl.leader_epoch)

    @staticmethod
    def _error(fp: pb.FetchPartition, code: int, h: "Hosted | None" = None) -> pb.FetchPartitionResponse:
        a = pb.FetchPartitionResponse(topic=fp.topic, partition=fp.partition, error_code=code, diverging_epoch=-1)
        if h is not None:
            a.high_watermark, a.log_end_offset = h.repl.high_watermark, h.log.log_end_offset
            a.log_start_offset = h.log.log_start_offset  # a follower behind it starts over there
            a.leader_epoch = h.repl.leader_epoch
        return a


def _wait_state(h: "Hosted | None"):
    """``LeaderFetch.waits``' view of a replica."""
    return None if h is None else (h.repl, h.log)


@dataclass
class _Fetch:
    """A fetch between its first part and its answer: ``replication.long_poll.LeaderFetch`` and the acks=all
    waiters its positions completed."""
    core: LeaderFetch
    acked: list = field(default_factory=list)
    replica_id: int = -1

    def waits(self) -> bool:
        """Whether the long poll goes on (replication.long_poll's rule)."""
        return self.core.waits(_wait_state)

    @property
    def deadline(self) -> float:
        """time.monotonic() at max_wait_ms."""
        return self.core.deadline_ms / 1000

    @property
    def pending(self) -> list:
        return [(part.fetch, part.handle) for part in self.core.pending]

    @property
    def idle(self) -> list:
        return [(part.fetch, part.handle) for part in self.core.idle]


class _Waker:
    """Wakes one parked coroutine from any thread: the future it awaits now (``arm``) is set.  Wake-ups asked
    for while one is already on its way to the loop ride on that one (the woken poll reads whatever was appended
    before it runs): one hand-off to the loop per wake-up, not one per append (issue 49)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._fut: asyncio.Future | None = None
        self._waking = False   # a wake-up is on its way to the loop (set under ``data``; cleared on the loop)
        self.expired = False   # the long poll's max_wait_ms has passed

    def arm(self) -> asyncio.Future:
        """On the loop, with ``data`` held: a new future to await until the next wake-up."""
        self._fut = self.loop.create_future()
        return self._fut

    def expire(self) -> None:
        """On the loop, at the deadline."""
        self.expired = True
        self.wake()

    def wake(self) -> None:
        """On the loop."""
        fut = self._fut
        if fut is not None and not fut.done():
            fut.set_result(None)

    def wake_threadsafe(self) -> None:
        """From any thread, with ``data`` held."""
        if self._fut is not None and not self._fut.done() and not self._waking:
            self._waking = True
            try:
                self.loop.call_soon_threadsafe(self._woken)
            except RuntimeError:   # the loop is closed: the broker is stopping
                self._waking = False

    def _woken(self) -> None:
        """On the loop: the wake-up asked for from another thread (the flag first, so a later append asks anew)."""
        self._waking = False
        self.wake()
