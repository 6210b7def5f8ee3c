"""A simulated broker's replica fetches: a follower's fetcher per leader broker, and the leader's side of a fetch.

Both sides go through the cores the broker's own fetcher thread and fetch handler go through, step by step:
``replication.fetcher`` (the follower's loop: what each request lists in its fetch session, what an answer
does, when to back off), ``replication.fetch_session`` (the sessions, KIP-227), ``replication.long_poll``'s
``LeaderFetch`` (a fetch from its arrival to its answer: positions recorded, the long poll of a fetch with
nothing new, which partitions the answer carries) and ``replication.roles`` (a partition's answer on the
follower).  What is left here is the simulated I/O: the request and its answer over the simulated network,
the parked fetch's timer, and the log's reads and writes.

A request is ``(follower, session id, session epoch, ((tp, PartitionFetch), ...), (forgotten tp, ...),
max wait ms)``; its answer ``(error, session id, [(tp, error, HW, diverging epoch or None, batches, leader
LEO)])``.  ``PartitionFetch.max_bytes`` is the most records a partition's answer carries.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from kafkacommon import errors
from kafkacommon.event import Event
from replication import roles
from replication.fetch_session import LeaderSessions, PartitionFetch
from replication.fetcher import BACKOFF_MS, FetcherState, FetchRequest, retry_at_once
from replication.long_poll import LeaderFetch, Part, reads
from sim import rpc

TP = tuple[str, int]
FETCH_TIMEOUT_MS = 2000.0
FETCH_WAIT_MAX_MS = 500.0    # replica.fetch.wait.max.ms
FETCH_MAX_RECORDS = 500


class SimFetcher:
    """A follower's fetcher towards one leader broker (Kafka's ReplicaFetcherThread): one request at a time,
    for every partition this broker follows there."""

    def __init__(self, rm, leader: int) -> None:
        self.rm, self.leader = rm, leader
        self.world = rm.world
        self.parts: dict[TP, tuple[Any, int]] = {}       # tp -> (Hosted, leader epoch)
        self._given: dict[TP, tuple[Any, int]] | None = None   # a copy given to the core, never changed after
        self.core = FetcherState()
        self.in_flight: FetchRequest | None = None
        self._seq = 0          # the request an answer belongs to (a cut request's answer is ignored)
        self._scheduled = False

    def assign(self, tp: TP, h: Any, leader_epoch: int) -> None:
        self.parts[tp] = (h, leader_epoch)
        self._given = None
        req = self.in_flight
        if req is None:
            self._soon(0.0)
        elif tp not in req.parts:
            # as the broker's fetcher cuts its parked poll short: a partition new to this leader is fetched at
            # once (a new leader's HW, and its acks=all writes, wait on it), in a new full request
            self.in_flight = None
            self._seq += 1
            self.core.failed()
            self._soon(0.0)

    def unassign(self, tp: TP) -> None:
        if self.parts.pop(tp, None) is not None:
            self._given = None

    def _soon(self, delay_ms: float) -> None:
        if not self._scheduled:
            self._scheduled = True
            self.world.on_node(self.rm.b.node, delay_ms, self._fetch)

    def _position(self, tp: TP, h: Any, epoch: int) -> PartitionFetch | None:
        if self.rm.hosted.get(tp) is not h or h.fetching_from != (self.leader, epoch):
            return None
        return PartitionFetch(h.log.log_end_offset, h.log.latest_epoch, epoch, FETCH_MAX_RECORDS, h.repl.high_watermark,
                              h.log.log_start_offset)

    def _fetch(self) -> None:
        self._scheduled = False
        if self.in_flight is not None or not self.parts:
            return
        target = self.rm.b.cluster.brokers.get(self.leader)
        if self._given is None:       # the core takes the same mapping again as the same assignment
            self._given = dict(self.parts)
        req = self.core.request(self._given, self._position, self.world.now_ms) if target is not None else None
        if req is None:
            wait = self.core.ready_in_ms(self.world.now_ms) if target is not None else None
            if wait is not None:    # every partition is backing off: until the first may go again
                self._soon(wait)
            return
        self.in_flight = req
        self._seq += 1
        seq = self._seq
        rpc.call(self.world, self.rm.b.node, target.node, target.handle_fetch,
                 (self.rm.b.id, req.session_id, req.session_epoch, req.listed, req.forgotten,
                  self.core.poll_wait_ms(FETCH_WAIT_MAX_MS, self.world.now_ms)),
                 lambda ans: self._answered(seq, req, ans), FETCH_TIMEOUT_MS)

    def _answered(self, seq: int, req: FetchRequest, ans: Any) -> None:
        if seq != self._seq:
            return
        self.in_flight = None
        if ans is None:
            self.core.failed()
            self._soon(BACKOFF_MS)
            return
        error, session_id, results = ans
        if not self.core.answered(req, error, session_id):
            self._soon(0.0 if retry_at_once(error) else BACKOFF_MS)
            return
        ok = True
        for tp, code, hw, diverging, batches, leader_leo in results:
            entry = req.parts.get(tp)
            if entry is None:
                continue
            h, epoch = entry
            if not self.core.still_fetching(req, tp, h.fetching_from, self.leader, self.rm.hosted.get(tp) is h):
                continue
            try:
                if not self._apply(tp, h, epoch, req.current[tp].fetch_offset, code, hw, diverging, batches,
                                   leader_leo):
                    self.core.backoff(tp, h, epoch, self.world.now_ms)   # this one backs off, the others go on
            except OSError as e:   # its directory goes offline, and the replica with it: no more fetches of it
                self.core.forget(tp)
                self.rm.b.dir_failed(self.rm.b.dir_of(h.log), "follower append", e)
                ok = False
                continue
            self.core.moved(tp, h, epoch, self._position(tp, h, epoch))
        if ok:
            self._fetch()     # at once, as the fetcher thread's loop
        else:
            self._soon(BACKOFF_MS)

    def _apply(self, tp: TP, h: Any, epoch: int, fetch_offset: int, code: int, hw: int,
               diverging: tuple[int, int] | None, batches: list, leader_leo: int) -> bool:
        """replication.roles' step for one partition's answer, on this log (the simulated leader's log starts
        at 0, so it never answers a follower below its log start); an OSError of the disk is the caller's."""
        step = roles.follower_fetch_answer(code, diverging, None, h.log, h.repl,
                                           leader_leo if code == errors.OFFSET_OUT_OF_RANGE else None,
                                           fetch_offset=fetch_offset)
        if step.kind == roles.STALE:
            return True
        if step.kind == roles.FAILED:
            return False
        if step.kind == roles.TRUNCATE:
            dropped = h.log.truncate_to(step.offset)
            self.rm.b.emit("log_truncated", topic=tp[0], partition=tp[1],
                           **step.truncated_fields(dropped, self.leader, epoch))
        elif batches:
            h.log.append_as_follower(batches, self.rm.now())
            self.rm.b.disk_wrote(h.log)
        self.rm.log_events(roles.follower_moved(step, h.repl, h.log, hw)[0])
        return True


@dataclass(eq=False)
class Parked:
    """A fetch in its long poll: ``LeaderFetch`` and where its answer goes."""
    core: LeaderFetch
    reply: Callable[[Any], None]
    seq: int = 0                                  # the order it parked in
    follower: int = -1
    done: bool = False
    hosted: list = field(default_factory=list)    # the Hosted it is parked on


class SimLeaderFetches:
    """The leader's side of followers' fetches on one simulated broker (node/replicas/leader_fetch.py's)."""

    def __init__(self, rm) -> None:
        self.rm = rm
        self.world = rm.world
        # ids from the virtual clock, as the broker's from its clock: a restarted broker's cannot match old ones
        self.sessions = LeaderSessions(first_id=int(self.world.now_ms * 1000) + 1)
        self.session_parked: list[Parked] = []   # parked fetches of a session, in the order they parked
        self._seq = 0

    @staticmethod
    def _state(h: Any):
        return (h.repl, h.log) if h is not None and h.open else None

    def handle_fetch(self, req: Any, reply: Callable[[Any], None]) -> None:
        follower, session_id, session_epoch, listed, forgotten, max_wait_ms = req
        rm = self.rm
        code, session = self.sessions.open(follower, session_id, session_epoch, listed, forgotten)
        if code != errors.NONE:
            reply((code, 0, []))
            return
        now = rm.now()
        hosted = rm.hosted
        f = LeaderFetch(True, self.world.now_ms + max_wait_ms, session.id if session is not None else 0)
        parts = [Part(tp, hosted.get(tp), pf) for tp, pf in listed]
        if session is not None:
            for tp in f.open_session(session, [tp for tp, _pf in listed], forgotten):
                h = hosted.get(tp)
                if h is not None:
                    h.repl.release_follower(follower)
            unlisted = f.unlisted
            for tp, pf in f.stamp(now):
                h = hosted.get(tp)
                part = Part(tp, h, pf)
                if h is None or not unlisted(part, follower, h.repl, h.log, now):
                    parts.append(part)
        for part in parts:
            h = part.handle
            if h is not None and f.waits_for_epoch(part, h.repl):
                continue   # parked until this broker reaches the epoch the follower names
            if h is None or not h.repl.is_leader:
                f.not_leader(part, h is None and rm.b.dirs.is_offline(part.tp))
                continue
            out = f.record(part, follower, h.repl, h.log, now)
            rm.log_events(out.events)
            rm.wake(h)
        self._propose(f)
        if not f.waits(self._state, arriving=True):
            self._answer(Parked(f, reply, follower=follower))
            return
        self._seq += 1
        p = Parked(f, reply, self._seq, follower)
        for part in f.waits_on():
            part.handle.parked.append(p)
            p.hosted.append(part.handle)
        if f.session is not None:
            self.session_parked.append(p)   # its partitions bound to the session's clock: asked once touched
        self.world.on_node(rm.b.node, f.deadline_ms - self.world.now_ms, self._expire, p)

    def _propose(self, f: LeaderFetch) -> None:
        """The ISR expansions the fetch's positions proposed, sent (each once)."""
        proposals, f.proposals = f.proposals, []
        for h, proposal in proposals:
            self.rm.b.log(Event("isr_change_proposed", proposal.fields()))
            self.rm.send_alter_isr(h, proposal)

    def wake(self, h: Any) -> None:
        """An append, an HW move or a role change of ``h``: the fetches parked on it (or on its session's clock,
        ``replication.remote_replica``) that no longer wait, in the order they parked."""
        h.repl.touch()
        touching = [p for p in self.session_parked if not p.done and p.core.touches(h) and p not in h.parked]
        if not h.parked and not touching:
            return
        parked, h.parked = h.parked, []
        st = self._state(h) or (None, None)
        for p in sorted(parked + touching, key=lambda p: p.seq) if touching else parked:
            if p.done:
                continue
            if p.core.still_waits(h, *st):
                if p in parked:
                    h.parked.append(p)
            else:
                self._answer(p)

    def _expire(self, p: Parked) -> None:
        if not p.done:
            self._answer(p)

    def _answer(self, p: Parked) -> None:
        p.done = True
        for h in p.hosted:
            if p in h.parked:
                h.parked.remove(p)
        if p in self.session_parked:
            self.session_parked.remove(p)
        f = p.core
        out = [(part.tp, o.error, o.high_watermark, o.diverging_epoch, [], o.leader_log_end_offset)
               for part, o in f.answered]
        for part in f.parts():
            st = self._state(part.handle)
            code = f.answer(part, *(st or (None, None)), replica_failed=part.handle is not None and part.handle.failed)
            if code is None:
                continue
            if code != errors.NONE:
                out.append((part.tp, code, -1, None, [], -1))
                continue
            h = part.handle
            out.append((part.tp, errors.NONE, h.repl.high_watermark, None,
                        h.log.read(part.fetch.fetch_offset, part.fetch.max_bytes), -1))
        woken = []
        for part in f.ahead:   # the follower's position recorded now (LeaderFetch.record_late)
            h = part.handle
            if self._state(h) is None or self.rm.hosted.get(part.tp) is not h:
                out.append((part.tp, errors.KAFKA_STORAGE_ERROR if h.failed else errors.NOT_LEADER_OR_FOLLOWER,
                            -1, None, [], -1))
                continue
            o = f.record_late(part, p.follower, h.repl, h.log, self.rm.now())
            self.rm.log_events(o.events)
            woken.append(h)
            if reads(o):
                out.append((part.tp, errors.NONE, h.repl.high_watermark, None,
                            h.log.read(o.read_offset, part.fetch.max_bytes), -1))
            else:
                out.append((part.tp, o.error, o.high_watermark, o.diverging_epoch, [], o.leader_log_end_offset))
        p.reply((errors.NONE, f.session_id, out))
        for h in woken:   # the HW may have moved: acks=all waits done, other fetches woken
            self.rm.wake(h)
        self._propose(f)
