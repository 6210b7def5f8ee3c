"""A leader's long poll of a fetch with nothing new (Kafka 2.8's DelayedFetch), sans-IO.

Kafka's ReplicaManager.fetchMessages answers a fetch at once when one of its partitions has an
error or a diverging epoch (a follower must truncate before it fetches on), when it names no
partition, or when something is readable (``replica.fetch.min.bytes`` 1: any byte).  Otherwise the
fetch is parked (a DelayedFetch) until a partition becomes readable (records past the fetch offset:
up to the log end for a follower, the HW for a consumer), the broker stops leading one of its
partitions, the leader epoch moves past the one the fetch named, or ``max_wait_ms`` (``replica.fetch.wait.max.ms`` 500 for a follower) passes.  A moved
HW alone does not end a follower's wait: the follower learns it on its next fetch.

One deviation (docs/deviations.md, "A follower's fetch ahead of its leader waits"): a follower's fetch of a
partition this broker hosts at a leader epoch below the one the fetch names (the controller's LeaderAndIsr
reached the follower first) is parked too, until this broker reaches that epoch or the wait ends; only then is
the follower's position recorded and the partition answered.  Kafka 2.8 answers it NOT_LEADER_OR_FOLLOWER or
UNKNOWN_LEADER_EPOCH at once, and the follower leaves the partition out for ``replica.fetch.backoff.ms``.

The follower's position is recorded once, when the fetch arrives (it may move the HW, complete
acks=all waiters and expand the ISR); the answer is read when the wait ends, each partition's error
from :func:`answer_code`.  Both the broker's fetch handler (node/replicas/leader_fetch.py) and the
simulator's (sim/fetching.py) take a fetch of many partitions (a fetch session's unlisted partitions
included) through :class:`LeaderFetch`, which asks whether it waits when it arrives and again on every
append, HW move or role change; a follower's answer then leaves out the partitions without news
(``replication.fetch_session.has_news``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, NamedTuple

from kafkacommon import errors
from replication.fetch_session import LeaderSession, PartitionFetch, has_news, readable
from replication.partition import PartitionReplication
from replication.partition_types import AlterIsrProposal, FetchOutcome, LogView

TP = tuple[str, int]


class Position(NamedTuple):
    """One partition of a fetch, as the wait sees it: where the fetcher reads from and in which leader
    epoch, and what the leader has now."""

    fetch_offset: int
    current_leader_epoch: int    # the epoch the fetch named (-1: none, an old fetch version)
    log_end_offset: int
    high_watermark: int
    leader_epoch: int
    is_leader: bool


def answer_error(p: Position) -> int:
    """The error a parked fetch's partition answers when its wait ends: NOT_LEADER_OR_FOLLOWER once this
    broker stopped leading it, FENCED_LEADER_EPOCH once a newer leader epoch began here (Kafka's
    DelayedFetch completes on both), else NONE (its records are read)."""
    if not p.is_leader:
        return errors.NOT_LEADER_OR_FOLLOWER
    if 0 <= p.current_leader_epoch < p.leader_epoch:
        return errors.FENCED_LEADER_EPOCH
    return errors.NONE


def waits(urgent: bool, positions: Iterable[Position], follower: bool) -> bool:
    """Whether the fetch is held (or still held): nothing ``urgent`` (an error or a diverging epoch
    already in the answer), some partition to wait on, none readable yet and none to answer with an
    error (:func:`answer_error`)."""
    if urgent:
        return False
    seen = False
    for p in positions:
        if readable(p.fetch_offset, p.log_end_offset, p.high_watermark, p.is_leader, follower) \
                or answer_error(p) != errors.NONE:
            return False
        seen = True
    return seen


def deadline_ms(now_ms: float, max_wait_ms: float) -> float:
    """When a parked fetch is answered whatever it has (a negative ``max_wait_ms`` waits not at all)."""
    return now_ms + max(max_wait_ms, 0)


def position(pf: PartitionFetch, repl: PartitionReplication, log: LogView) -> Position:
    """A partition of a fetch as its wait sees it: what the fetcher said (``pf``) against the leader's state."""
    return Position(pf.fetch_offset, pf.current_leader_epoch, log.log_end_offset, repl.high_watermark,
                    repl.leader_epoch, repl.is_leader)


def answer_code(pf: PartitionFetch, repl: PartitionReplication, log: LogView, follower: bool,
                replica_open: bool = True, replica_failed: bool = False) -> int | None:
    """A parked (or waited-for) partition's answer once the wait ended: an error code (when the replica was
    stopped, ``replica_open`` False: KAFKA_STORAGE_ERROR if its log directory failed, ``replica_failed``, else
    NOT_LEADER_OR_FOLLOWER; or :func:`answer_error`'s), NONE (read its records), or None: nothing new for a
    follower (KIP-227: the partition is left out of the answer; a log start offset moved past the follower's is
    news)."""
    if not replica_open:
        return errors.KAFKA_STORAGE_ERROR if replica_failed else errors.NOT_LEADER_OR_FOLLOWER
    if not repl.is_leader:
        return errors.NOT_LEADER_OR_FOLLOWER
    if 0 <= pf.current_leader_epoch < repl.leader_epoch:
        return errors.FENCED_LEADER_EPOCH
    if follower and not has_news(pf, log.log_end_offset, repl.high_watermark, True, log.log_start_offset):
        return None
    return errors.NONE


def reads(out: FetchOutcome) -> bool:
    """Whether a partition whose follower position was recorded is answered with its records from
    ``read_offset``; otherwise with its error or its diverging epoch (an unknown follower: empty)."""
    return out.error == errors.NONE and out.diverging_epoch is None and out.read_offset is not None


def ahead(pf: PartitionFetch, repl: PartitionReplication) -> bool:
    """Whether a follower's fetch names a leader epoch this broker has not reached for the partition (it
    will lead it, or learn who does, once the controller's LeaderAndIsr arrives here); never for a fetch
    that names none (-1)."""
    return repl.leader_epoch < pf.current_leader_epoch


def ends_wait(pf: PartitionFetch, repl: PartitionReplication, log: LogView, follower: bool) -> bool:
    """Whether one partition ends a fetch's wait: :func:`waits`' rule for it (readable, or an answer error)."""
    if not repl.is_leader or 0 <= pf.current_leader_epoch < repl.leader_epoch:
        return True
    return (log.log_end_offset if follower else repl.high_watermark) > pf.fetch_offset


class Part(NamedTuple):
    """One partition of a fetch: its name, the shell's handle on the replica, and what the fetcher said."""
    tp: TP
    handle: Any
    fetch: PartitionFetch


@dataclass(eq=False)
class LeaderFetch:
    """One fetch at the leader from its arrival to its answer (Kafka 2.8's ``fetchMessages`` and its
    ``DelayedFetch``), sans-IO: both the broker's fetch handler (node/replicas/leader_fetch.py) and the
    simulator's (sim/fetching.py) take a fetch through it, in this order, doing only their own I/O (locks,
    log lines, the AlterIsr sends, the wire) between the steps:

    0. with a fetch session: :meth:`open_session`, then ``PartitionReplication.release_follower`` for each
       partition it returns (listed or forgotten: fetched otherwise than idle from now on), then
       :meth:`stamp`, which gives the session's unlisted partitions to look at (below);
    1. :meth:`unlisted` for each partition of the follower's session it did not list (a fetch at the offset
       it last listed; with a session only those :meth:`stamp` gave): one with nothing to record is *idle*;
       the others are then handled as listed;
    2. :meth:`record` for each listed partition the broker hosts as leader (:meth:`not_leader` for the
       others): the follower's position is recorded (the HW may move, an ISR expansion may be proposed), and
       the partition is answered at once (an error, a diverging epoch, an unknown follower) or *pending*; but
       first :meth:`waits_for_epoch` takes a hosted partition whose leader epoch the follower is ahead of
       (*ahead*: nothing recorded yet);
    3. the shell sends :attr:`proposals`, completes the acks=all waits the HW now covers, and parks the fetch
       while :meth:`waits` (until ``deadline_ms``), asking again on every append, HW move or role change of
       its partitions;
    4. :meth:`answer` for each of :meth:`parts`: its answer code (:func:`answer_code`; None: nothing new for
       a follower, left out); the shell reads the records of those answered NONE.  The partitions answered
       at once (:attr:`answered`) come first, then these in order; then the *ahead* ones, each through
       :meth:`record_late` (its position recorded now; its outcome answered as step 2's: an error, a diverging
       epoch, or its records), after which the shell sends the new :attr:`proposals` and completes the acks=all
       waits, as after step 2.

    An idle fetch costs only the session's partitions that changed (issue 49): an idle partition with
    nothing new for the follower is *bound* to the session's fetch clock (``replication.remote_replica``),
    which :meth:`stamp` moves once for all of them, and is not looked at again (not recorded, not asked in
    the wait, left out of the answer) until something touches it: then the session's clock names it, and
    this fetch (if it still waits) and the session's next one look at it as before.  A listed partition
    that :meth:`record` leaves idle with nothing new (the follower in the ISR at the log end, the HW
    known to it) is bound at once, rather than at the session's next fetch; touched, this fetch answers
    it where it would have answered it pending.  What each step decides is the same as looking at every
    partition of the session.
    """

    follower: bool
    deadline_ms: float
    session_id: int = 0
    answered: list[tuple[Part, FetchOutcome]] = field(default_factory=list)   # at once: errors, divergence
    pending: list[Part] = field(default_factory=list)
    idle: list[Part] = field(default_factory=list)        # a session's unlisted partitions with nothing to record
    ahead: list[Part] = field(default_factory=list)       # hosted at a leader epoch below the one the fetch names
    proposals: list[tuple[Any, AlterIsrProposal]] = field(default_factory=list)   # (handle, ISR expansion)
    hw_moved: bool = False
    session: LeaderSession | None = None
    # with a session: its partitions bound at this fetch (idle, nothing new: not looked at unless touched),
    # tp -> (place in the session, part); those touched since; each idle one's place in the session
    _bound: dict[TP, tuple[int, Part]] = field(default_factory=dict)
    _touched: dict[TP, tuple[int, Part]] = field(default_factory=dict)
    _idle_at: list[int] = field(default_factory=list)
    # the listed partitions bound at record (tp -> (its place among the pending, part)), each pending one's place
    _bound_listed: dict[TP, tuple[int, Part]] = field(default_factory=dict)
    _pending_at: list[int] = field(default_factory=list)
    _listed: frozenset = frozenset()
    _may_bind: bool = False
    _stamped_ms: int = 0
    _gen: int = -1
    _pos: int = 0

    @property
    def urgent(self) -> bool:
        """Some partition is answered already: Kafka answers the whole fetch at once."""
        return bool(self.answered)

    def open_session(self, session: LeaderSession, listed: list[TP], forgotten: Iterable[TP]) -> list[TP]:
        """Step 0, after ``LeaderSessions.open`` took the request: -> the partitions whose follower state the
        shell releases (``PartitionReplication.release_follower``, under each one's lock) before :meth:`stamp`:
        those the request lists or forgets, which the session's clock no longer stands for."""
        self.session = session
        self._bound = bound = dict(session.bound)      # a new dict: a fetch still parked keeps its own
        release = list(listed) + list(forgotten)
        for tp in release:
            bound.pop(tp, None)
        self._listed = frozenset(listed)
        parts = session.partitions
        session.dirty.update(tp for tp in listed if tp in parts)
        return release

    def stamp(self, now_ms: int) -> list[tuple[TP, PartitionFetch]]:
        """Step 0's end: the session's fetch at ``now_ms`` stamped on its clock (every partition bound to it is
        fetched idle now); -> the unlisted partitions to give :meth:`unlisted`, in the session's order: those
        not bound, and those touched since the session's last fetch."""
        s = self.session
        assert s is not None, "stamp follows open_session"
        clock = s.clock
        self._may_bind = clock.stamp(now_ms)
        self._stamped_ms = now_ms
        touched = clock.drain()
        self._gen, self._pos = clock.gen, 0
        bound, parts, dirty = self._bound, s.partitions, s.dirty
        for tp in touched:
            if bound.pop(tp, None) is not None and tp in parts:
                dirty.add(tp)
        s.bound = bound
        listed, order = self._listed, s.order
        visit = sorted((order[tp], tp) for tp in dirty if tp in parts and tp not in listed)
        return [(tp, parts[tp]) for _o, tp in visit]

    def unlisted(self, part: Part, follower_id: int, repl: PartitionReplication, log: LogView, now_ms: int) -> bool:
        """A session partition the request did not list: True when it is idle (only the fetch time recorded,
        ``PartitionReplication.on_idle_follower_fetch``; with nothing new for the follower either, it is bound
        to the session's clock from now on); False: the caller records it as listed."""
        leo = log.log_end_offset
        if not repl.on_idle_follower_fetch(follower_id, part.fetch.fetch_offset, part.fetch.current_leader_epoch,
                                           leo, now_ms):
            return False
        s = self.session
        if s is None:
            self.idle.append(part)
            self._idle_at.append(len(self._idle_at))
            return True
        at = s.order[part.tp]
        if self._may_bind and not has_news(part.fetch, leo, repl.high_watermark, True, log.log_start_offset):
            repl.bind_idle(follower_id, s.clock, part.tp)
            self._bound[part.tp] = (at, part)
            s.dirty.discard(part.tp)
        else:
            self.idle.append(part)
            self._idle_at.append(at)
        return True

    def not_leader(self, part: Part, offline: bool = False) -> FetchOutcome:
        """A listed partition this broker does not lead (or host): NOT_LEADER_OR_FOLLOWER at once, or
        KAFKA_STORAGE_ERROR when it is not hosted because its log directory failed (``offline``)."""
        out = FetchOutcome(error=errors.KAFKA_STORAGE_ERROR if offline else errors.NOT_LEADER_OR_FOLLOWER)
        self.answered.append((Part(part.tp, None, part.fetch), out))   # answered with no state of the replica
        return out

    def waits_for_epoch(self, part: Part, repl: PartitionReplication) -> bool:
        """A listed partition this broker hosts (as leader or not), before :meth:`record` or :meth:`not_leader`:
        True when a follower's fetch names a leader epoch above this broker's for it (:func:`ahead`); it is then
        *ahead*, parked with nothing recorded until this broker reaches that epoch (the deviation in this
        module's doc)."""
        if self.follower and ahead(part.fetch, repl):
            self.ahead.append(part)
            return True
        return False

    def record(self, part: Part, follower_id: int, repl: PartitionReplication, log: LogView,
               now_ms: int) -> FetchOutcome:
        """A listed partition's arrival: the follower's position recorded (``on_follower_fetch``); -> its outcome,
        whose events the shell logs (then it completes the acks=all waits: the HW may have moved)."""
        out = self._record(part, follower_id, repl, log, now_ms)
        if not reads(out):
            self.answered.append((part, out))
            return out
        at = len(self.pending) + len(self._bound_listed)
        s = self.session
        if s is not None and self._may_bind and self._binds_listed(part, follower_id, repl, log, now_ms, out):
            repl.bind_idle(follower_id, s.clock, part.tp)
            self._bound[part.tp] = (s.order[part.tp], part)
            self._bound_listed[part.tp] = (at, part)
            s.dirty.discard(part.tp)
        else:
            self.pending.append(part)
            self._pending_at.append(at)
        return out

    def _binds_listed(self, part: Part, follower_id: int, repl: PartitionReplication, log: LogView,
                      now_ms: int, out: FetchOutcome) -> bool:
        """A listed partition just recorded (``out``: its outcome, read from): whether it is now idle with nothing
        new for the follower (``has_news`` false: at the log end, the HW known to it, its log start not behind),
        as the session's next fetch would find it (:meth:`unlisted`), and recorded at or after the clock's peak
        (the stamp's time: :meth:`stamp` lets replicas bind only at the peak)."""
        pf = part.fetch
        leo = out.leader_log_end_offset
        return (pf.fetch_offset == leo and pf.follower_high_watermark == out.high_watermark
                and now_ms >= self._stamped_ms and not 0 <= pf.log_start_offset < log.log_start_offset
                and repl.idle_after_fetch(follower_id, pf.fetch_offset, pf.current_leader_epoch, leo))

    def record_late(self, part: Part, follower_id: int, repl: PartitionReplication, log: LogView,
                    now_ms: int) -> FetchOutcome:
        """An *ahead* partition once the wait ended: its position recorded now, as :meth:`record` does on
        arrival (an error if this broker still has not reached the fetch's epoch: UNKNOWN_LEADER_EPOCH, or
        NOT_LEADER_OR_FOLLOWER as Kafka answers).  Its outcome is its answer: its records from ``read_offset``
        when :func:`reads` (none when the follower is at the log end), else its error or diverging epoch."""
        return self._record(part, follower_id, repl, log, now_ms)

    def _record(self, part: Part, follower_id: int, repl: PartitionReplication, log: LogView,
                now_ms: int) -> FetchOutcome:
        hw = repl.high_watermark
        pf = part.fetch
        out = repl.on_follower_fetch(follower_id, pf.fetch_offset, pf.last_fetched_epoch, pf.current_leader_epoch,
                                     log, now_ms, log_start_offset=pf.log_start_offset if pf.log_start_offset >= 0
                                     else None)
        self.hw_moved = self.hw_moved or repl.high_watermark != hw
        if out.alter_isr is not None:
            self.proposals.append((part.handle, out.alter_isr))
        return out

    def _pull(self) -> None:
        """The bound partitions touched since this fetch arrived (its session's clock names them) join the
        ones this fetch looks at; all of them once the clock was drained since (another fetch of the session
        arrived while this one waited)."""
        s = self.session
        if s is None or not self._bound or self._gen < 0:
            return
        new = s.clock.since(self._gen, self._pos)
        touched, bound = self._touched, self._bound
        if new is None:
            self._gen = -1
            for tp, entry in bound.items():
                touched.setdefault(tp, entry)
            return
        self._pos += len(new)
        for tp in new:
            entry = bound.get(tp)
            if entry is not None:
                touched.setdefault(tp, entry)

    def _looked_at(self) -> list[Part]:
        """The idle partitions this fetch looks at (those given to :meth:`unlisted` and the bound ones touched,
        but those it listed), in the session's order."""
        touched = self._touched
        if not touched:
            return self.idle
        listed = self._bound_listed
        more = [(at, -1, part) for tp, (at, part) in touched.items() if tp not in listed]
        if not more:
            return self.idle
        merged = sorted([(at, i, part) for i, (at, part) in enumerate(zip(self._idle_at, self.idle))] + more,
                        key=lambda e: (e[0], e[1]))
        return [part for _at, _i, part in merged]

    def _pending(self) -> list[Part]:
        """The pending partitions with the listed ones bound at :meth:`record` and touched since, in the order
        they were recorded."""
        listed, touched = self._bound_listed, self._touched
        if not listed or not touched:
            return self.pending
        back = [listed[tp] for tp in touched if tp in listed]
        if not back:
            return self.pending
        merged = sorted(list(zip(self._pending_at, self.pending)) + back, key=lambda e: e[0])
        return [part for _at, part in merged]

    def parts(self) -> list[Part]:
        """The partitions the fetch waits on and answers through :meth:`answer` (pending and idle; of the bound
        ones, those touched; the *ahead* ones, which it waits on too, are answered through :meth:`record_late`)."""
        self._pull()
        return self._pending() + self._looked_at()

    def waits_on(self) -> list[Part]:
        """For a shell that parks a fetch on each of its partitions (the simulator's): :meth:`parts`, the listed
        partitions bound at :meth:`record` (touched or not: it parks on them as on the pending ones, which they
        would have been), and the *ahead* ones."""
        self._pull()
        listed = self._bound_listed
        if not listed:
            return self.pending + self._looked_at() + self.ahead
        merged = sorted(list(zip(self._pending_at, self.pending)) + list(listed.values()), key=lambda e: e[0])
        return [part for _at, part in merged] + self._looked_at() + self.ahead

    def waits(self, state_of, arriving: bool = False) -> bool:
        """Whether the fetch is (still) held: :func:`waits` over its pending and idle partitions.
        ``state_of(handle)`` -> (repl, log), or None for a replica no longer hosted (which ends the wait).
        ``arriving``: asked right after steps 1 and 2, with nothing changed since: the idle partitions are then
        known to wait (``on_idle_follower_fetch`` took only partitions led in the fetch's epoch, at the log end),
        and only the pending ones are asked.  A bound partition not touched since the fetch arrived waits."""
        if self.urgent:
            return False
        follower = self.follower
        for part in self.ahead:
            st = state_of(part.handle)
            if st is None or not ahead(part.fetch, st[0]):
                return False
        seen = bool(self.ahead) or bool(self._bound) or bool(arriving and self.idle)
        if arriving:
            groups: tuple = (self.pending,)
        else:
            self._pull()
            groups = (self.pending, self.idle, [part for _at, part in self._touched.values()])
        for parts in groups:
            for part in parts:
                st = state_of(part.handle)
                if st is None or ends_wait(part.fetch, st[0], st[1], follower):
                    return False
                seen = True
        return seen

    def touches(self, handle: Any) -> bool:
        """Whether one of this fetch's bound partitions, ``handle``'s, was touched since it arrived (not one it
        listed: :meth:`waits_on` has those)."""
        self._pull()
        listed = self._bound_listed
        return any(part.handle is handle and tp not in listed for tp, (_at, part) in self._touched.items())

    def still_waits(self, handle: Any, repl: PartitionReplication | None, log: LogView | None) -> bool:
        """:meth:`waits` after a change of one replica only (an append, an HW move or a role change of
        ``handle``; ``repl`` None: no longer hosted): the fetch waited, so no other partition became readable
        or has an error meanwhile, and only ``handle``'s are asked again."""
        follower = self.follower
        self._pull()
        for parts in (self.pending, self.idle, [part for _at, part in self._touched.values()]):
            for part in parts:
                if part.handle is handle and (repl is None or ends_wait(part.fetch, repl, log, follower)):
                    return False
        for part in self.ahead:
            if part.handle is handle and (repl is None or not ahead(part.fetch, repl)):
                return False
        return True

    def answer(self, part: Part, repl: PartitionReplication | None, log: LogView | None,
               replica_open: bool = True, replica_failed: bool = False) -> int | None:
        """After the wait, one of :meth:`parts` (in their order): its :func:`answer_code` (``repl`` None: the
        replica is no longer hosted, as ``replica_open`` False); None leaves it out of the answer."""
        if repl is None or log is None:
            return errors.KAFKA_STORAGE_ERROR if replica_failed else errors.NOT_LEADER_OR_FOLLOWER
        return answer_code(part.fetch, repl, log, self.follower, replica_open, replica_failed)
