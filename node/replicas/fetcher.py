"""A follower's fetcher: one thread per leader broker, long-polling it for every partition followed there.

The thread never dies of an exception: an I/O error in a partition's log (KafkaStorageError) takes its log
directory offline, and the failure handler takes the partition off this fetcher; anything unexpected is
logged as ``fetcher_error`` and the loop backs off and goes on.

A partition whose answer is an error (the leader has not taken it up yet: NOT_LEADER_OR_FOLLOWER,
UNKNOWN_LEADER_EPOCH) is left out of the requests for ``BACKOFF_S``, while the others go on fetching at
once, as Kafka's AbstractFetcherThread delays only its partitions with errors: a new leader processing a
LeaderAndIsr of many partitions one by one would otherwise hold back the partitions it leads already
(their HW, so their acks=all appends) by a backoff per partition it has not reached.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

import grpc

from kafkacommon import errors
from kafkacommon.record_batch import CorruptBatchError
from node.clock import now_ms
from node.storage.errors import KafkaStorageError
from node.storage.log import InvalidAppendError
from node.net.wire import fetch_message
from node.net.peers import peer_channel
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg
from replication.fetch_session import FollowerSession, PartitionFetch
from replication import roles

if TYPE_CHECKING:
    from node.replicas.hosted import FetcherOwner, Hosted

TP = tuple[str, int]
log = logging.getLogger(__name__)
BACKOFF_S = 0.05   # after an error: the whole fetch's, or one partition's


class LeaderFetcher(threading.Thread):
    """A follower's fetch loop towards one leader broker, for every partition it follows there."""

    def __init__(self, rm: "FetcherOwner", leader: int):
        super().__init__(name=f"fetcher-from-{leader}", daemon=True)
        self.rm, self.leader = rm, leader
        self._parts: dict[TP, tuple["Hosted", int]] = {}
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._channel: grpc.Channel | None = None  # only this thread opens it; assign() may close it
        self._polling: set[TP] | None = None  # the partitions of the long poll now parked at the leader
        self._cut = False
        self._session = FollowerSession()  # only this thread uses it
        self._state: dict[TP, tuple["Hosted", PartitionFetch]] = {}  # each partition's position (this thread)
        # partitions whose last answer was an error: (fetch again from, the assignment that failed) (this thread)
        self._delayed: dict[TP, tuple[float, "Hosted", int]] = {}

    def assign(self, tp: TP, h: "Hosted", leader_epoch: int) -> None:
        with self._lock:
            self._parts[tp] = (h, leader_epoch)
            # A partition the parked long poll does not carry would wait up to replica.fetch.wait.max.ms
            # for its first fetch, and a new leader's HW (its acks=all writes, a coordinator's first
            # commit) with it: cut the poll short (closing the channel cancels it) so the next request
            # includes it at once.  Blocking calls on a kept channel are the fast path otherwise.
            if self._polling is not None and tp not in self._polling and self._channel is not None:
                self._cut = True
                self._channel.close()

    def unassign(self, tp: TP) -> None:
        with self._lock:
            self._parts.pop(tp, None)

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        stub, target = None, None
        try:
            while not self._stop_event.is_set():
                with self._lock:
                    parts = dict(self._parts)
                    if self._cut:  # the channel was closed to cut a poll short: open a new one
                        self._cut, stub, target = False, None, None
                endpoint = self.rm.endpoint_of(self.leader)
                if not parts or endpoint is None:
                    self._stop_event.wait(BACKOFF_S)
                    continue
                if endpoint != target or stub is None:
                    with self._lock:
                        if self._channel is not None:
                            self._channel.close()
                        self._channel = peer_channel(endpoint)
                        stub, target = pbg.BrokerStub(self._channel), endpoint
                try:
                    fetched = self._fetch_once(stub, parts)
                except Exception as e:   # a bug, not a fault: say so, and keep fetching the other partitions
                    log.exception("fetcher from broker %d", self.leader)
                    self.rm.events.emit("fetcher_error", leader=self.leader, error=f"{type(e).__name__}: {e}")
                    self._session.reset()
                    fetched = False
                if not fetched:
                    self._stop_event.wait(BACKOFF_S)  # back off after an error
        finally:
            with self._lock:
                if self._channel is not None:
                    self._channel.close()

    def _fetch_once(self, stub: pbg.BrokerStub, parts: dict[TP, tuple["Hosted", int]]) -> bool:
        """One Fetch in this fetcher's session (``replication.fetch_session``): every partition when the
        session is new, else only those whose position changed.  False: back off (an error)."""
        state = self._state
        for tp in [tp for tp in state if tp not in parts]:
            del state[tp]
        now = time.monotonic()
        current: dict[TP, PartitionFetch] = {}
        for tp, (h, epoch) in parts.items():
            delay = self._delayed.get(tp)
            if delay is not None:
                if delay[0] > now and delay[1] is h and delay[2] == epoch:
                    continue     # its last answer was an error: not before its backoff (unless given again)
                del self._delayed[tp]
            known = state.get(tp)
            if known is None or known[0] is not h or known[1].current_leader_epoch != epoch:
                # a partition new to this fetcher (or given again): read its position; after that only
                # this thread moves it (appends, truncations, HW updates), and _apply keeps it current
                with h.cond:
                    if h.log.closed or h.fetching_from != (self.leader, epoch):
                        continue
                    known = state[tp] = (h, self._position(h, epoch))
            current[tp] = known[1]
        if not current:
            return False
        for tp in [tp for tp in self._delayed if tp not in parts]:
            del self._delayed[tp]
        session = self._session
        session_id, session_epoch, listed, forgotten = session.request(current)
        with self._lock:
            if self._cut:
                return True  # a new partition arrived meanwhile: rebuild the request on a new channel
            self._polling = parts.keys()
        try:
            r = stub.Fetch(pb.FetchRequest(
                replica_id=self.rm.broker_id, replica_epoch=self.rm.broker_epoch(), max_wait_ms=self.rm.fetch_wait_ms,
                session_id=session_id, session_epoch=session_epoch,
                partitions=[fetch_message(tp, current[tp]) for tp in listed],
                forgotten=[pb.TopicPartition(topic=t, partition=p) for t, p in forgotten]),
                timeout=self.rm.fetch_wait_ms / 1000 + 5)
        except (grpc.RpcError, ValueError):  # ValueError: the channel was closed under us
            session.reset()  # the leader may or may not have taken it: start over with a full request
            with self._lock:
                return self._cut  # cut short on purpose: fetch again at once, no backoff
        finally:
            with self._lock:
                self._polling = None
        if r.error_code != errors.NONE:
            session.reset()
            # a session the leader no longer has (it restarted, or a request was lost): a full one at once
            return r.error_code in (errors.FETCH_SESSION_ID_NOT_FOUND, errors.INVALID_FETCH_SESSION_EPOCH)
        session.answered(r.session_id, {tp: current[tp] for tp in listed}, forgotten)
        ok = True
        for a in r.partitions:
            tp = (a.topic, a.partition)
            if tp not in current:
                continue
            h, epoch = parts[tp]
            with h.cond:
                # a role change since the request was sent makes this answer stale
                if self._stop_event.is_set() or h.log.closed or h.fetching_from != (self.leader, epoch):
                    state.pop(tp, None)
                    continue
                try:
                    if not self._apply(tp, h, epoch, current[tp].fetch_offset, a):
                        self._delayed[tp] = (time.monotonic() + BACKOFF_S, h, epoch)   # this one backs off
                except KafkaStorageError:   # its log directory is offline: the failure handler unassigns it
                    state.pop(tp, None)
                    ok = False
                    continue
                state[tp] = (h, self._position(h, epoch))
        return ok

    def _position(self, h: "Hosted", epoch: int) -> PartitionFetch:
        """With ``h.cond`` held: where this follower fetches from and what it has."""
        return PartitionFetch(h.log.log_end_offset, h.log.epoch_cache.latest_epoch, epoch, self.rm.fetch_max_bytes,
                              h.repl.high_watermark, h.log.log_start_offset)

    def _apply(self, tp: TP, h: "Hosted", epoch: int, fetch_offset: int, a: pb.FetchPartitionResponse) -> bool:
        """With ``h.cond`` held: replication.roles' step for one partition's answer (to a fetch from
        ``fetch_offset``), on this log."""
        rm = self.rm
        diverging = (a.diverging_epoch, a.diverging_end_offset) if a.diverging_epoch >= 0 else None
        step = roles.follower_fetch_answer(a.error_code, diverging, a.log_start_offset, h.log, h.repl,
                                           a.log_end_offset if a.error_code == errors.OFFSET_OUT_OF_RANGE else None,
                                           fetch_offset=fetch_offset)
        if step.kind == roles.STALE:
            return True   # the position is read again below; the next request fetches from there
        if step.kind == roles.FAILED:
            return False
        if step.kind in (roles.RESET, roles.TRUNCATE):
            dropped = (h.log.truncate_fully_and_start_at(step.offset) if step.kind == roles.RESET
                       else h.log.truncate_to(step.offset))
            rm.events.emit("log_truncated", topic=tp[0], partition=tp[1],
                           **step.truncated_fields(dropped, self.leader, epoch))
        elif a.records:
            try:
                h.log.append_as_follower(a.records, allow_gaps=True, now_ms=now_ms())  # compacted: gaps
            except (InvalidAppendError, CorruptBatchError) as e:
                rm.events.emit("follower_append_failed", topic=tp[0], partition=tp[1], error=str(e))
                return False
        events, log_start = roles.follower_moved(step, h.repl, h.log, a.high_watermark, a.log_start_offset)
        rm.log_events(events)
        if log_start is not None:   # the retention pass deletes the segments wholly below it
            h.log.maybe_increment_log_start_offset(log_start)
        return True
