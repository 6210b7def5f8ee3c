"""A leader's Fetch handler: followers' and consumers' fetches, long polls, fetch sessions.

The shell around the replication cores for a Fetch request: it holds the
locks, parks the long poll and moves the bytes.  Every rule is a core's:
a follower's fetch and an idle session partition go to
:class:`replication.partition.PartitionReplication`, the session's
bookkeeping to :class:`replication.fetch_session.LeaderSessions`, and which
partitions a parked fetch waits for and which go into the answer to
:func:`replication.fetch_session.readable` and :func:`has_news`.  The replica
manager hands it what it uses, explicitly.
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping

from kafkacommon import errors
from node.clock import now_ms
from node.storage.log import OffsetOutOfRangeError
from node.replicas.purgatory import run_callbacks
from node.server.wire import fetch_message, partition_fetch
from proto import kafkasim_pb2 as pb
from replication.fetch_session import LeaderSessions, PartitionFetch, has_news, readable
from replication.partition import AlterIsrProposal

if TYPE_CHECKING:
    from node.replicas.hosted import Hosted


TP = tuple[str, int]
Event = tuple[str, dict[str, Any]]


class LeaderFetchHandler:
    """Answers Fetch requests for the partitions this broker leads.

    ``hosted``: the broker's partitions (read, never changed here); ``sessions`` (guarded by
    ``sessions_lock``); ``data``: the condition notified on every append or HW move, which parked
    fetches wait on; ``stopping``: set when the broker stops; ``log_events``, ``wake`` (with a
    partition's lock held: the acks=all waiters the HW now covers, into the list it is given, whose
    callbacks this handler runs once the lock is let go) and ``send_alter_isr``: the replica
    manager's.
    """

    def __init__(self, hosted: Mapping[TP, "Hosted"], sessions: LeaderSessions, sessions_lock: threading.Lock,
                 data: threading.Condition, stopping: threading.Event,
                 log_events: Callable[[list[Event]], None], wake: Callable[["Hosted", list], None],
                 send_alter_isr: Callable[["Hosted", AlterIsrProposal], None]) -> None:
        self.hosted = hosted
        self.sessions = sessions
        self._sessions_lock = sessions_lock
        self._data = data
        self._stopping = stopping
        self._log_events = log_events
        self._wake = wake
        self._send_alter_isr = send_alter_isr
        self._parked: dict[int, int] = {}   # replica id (-1: consumers) -> fetches now in their long poll

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
        follower = req.replica_id >= 0
        deadline = time.monotonic() + max(req.max_wait_ms, 0) / 1000
        listed = list(req.partitions)
        idle: list[tuple[PartitionFetch, "Hosted"]] = []   # session partitions with nothing to record
        session_id = 0
        if follower:
            with self._sessions_lock:
                code, session = self.sessions.open(
                    req.replica_id, req.session_id, req.session_epoch,
                    [((fp.topic, fp.partition), partition_fetch(fp)) for fp in listed],
                    [(tp.topic, tp.partition) for tp in req.forgotten])
                unlisted = [] if session is None else list(session.partitions.items())
            if code != errors.NONE:
                return pb.FetchResponse(error_code=code)
            if session is not None:
                session_id = session.id
                mine = {(fp.topic, fp.partition) for fp in listed}
                now = now_ms()
                for tp, pf in unlisted:
                    if tp in mine:
                        continue
                    h = self.hosted.get(tp)
                    # no lock: an append racing this only makes the fetch look a moment older
                    if h is not None and h.repl.on_idle_follower_fetch(
                            req.replica_id, pf.fetch_offset, pf.current_leader_epoch, h.log.log_end_offset, now):
                        idle.append((pf, h))
                    else:
                        listed.append(fetch_message(tp, pf))
        answers: list[pb.FetchPartitionResponse] = []
        pending: list[tuple[pb.FetchPartition, "Hosted"]] = []
        proposals: list[tuple["Hosted", AlterIsrProposal]] = []
        acked: list = []   # acks=all waiters this fetch's position completes
        for fp in listed:
            h = self.hosted.get((fp.topic, fp.partition))
            if h is None or not h.repl.is_leader:
                answers.append(self._error(fp, errors.NOT_LEADER_OR_FOLLOWER))
                continue
            with h.cond:
                if follower:
                    out = h.repl.on_follower_fetch(req.replica_id, fp.fetch_offset, fp.last_fetched_epoch,
                                                   fp.current_leader_epoch, h.log, now_ms())
                    self._log_events(out.events)
                    self._wake(h, acked)  # the HW may have moved: acks=all waiters now done
                    if out.alter_isr is not None:
                        proposals.append((h, out.alter_isr))
                    if out.error != errors.NONE or out.diverging_epoch is not None or out.read_offset is None:
                        a = self._error(fp, out.error, h)
                        if out.diverging_epoch is not None:
                            a.diverging_epoch, a.diverging_end_offset = out.diverging_epoch
                        answers.append(a)
                        continue
                pending.append((fp, h))
        run_callbacks(acked)   # outside every partition lock, before this fetch parks
        for h, proposal in proposals:
            self._send_alter_isr(h, proposal)

        def ready() -> bool:
            return (any(readable(fp.fetch_offset, h.log.log_end_offset, h.repl.high_watermark, h.repl.is_leader,
                                 follower) for fp, h in pending)
                    or any(readable(pf.fetch_offset, h.log.log_end_offset, h.repl.high_watermark, h.repl.is_leader,
                                    True) for pf, h in idle))

        # Kafka answers at once when any partition has an error or a diverging epoch (a follower
        # must truncate before it fetches on); otherwise it long-polls while nothing is readable
        urgent = bool(answers)
        with self._data:
            self._parked[req.replica_id] = self._parked.get(req.replica_id, 0) + 1
            try:
                while (pending or idle) and not urgent and not ready() and not self._stopping.is_set():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._data.wait(remaining)
            finally:
                self._parked[req.replica_id] -= 1
        for fp, h in pending:
            a = self._read_answer(fp, h, follower)
            if a is not None:
                answers.append(a)
        for pf, h in idle:
            # news since the follower last listed it: records, a new HW, or the leadership gone
            if has_news(pf, h.log.log_end_offset, h.repl.high_watermark, h.repl.is_leader):
                a = self._read_answer(fetch_message((h.repl.topic, h.repl.partition), pf), h, follower)
                if a is not None:
                    answers.append(a)
        return pb.FetchResponse(error_code=errors.NONE, partitions=answers, session_id=session_id)

    def _read_answer(self, fp: pb.FetchPartition, h: "Hosted", follower: bool) -> pb.FetchPartitionResponse | None:
        """One partition's answer after the long poll (None: nothing new for this follower)."""
        with h.cond:
            if not h.repl.is_leader or h.log.closed:
                return self._error(fp, errors.NOT_LEADER_OR_FOLLOWER)
            hw = h.repl.high_watermark
            if follower and not has_news(partition_fetch(fp), h.log.log_end_offset, hw, True):
                return None  # nothing new for this follower: left out of the answer (KIP-227)
            try:
                data = h.log.read(fp.fetch_offset, fp.max_bytes or 1 << 20, None if follower else hw)
            except OffsetOutOfRangeError:
                return self._error(fp, errors.OFFSET_OUT_OF_RANGE, h)
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
