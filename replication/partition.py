"""One partition's replication state on one broker, as a sans-IO state machine.

Reference §3 "Replication" (Kafka 2.8, IBP >= 2.7-IV2, so ISR changes go to the
controller as AlterIsr).  The broker shell owns the log, the clock and the
network; this module only decides.  Time comes in as ``now_ms``; the log's facts
come in through :class:`LogView` (``PartitionLog`` satisfies it).  Every method
returns what to do: a :class:`FetchOutcome`, events as ``(name, fields)`` tuples,
or an :class:`AlterIsrProposal` command for the shell to send to the controller.
Those types, the settings and the fetch checks are in replication/partition_types.py.

Rules implemented (the leader's side unless noted):

* **HW** = min(leader LEO, LEO of every remote replica that is in the *maximal*
  ISR or caught up within ``replica.lag.time.max.ms``); it only increases and
  never passes the leader LEO.  A remote LEO is the offset of its last fetch
  (-1 = unknown, which blocks any increase while that replica counts).
* **lastCaughtUpTime**: a fetch at or past the leader LEO -> the fetch time; else
  a fetch at or past the leader LEO seen at that replica's previous fetch -> the
  previous fetch time; it never goes back.  become_leader sets it to now for ISR
  members and 0 for the others.
* **Shrink** (the shell's periodic task): drop followers whose LEO != leader LEO
  and now - lastCaughtUp > lag.  **Expand** (on fetch): follower LEO >= HW and >=
  the leader-epoch start offset.  At most one change in flight; a pending expand
  already counts the new member for the HW, a pending shrink still counts the old
  ISR (the maximal ISR).
* **Fetch** errors: an older currentLeaderEpoch -> FENCED_LEADER_EPOCH (74), a
  newer one -> UNKNOWN_LEADER_EPOCH (75) (-1 skips the check); then a broker that
  is not the leader -> NOT_LEADER_OR_FOLLOWER (6).  A fetch from a broker outside
  the replica set gets NONE with no records and changes nothing: that is what
  Kafka 2.8 answers ("Empty records will be returned for this partition").
* **Divergence** (IBP >= 2.7-IV1): with lastFetchedEpoch >= 0, (e, end) =
  endOffsetFor(lastFetchedEpoch); e < lastFetchedEpoch or end < fetchOffset ->
  ``diverging_epoch=(e, end)``, no records, and the follower's LEO is not updated.
* **acks=all**: |ISR| < min.insync.replicas -> NOT_ENOUGH_REPLICAS (19) before the
  append; afterwards complete once HW >= the required offset, with
  NOT_ENOUGH_REPLICAS_AFTER_APPEND (20) if the maximal ISR is then too small;
  otherwise still waiting (the shell times out with REQUEST_TIMED_OUT, 7).
* **Follower** HW = min(leader HW, own LEO), as Kafka's Log.updateHighWatermark:
  it may go down when a new leader reports a lower HW (event flags it).
"""
from __future__ import annotations

from typing import Any, Iterable

from kafkacommon import errors
from kafkacommon.errors import OFFSET_OUT_OF_RANGE
from kafkacommon.event import Event
from replication import produce
from replication.partition_types import (AlterIsrOutcome, AlterIsrProposal, FetchOutcome, LogView, ReplicaSettings,
                                         divergence, leader_epoch_error)
from replication.remote_replica import FetchClock, RemoteReplica


# AlterIsr answers after which the leader must not propose again until it learns a
# newer partition state (LeaderAndIsr / UpdateMetadata / become_*); the change stays pending
# meanwhile (Kafka 2.8's Partition keeps its PendingExpandIsr / PendingShrinkIsr state):
#   FENCED_LEADER_EPOCH: our leader epoch is over - we are no longer the leader of this
#     epoch (possibly not the leader at all); a LeaderAndIsr is on its way.
#   INVALID_UPDATE_VERSION: our zkVersion is stale - the ISR changed without us seeing it.
#   UNKNOWN_TOPIC_OR_PARTITION: the controller no longer knows the partition (deleted).
# Any other error (NOT_CONTROLLER, STALE_BROKER_EPOCH, timeouts ...) is transient: the
# change is dropped and proposed again by the next fetch or shrink check.
INELIGIBLE_BACKOFF_MS = 500
ISR_CHANGE_GIVE_UP = frozenset({errors.FENCED_LEADER_EPOCH, errors.INVALID_UPDATE_VERSION,
                                errors.UNKNOWN_TOPIC_OR_PARTITION})


class PartitionReplication:
    def __init__(self, topic: str, partition: int, local_broker_id: int,
                 settings: ReplicaSettings | None = None, *, high_watermark: int = 0) -> None:
        self.topic, self.partition = topic, partition
        self.local_broker_id = local_broker_id
        self.settings = settings or ReplicaSettings()
        self.leader_id = -1
        self._leader_epoch = -1
        self._isr: tuple[int, ...] = ()
        self.replicas: tuple[int, ...] = ()
        self._zk_version = -1
        self._hw = max(0, high_watermark)  # e.g. from the HW checkpoint
        self.leader_epoch_start_offset: int | None = None
        self.remotes: dict[int, RemoteReplica] = {}
        self._pending: AlterIsrProposal | None = None
        self._isr_change_blocked = False  # after a give-up error, until a newer state arrives
        # followers the controller called INELIGIBLE_REPLICA (shutting down or gone), until when:
        # they neither join the ISR nor hold the HW back as "caught up" (KIP-841's rule)
        self._ineligible: dict[int, int] = {}
        self._live: frozenset[int] | None = None  # registered brokers (UpdateMetadata); None = unknown
        self._leader_since_epoch = -1  # the epoch in which this broker last became leader (from follower)

    # ------------------------------------------------------------------ views

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def isr(self) -> tuple[int, ...]:
        """The committed ISR (a pending change is not in it yet)."""
        return self._isr

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The committed ISR plus a pending expand's new member (a pending shrink removes nobody)."""
        p = self._pending
        if p is not None and p.kind == "expand":
            return self._isr + tuple(r for r in p.changed if r not in self._isr)
        return self._isr

    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @property
    def zk_version(self) -> int:
        return self._zk_version

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def pending_isr_change(self) -> AlterIsrProposal | None:
        return self._pending

    def _ev(self, name: str, **fields: Any) -> Event:
        return Event(name, {"topic": self.topic, "partition": self.partition, **fields})

    def snapshot(self) -> dict[str, Any]:
        return {
            "topic": self.topic, "partition": self.partition, "broker": self.local_broker_id,
            "leader": self.leader_id, "is_leader": self.is_leader, "leader_epoch": self._leader_epoch,
            "zk_version": self._zk_version, "isr": list(self._isr), "maximal_isr": list(self.maximal_isr),
            "replicas": list(self.replicas), "high_watermark": self._hw,
            "leader_epoch_start_offset": self.leader_epoch_start_offset,
            "pending_isr_change": self._pending.fields() if self._pending else None,
            "isr_change_blocked": self._isr_change_blocked,
            "remotes": {r: s.state() for r, s in sorted(self.remotes.items())},
        }

    # ------------------------------------------------------------------ role changes

    def become_leader(self, leader_epoch: int, isr: Iterable[int], replicas: Iterable[int], zk_version: int,
                      log: LogView, now_ms: int) -> list[Event]:
        """Kafka's makeLeader.  The shell adds (leader_epoch, log LEO) to the epoch cache.

        Every remote replica gets lastCaughtUp = now if in the ISR, else 0.  A broker that was
        not leader before also forgets the remote LEOs (unknown, -1); a leader re-elected with a
        newer epoch keeps them.  The HW is kept, capped at the LEO, then maybe advanced.
        """
        newly_leader = not self.is_leader
        leo = log.log_end_offset
        self.leader_id = self.local_broker_id
        if newly_leader:
            self._leader_since_epoch = leader_epoch
        self._set_state(leader_epoch, isr, replicas, zk_version)
        self.leader_epoch_start_offset = leo
        remotes: dict[int, RemoteReplica] = {}
        for r in self.replicas:
            if r == self.local_broker_id:
                continue
            rep = RemoteReplica() if newly_leader else self.remotes.get(r, RemoteReplica())
            if not newly_leader:  # the previous fetch is taken to be "now, at the epoch start"
                rep.last_fetch_leader_leo, rep.last_fetch_ms = leo, now_ms
            rep.last_caught_up_ms = now_ms if r in self._isr else 0
            remotes[r] = rep
        self.remotes = remotes
        events: list[Event] = []
        if self._hw > leo:
            events.append(self._hw_event(self._hw, leo, reason="capped_at_leo"))
            self.touch()
            self._hw = leo
        return events + self._maybe_increment_hw(leo, now_ms)

    def become_follower(self, leader: int, leader_epoch: int, isr: Iterable[int], replicas: Iterable[int],
                        zk_version: int) -> list[Event]:
        """Kafka's makeFollower: drop the leader-only state; the HW is kept (truncation caps it)."""
        if leader == self.local_broker_id:
            raise ValueError("become_follower with the local broker as leader; use become_leader")
        was_leader = self.is_leader
        self.leader_id = leader
        self._set_state(leader_epoch, isr, replicas, zk_version)
        self.leader_epoch_start_offset = None
        self.remotes = {}
        return [self._ev("leadership_lost", leader=leader, leader_epoch=leader_epoch)] if was_leader else []

    def _set_state(self, leader_epoch: int, isr: Iterable[int], replicas: Iterable[int], zk_version: int) -> None:
        self.touch()   # before the remotes go or are reset: the sessions fetching them look again
        if leader_epoch != self._leader_epoch:
            self._ineligible.clear()
        self._leader_epoch = leader_epoch
        self._isr = tuple(isr)
        self.replicas = tuple(replicas)
        self._zk_version = zk_version
        self._pending = None
        self._isr_change_blocked = False

    def apply_isr_update(self, isr: Iterable[int], zk_version: int, leader_epoch: int, *,
                         log: LogView | None = None, now_ms: int | None = None) -> list[Event]:
        """A newer ISR for the same leader epoch (LeaderAndIsr, UpdateMetadata or AlterIsr answer).

        Applied only when ``leader_epoch`` is ours and ``zk_version`` is higher; it settles any
        pending change (which the controller would now refuse as INVALID_UPDATE_VERSION).  With
        ``log`` and ``now_ms`` a leader also re-evaluates the HW.
        """
        if leader_epoch != self._leader_epoch or zk_version <= self._zk_version:
            return [self._ev("isr_update_ignored", isr=list(isr), zk_version=zk_version, leader_epoch=leader_epoch,
                             current_zk_version=self._zk_version, current_leader_epoch=self._leader_epoch)]
        return self._commit_isr(tuple(isr), zk_version, log, now_ms)

    def _commit_isr(self, isr: tuple[int, ...], zk_version: int, log: LogView | None,
                    now_ms: int | None) -> list[Event]:
        old, settled = self._isr, self._pending
        self.touch()
        self._isr, self._zk_version = isr, zk_version
        self._pending = None
        self._isr_change_blocked = False
        events = [self._ev("replica_isr_changed", old_isr=list(old), isr=list(isr), zk_version=zk_version,
                           leader_epoch=self._leader_epoch, settled=settled.kind if settled else None)]
        if self.is_leader and log is not None and now_ms is not None:
            events += self._maybe_increment_hw(log.log_end_offset, now_ms)
        return events

    # ------------------------------------------------------------------ leader: fetches

    def _check_current_epoch(self, current_leader_epoch: int | None) -> int:
        return leader_epoch_error(current_leader_epoch, self._leader_epoch)

    def check_consumer_fetch(self, fetch_offset: int, last_fetched_epoch: int | None,
                             current_leader_epoch: int | None, log: LogView) -> tuple[int, tuple[int, int] | None]:
        """A consumer's fetch from the leader, before its read (Kafka 2.8's Partition.readRecords): the current
        leader epoch's fencing, leadership, then the last fetched epoch's divergence (Fetch v12), as for a
        follower.  (error, diverging epoch (epoch, end offset) or None)."""
        error = self._check_current_epoch(current_leader_epoch)
        if error == errors.NONE and not self.is_leader:
            error = errors.NOT_LEADER_OR_FOLLOWER
        if error != errors.NONE:
            return error, None
        return divergence(last_fetched_epoch, fetch_offset, log)

    def on_follower_fetch(self, follower_id: int, fetch_offset: int, last_fetched_epoch: int | None,
                          current_leader_epoch: int | None, log: LogView, now_ms: int,
                          log_start_offset: int | None = None) -> FetchOutcome:
        """Handle one partition of a follower fetch: errors, divergence, then the follower's state
        (``log_start_offset``: the follower's own, which the low watermark counts; None: not sent).

        On success ``read_offset`` is where to read from (up to the LEO) and ``high_watermark``
        is the HW to send, taken after this fetch moved it.
        """
        out = FetchOutcome(high_watermark=self._hw)
        out.error = leader_epoch_error(current_leader_epoch, self._leader_epoch)
        if out.error == errors.NONE and self.leader_id != self.local_broker_id:
            out.error = errors.NOT_LEADER_OR_FOLLOWER
        if out.error != errors.NONE:
            return out
        leo = log.log_end_offset
        out.leader_log_end_offset = leo
        if last_fetched_epoch is not None and last_fetched_epoch >= 0:   # (else no divergence to look for)
            out.error, out.diverging_epoch = divergence(last_fetched_epoch, fetch_offset, log)
            if out.error != errors.NONE or out.diverging_epoch is not None:
                return out
        if not log.log_start_offset <= fetch_offset <= leo:
            out.error = OFFSET_OUT_OF_RANGE
            return out
        rep = self.remotes.get(follower_id)
        if rep is None:  # Kafka 2.8: empty records, no error, nothing recorded
            out.events.append(self._ev("unknown_follower_fetch", follower=follower_id, fetch_offset=fetch_offset,
                                       replicas=list(self.replicas)))
            return out
        rep.record_fetch(fetch_offset, leo, now_ms)
        if log_start_offset is not None:
            rep.log_start_offset = log_start_offset
        out.read_offset = fetch_offset
        out.alter_isr = self._maybe_expand_isr(follower_id, rep, now_ms)
        out.events += self._maybe_increment_hw(leo, now_ms)
        out.high_watermark = self._hw
        return out

    def on_idle_follower_fetch(self, follower_id: int, fetch_offset: int, current_leader_epoch: int,
                               leader_leo: int, now_ms: int) -> bool:
        """A partition of a fetch session that the follower did not list: it fetches again at
        ``fetch_offset``, the offset it last listed (``replication.fetch_session``).

        When the follower is in the ISR, at the log end, this broker leads in the epoch the follower
        names, and the HW is the log end, that fetch only records the fetch time
        (:meth:`on_follower_fetch` would change nothing else: no divergence, no HW move, no ISR
        change): do that and return True.  Otherwise return False, and the caller handles it as a
        listed partition."""
        if not self.idle_after_fetch(follower_id, fetch_offset, current_leader_epoch, leader_leo):
            return False
        self.remotes[follower_id].record_fetch(fetch_offset, leader_leo, now_ms)
        return True

    def idle_after_fetch(self, follower_id: int, fetch_offset: int, current_leader_epoch: int,
                         leader_leo: int) -> bool:
        """Whether the follower, as its last fetch left it, is as :meth:`on_idle_follower_fetch` takes it (in the
        ISR, at the log end, which is the HW, in the epoch this broker leads): its next fetch only records the time."""
        rep = self.remotes.get(follower_id)
        return (rep is not None and current_leader_epoch == self._leader_epoch and fetch_offset == leader_leo
                and rep.log_end_offset == fetch_offset and self._hw == leader_leo and follower_id in self._isr
                and self.leader_id == self.local_broker_id)

    def bind_idle(self, follower_id: int, clock: FetchClock, key: object) -> None:
        """Right after :meth:`on_idle_follower_fetch` returned True at a fetch ``clock`` stamped (and allowed
        binding at): the follower's fetch times are read from ``clock`` until :meth:`touch`
        (``replication.remote_replica``)."""
        self.remotes[follower_id].bind(clock, key)

    def follower_bound(self, follower_id: int) -> bool:
        """Whether the follower's fetch times are its session clock's now (:meth:`bind_idle`)."""
        rep = self.remotes.get(follower_id)
        return rep is not None and rep.bound

    def release_follower(self, follower_id: int) -> None:
        """Before the follower's session fetches this partition otherwise than idle (it lists it, or forgot it):
        its fetch times written from its clock, which it no longer reads."""
        rep = self.remotes.get(follower_id)
        if rep is not None:
            rep.unbind()

    def touch(self) -> None:
        """Something changed that may end a follower's idleness here (the shells call it on every change of the
        log a fetch reads: an append, a truncation, a log start move, the replica's stop; this class on its own
        HW, role, leader epoch and ISR changes): every follower whose fetch times its session's clock gives is
        unbound and its session told (``replication.remote_replica``)."""
        for rep in self.remotes.values():
            rep.touch()

    def _can_change_isr(self) -> bool:
        return self.is_leader and self._pending is None and not self._isr_change_blocked

    def set_live_brokers(self, live: Iterable[int], log: LogView | None = None,
                         now_ms: int | None = None) -> list[Event]:
        """The registered brokers, from UpdateMetadata.  With KIP-841 (``settings.kip841``) a follower
        outside the ISR that is no longer registered stops holding the HW back, however recently it
        caught up; Kafka 2.8 waits out replica.lag.time.max.ms."""
        self._live = frozenset(live)
        if self.is_leader and log is not None and now_ms is not None:
            return self._maybe_increment_hw(log.log_end_offset, now_ms)
        return []

    def _is_ineligible(self, replica: int, now_ms: int) -> bool:
        until = self._ineligible.get(replica)
        if until is not None and now_ms >= until:
            del self._ineligible[replica]
            return False
        return until is not None

    def _maybe_expand_isr(self, follower_id: int, rep: RemoteReplica,
                          now_ms: int | None = None) -> AlterIsrProposal | None:
        if not self._can_change_isr() or follower_id in self._isr:
            return None
        if now_ms is not None and self._is_ineligible(follower_id, now_ms):
            return None
        start = self.leader_epoch_start_offset
        if start is None or rep.log_end_offset < self._hw or rep.log_end_offset < start:
            return None
        return self._propose(self._isr + (follower_id,), "expand", (follower_id,))

    def _propose(self, new_isr: tuple[int, ...], kind: str, changed: tuple[int, ...]) -> AlterIsrProposal:
        self._pending = AlterIsrProposal(self.topic, self.partition, new_isr, self._leader_epoch,
                                         self._zk_version, kind, changed)
        return self._pending

    # ------------------------------------------------------------------ leader: HW, shrink

    def _maybe_increment_hw(self, leader_leo: int, now_ms: int) -> list[Event]:
        if self._hw >= leader_leo and not self.settings.kip841:
            return []    # the candidate is at most the log end (KIP-841's check has a side effect: it runs on)
        candidate = leader_leo
        maximal = self.maximal_isr
        lag = self.settings.replica_lag_time_max_ms
        kip841 = self.settings.kip841
        in_isr_counts = not self.settings.planted_hw_ignores_lagging_isr
        for r, rep in self.remotes.items():
            if (in_isr_counts and r in maximal) or (now_ms - rep.last_caught_up_ms <= lag
                                and (not kip841 or (not self._is_ineligible(r, now_ms)
                                                    and (self._live is None or r in self._live)))):
                if rep.log_end_offset < candidate:
                    candidate = rep.log_end_offset
        if candidate <= self._hw:
            return []
        self.touch()
        old, self._hw = self._hw, candidate
        return [self._hw_event(old, candidate, reason="leader")]

    def low_watermark(self, log: LogView) -> int:
        """Kafka 2.8's Partition.lowWatermarkIfLeader: the smallest log start offset of this replica and of every
        follower on a registered broker (as its last fetch said; -1 until it has fetched since this broker became
        leader).  DeleteRecords waits for it to reach the offset asked for."""
        low = log.log_start_offset
        for r, rep in self.remotes.items():
            if (self._live is None or r in self._live) and rep.log_start_offset < low:
                low = rep.log_start_offset
        return low

    def _hw_event(self, old: int, new: int, reason: str) -> Event:
        return self._ev("hw_changed", old=old, new=new, reason=reason, decreased=new < old)

    def on_leader_append(self, log: LogView, now_ms: int) -> list[Event]:
        """After the leader appended (its LEO moved): maybe advance the HW.

        Also the call to make whenever the HW should be re-evaluated (e.g. after
        maybe_shrink_isr: time passing can drop a lagging non-ISR replica from the HW set).
        """
        self.touch()
        return self._maybe_increment_hw(log.log_end_offset, now_ms) if self.is_leader else []

    def out_of_sync_replicas(self, log: LogView, now_ms: int) -> tuple[int, ...]:
        """ISR followers whose LEO differs from the leader's and who have not caught up within the lag."""
        lag, remotes = self.settings.replica_lag_time_max_ms, self.remotes
        late = [r for r in self._isr if r != self.local_broker_id and r in remotes
                and now_ms - remotes[r].last_caught_up_ms > lag]
        if not late:    # (the periodic check at idle: the log end is not even read)
            return ()
        leo = log.log_end_offset
        return tuple(r for r in late if remotes[r].log_end_offset != leo)

    def maybe_shrink_isr(self, log: LogView, now_ms: int) -> AlterIsrProposal | None:
        """The periodic shrink check (Kafka runs it every lag/2)."""
        if not self._can_change_isr():
            return None
        drop = self.out_of_sync_replicas(log, now_ms)
        new_isr = tuple(r for r in self._isr if r not in drop)
        if not drop or not new_isr:
            return None
        return self._propose(new_isr, "shrink", drop)

    def on_alter_isr_result(self, error_code: int, isr: Iterable[int] | None = None, zk_version: int | None = None,
                            leader_epoch: int | None = None, *, proposal: AlterIsrProposal | None = None,
                            log: LogView | None = None, now_ms: int | None = None) -> AlterIsrOutcome:
        """The controller's answer to the pending proposal (pass ``proposal`` to guard against a late
        answer to an older one).  A success or a transient error clears the pending change; after a give-up
        error (ISR_CHANGE_GIVE_UP) it stays pending, as in Kafka 2.8, until a newer state settles it.
        """
        out = AlterIsrOutcome()
        pending = self._pending
        if pending is None or (proposal is not None and proposal != pending):
            out.events.append(self._ev("alter_isr_result_ignored", error=errors.name(error_code),
                                       reason="no matching proposal in flight"))
            return out
        self._pending = None
        if error_code == errors.NONE:
            if isr is None or zk_version is None:
                raise ValueError("a successful AlterIsr answer carries the ISR and its zkVersion")
            epoch = pending.leader_epoch if leader_epoch is None else leader_epoch
            if epoch != self._leader_epoch or zk_version <= self._zk_version:
                out.events.append(self._ev("alter_isr_result_ignored", error="NONE", reason="stale state",
                                           zk_version=zk_version, leader_epoch=epoch))
                return out
            out.applied = True
            self._pending = pending  # so the replica_isr_changed event names what it settled
            out.events += self._commit_isr(tuple(isr), zk_version, log, now_ms)
            return out
        if error_code in ISR_CHANGE_GIVE_UP:
            # Kafka 2.8 gives up but leaves the change pending (Partition.handleAlterIsrResponse): a pending
            # expand's member still counts for the HW, and nothing more is proposed until a newer state
            self._pending = pending
            self._isr_change_blocked = True
            out.fenced = error_code == errors.FENCED_LEADER_EPOCH
        elif error_code == errors.INELIGIBLE_REPLICA and now_ms is not None:
            # the added follower is shutting down, or not (yet) registered at the controller: stop
            # counting it for the HW, and propose it again after a short backoff (a restarted
            # broker becomes eligible as soon as the controller has seen it register)
            for r in set(pending.new_isr) - set(self._isr):
                self._ineligible[r] = now_ms + INELIGIBLE_BACKOFF_MS
            if log is not None and self.is_leader:
                out.events += self._maybe_increment_hw(log.log_end_offset, now_ms)
        else:
            out.retry = True
        out.events.append(self._ev("alter_isr_failed", error=errors.name(error_code), error_code=error_code,
                                   proposal=pending.fields(), retry=out.retry, fenced=out.fenced))
        return out

    # ------------------------------------------------------------------ leader: produce

    def check_produce(self, acks: int, now_ms: int | None = None) -> int:
        """Before appending a produce: NONE, or the error to answer with (``replication.produce``).

        ``now_ms`` is unused (the check is on the committed ISR size only).
        """
        return produce.append_error(acks, self.is_leader, len(self._isr), self.settings.min_insync_replicas)

    def check_acks_all(self, required_offset: int, appended_in_epoch: int | None = None, *,
                       replica_open: bool = True) -> int | None:
        """An acks=all produce waiting for ``required_offset`` (last offset + 1), appended in leader epoch
        ``appended_in_epoch``: its error once done, or None while it must wait
        (``replication.produce.acks_all_outcome``).  ``replica_open`` False: the replica was stopped.
        """
        return produce.acks_all_outcome(
            is_leader=self.is_leader and replica_open, leader_since_epoch=self._leader_since_epoch,
            appended_in_epoch=appended_in_epoch, high_watermark=self._hw, required_offset=required_offset,
            maximal_isr_size=len(self.maximal_isr), min_insync_replicas=self.settings.min_insync_replicas)

    # ------------------------------------------------------------------ follower

    def on_fetch_response(self, leader_hw: int, log: LogView) -> list[Event]:
        """After appending a fetch response: HW = min(leader HW, own LEO) (may go down, as in Kafka)."""
        if self.is_leader:
            return []
        new = max(0, min(leader_hw, log.log_end_offset))
        if new == self._hw:
            return []
        self.touch()
        old, self._hw = self._hw, new
        return [self._hw_event(old, new, reason="follower")]

    def on_truncate(self, new_log_end_offset: int) -> list[Event]:
        """The local log was truncated to ``new_log_end_offset``: the HW cannot stay above it."""
        if self._hw <= new_log_end_offset:
            return []
        self.touch()
        old, self._hw = self._hw, max(0, new_log_end_offset)
        return [self._hw_event(old, self._hw, reason="truncated")]


