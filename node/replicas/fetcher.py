"""A follower's fetcher: one thread per leader broker, long-polling it for every partition followed there.

The thread never dies of an exception: an I/O error in a partition's log (KafkaStorageError) takes its log
directory offline, and the failure handler takes the partition off this fetcher; anything unexpected is
logged as ``fetcher_error`` and the loop backs off and goes on.

A partition whose answer is an error (the leader has not taken it up yet: NOT_LEADER_OR_FOLLOWER,
UNKNOWN_LEADER_EPOCH) is left out of the requests for ``replication.fetcher.BACKOFF_MS`` while the others go
on fetching at once (the core's rule, as Kafka's AbstractFetcherThread delays only its partitions with errors);
meanwhile a request long-polls at the leader only until the first of them may be fetched again.
"""
from __future__ import annotations

import logging
import math
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
from node.net.peers import connecting, peer_channel
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg
from replication.fetch_session import PartitionFetch
from replication.fetcher import BACKOFF_MS, FetcherState, retry_at_once
from replication import roles

if TYPE_CHECKING:
    from node.replicas.hosted import FetcherOwner, Hosted

TP = tuple[str, int]
log = logging.getLogger(__name__)

# the name under which a fetcher's channels to its leader share one connection (node/net/peers.py); no other
# client uses it, so the connection is the fetchers' own, as Kafka's fetcher threads keep theirs
CONNECTION = "replica-fetcher"


def _mono_ms() -> float:
    """The backoffs' clock: monotonic, so a wall-clock step cannot stretch or cut one."""
    return time.monotonic() * 1000


class LeaderFetcher(threading.Thread):
    """A follower's fetch loop towards one leader broker, for every partition it follows there."""

    def __init__(self, rm: "FetcherOwner", leader: int):
        super().__init__(name=f"fetcher-from-{leader}", daemon=True)
        self.rm, self.leader = rm, leader
        self._parts: dict[TP, tuple["Hosted", int]] = {}
        # a copy of _parts given to the core, never changed after (the core takes the same mapping again as the
        # same assignment: replication.fetcher.FetcherState); None once _parts changed
        self._given: dict[TP, tuple["Hosted", int]] | None = None
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._channel: grpc.Channel | None = None  # only this thread opens it; assign() may close it
        # a second channel to the leader (this thread's only), on the same connection (``CONNECTION``): the
        # channel that replaces one closed to cut a poll short (closing a channel cancels its poll, not the
        # connection), so the next request needs no new TCP and HTTP/2 set-up on either side
        self._spare: tuple[str, grpc.Channel] | None = None
        self._polling: set[TP] | None = None  # the partitions of the long poll now parked at the leader
        self._cut = False
        self._core = FetcherState()  # the fetch session and each partition's position (this thread only)
        self._repositioned: set[TP] = set()   # partitions whose position moved outside this thread (repositioned)

    def assign(self, tp: TP, h: "Hosted", leader_epoch: int) -> None:
        self.assign_all([(tp, h, leader_epoch)])

    def assign_all(self, items: list[tuple[TP, "Hosted", int]]) -> None:
        """Fetch these (partition, hosted replica, leader epoch) from this leader from now on."""
        with self._lock:
            for tp, h, leader_epoch in items:
                self._parts[tp] = (h, leader_epoch)
            self._given = None
            # A partition the parked long poll does not carry would wait up to replica.fetch.wait.max.ms
            # for its first fetch, and a new leader's HW (its acks=all writes, a coordinator's first
            # commit) with it: cut the poll short (closing the channel cancels it) so the next request
            # includes it at once.  Blocking calls on a kept channel are the fast path otherwise.
            if self._polling is not None and self._channel is not None and not self._cut \
                    and any(tp not in self._polling for tp, _, _ in items):
                self._cut = True
                self._channel.close()

    def unassign(self, tp: TP) -> None:
        with self._lock:
            if self._parts.pop(tp, None) is not None:
                self._given = None

    def repositioned(self, tp: TP) -> None:
        """The partition's position moved outside this fetcher (its own retention moved its log start): the next
        request reads it again and so lists it, as Kafka's follower lists a partition whose fetch data changed
        (this thread's core keeps each position as the answers it applied left it)."""
        with self._lock:
            if tp in self._parts:
                self._repositioned.add(tp)

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        stub, target = None, None
        try:
            while not self._stop_event.is_set():
                with self._lock:
                    if self._given is None:
                        self._given = dict(self._parts)
                    parts = self._given
                    moved, self._repositioned = self._repositioned, set()
                    if self._cut:  # the channel was closed to cut a poll short: open a new one
                        self._cut, stub, target = False, None, None
                for tp in moved:
                    self._core.forget(tp)   # its position is read again for the next request
                endpoint = self.rm.endpoint_of(self.leader)
                if not parts or endpoint is None:
                    self._stop_event.wait(0.05)
                    continue
                if endpoint != target or stub is None:
                    channel = self._take_spare(endpoint)
                    with self._lock:
                        if self._channel is not None:
                            self._channel.close()
                        self._channel = channel
                        stub, target = pbg.BrokerStub(self._channel), endpoint
                    self._spare = (endpoint, connecting(peer_channel(endpoint, share=CONNECTION)))
                try:
                    fetched = self._fetch_once(stub, parts)
                except Exception as e:   # a bug, not a fault: say so, and keep fetching the other partitions
                    log.exception("fetcher from broker %d", self.leader)
                    self.rm.events.emit("fetcher_error", leader=self.leader, error=f"{type(e).__name__}: {e}")
                    self._core.failed()
                    fetched = False
                if fetched is False:
                    self._stop_event.wait(BACKOFF_MS / 1000)  # back off after an error
                elif fetched is not True:   # every partition is backing off: until the first may go again
                    self._stop_event.wait(fetched / 1000)
        finally:
            with self._lock:
                if self._channel is not None:
                    self._channel.close()
            self._take_spare(None)

    def _take_spare(self, endpoint: str | None) -> grpc.Channel:
        """The spare channel if it dials ``endpoint`` (closed otherwise), else a new one; None: close it."""
        spare, self._spare = self._spare, None
        if spare is not None and spare[0] == endpoint:
            return spare[1]
        if spare is not None:
            spare[1].close()
        return peer_channel(endpoint, share=CONNECTION) if endpoint is not None else None   # type: ignore[return-value]

    def _fetch_once(self, stub: pbg.BrokerStub, parts: dict[TP, tuple["Hosted", int]]) -> bool | float:
        """One Fetch in this fetcher's session, as ``replication.fetcher``'s loop says.  False: back off; a
        number: nothing to fetch before that many ms (every partition is backing off)."""
        core = self._core
        req = core.request(parts, self._read_position, _mono_ms())
        if req is None:
            wait = core.ready_in_ms(_mono_ms())
            return False if wait is None else max(wait, 1.0)
        with self._lock:
            if self._cut:
                return True  # a new partition arrived meanwhile: rebuild the request on a new channel
            self._polling = parts.keys()
        try:
            r = stub.Fetch(pb.FetchRequest(
                replica_id=self.rm.broker_id, replica_epoch=self.rm.broker_epoch(),
                max_wait_ms=math.ceil(core.poll_wait_ms(self.rm.fetch_wait_ms, _mono_ms())),
                session_id=req.session_id, session_epoch=req.session_epoch,
                partitions=[fetch_message(tp, pf) for tp, pf in req.listed],
                forgotten=[pb.TopicPartition(topic=t, partition=p) for t, p in req.forgotten]),
                timeout=self.rm.fetch_wait_ms / 1000 + 5)
        except (grpc.RpcError, ValueError):  # ValueError: the channel was closed under us
            core.failed()
            with self._lock:
                return self._cut  # cut short on purpose: fetch again at once, no backoff
        finally:
            with self._lock:
                self._polling = None
        if not core.answered(req, r.error_code, r.session_id):
            return retry_at_once(r.error_code)
        ok = True
        for a in r.partitions:
            tp = (a.topic, a.partition)
            h = req.parts[tp][0] if tp in req.parts else None
            if h is None:
                continue
            with h.cond:
                # a role change since the request was sent makes this answer stale
                if self._stop_event.is_set() or not core.still_fetching(req, tp, h.fetching_from, self.leader,
                                                                        not h.log.closed):
                    continue
                epoch = req.parts[tp][1]
                try:
                    if not self._apply(tp, h, epoch, req.current[tp].fetch_offset, a):
                        core.backoff(tp, h, epoch, _mono_ms())   # this one backs off, the others go on
                except KafkaStorageError:   # its log directory is offline: the failure handler unassigns it
                    core.forget(tp)
                    ok = False
                    continue
                core.moved(tp, h, epoch, self._position(h, epoch))
        return ok

    def _read_position(self, tp: TP, h: "Hosted", epoch: int) -> PartitionFetch | None:
        """A partition new to this fetcher (or given again): its position, or None when it is no longer
        fetched from this leader; after that only this thread moves it (appends, truncations, HW updates)."""
        with h.cond:
            if h.log.closed or h.fetching_from != (self.leader, epoch):
                return None
            return self._position(h, epoch)

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


def repositioned(fetchers: dict[int, LeaderFetcher], lock: threading.Lock, moved: list[tuple[int, TP]]) -> None:
    """(leader, tp) of followed partitions whose position moved outside their fetcher: each fetcher's next request
    lists them (:meth:`LeaderFetcher.repositioned`)."""
    for leader, tp in moved:
        with lock:
            f = fetchers.get(leader)
        if f is not None:
            f.repositioned(tp)


def assign_by_leader(owner: "FetcherOwner", fetchers: dict[int, LeaderFetcher], lock: threading.Lock,
                     fetches: list[tuple[int, TP, "Hosted", int]]) -> None:
    """(leader, tp, hosted, leader epoch) items to each leader's fetcher (started when it has none running), all
    of a leader's at once: its parked poll is cut once."""
    by_leader: dict[int, list[tuple[TP, "Hosted", int]]] = {}
    for leader, tp, h, epoch in fetches:
        by_leader.setdefault(leader, []).append((tp, h, epoch))
    for leader, items in by_leader.items():
        with lock:
            f = fetchers.get(leader)
            if f is None or not f.is_alive():
                f = fetchers[leader] = LeaderFetcher(owner, leader)
                f.start()
            f.assign_all(items)
