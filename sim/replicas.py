"""A simulated broker's replicas: roles from LeaderAndIsr, produce, acks=all waits, ISR changes.

Every decision is ``replication/``'s (``PartitionReplication``, the produce
rules, ``replication.roles``: a LeaderAndIsr's role change); this module only
moves messages and bytes, as node/replicas/ does with threads and gRPC.  The
replica fetches, both sides, are sim/fetching.py's: a fetcher per leader broker
with a fetch session, as the broker's.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from kafkacommon import errors
from kafkacommon.control import marker_record
from kafkacommon.event import Event
from kafkacommon.topic_config import log_config
from replication.broker_state import PartitionInfo
from replication import roles
from replication.partition import PartitionReplication
from replication.partition_types import ReplicaSettings
from sim import rpc
from sim.fetching import SimFetcher, SimLeaderFetches
from sim.log import ProducerBatch, SimLog

TP = tuple[str, int]
ALTER_ISR_TIMEOUT_MS = 2000.0


@dataclass
class Hosted:
    log: SimLog
    repl: PartitionReplication
    fetching_from: tuple[int, int] | None = None     # (leader, leader epoch) while following
    open: bool = True                                 # False once stopped (no longer hosted)
    failed: bool = False                              # its log directory failed (taken offline)
    waiters: list = field(default_factory=list)      # [Waiter] acks=all appends
    parked: list = field(default_factory=list)       # [sim.fetching.Parked] fetches in their long poll


@dataclass
class Waiter:
    required_offset: int
    epoch: int
    deadline_ms: float
    done: Callable[[int], None]


class SimReplicaManager:
    def __init__(self, broker) -> None:
        self.b = broker
        self.world = broker.world
        self.settings = ReplicaSettings(replica_lag_time_max_ms=broker.cfg.replica_lag_time_max_ms,
                                        min_insync_replicas=broker.cfg.min_insync_replicas,
                                        planted_hw_ignores_lagging_isr="hw-ignores-lagging-isr" in broker.cfg.bugs)
        self.hosted: dict[TP, Hosted] = {}
        self.lso_from_hw = "lso-from-hw" in broker.cfg.bugs     # sim/bugs.py: the LSO is the high watermark
        self.topic_configs: dict[str, dict] = {}     # each hosted topic's overrides, read when first hosted
        self.live: frozenset[int] | None = None
        self.on_role: Callable[[str, int, bool, int], None] = lambda t, p, leader, epoch: None
        self.fetchers: dict[int, SimFetcher] = {}     # one per leader broker, as the broker's fetcher threads
        self.fetches = SimLeaderFetches(self)         # the leader's side of followers' fetches

    def log_events(self, events: list[Event]) -> None:
        self.b.log(*events)

    def now(self) -> int:
        return self.b.now()

    # ------------------------------------------------------------------ roles

    def _host(self, tp: TP, is_new: bool = False) -> Hosted | None:
        h = self.hosted.get(tp)
        if h is None:
            log = self.b.disk_log(tp, is_new)
            if log is None:
                return None   # offline (replication.log_dirs)
            hw = min(self.b.hw_checkpoint().get(tp, 0), log.log_end_offset)
            if tp[0] not in self.topic_configs:
                self.topic_configs[tp[0]] = self.b.read_topic_config(tp[0])
            h = self.hosted[tp] = Hosted(log, PartitionReplication(tp[0], tp[1], self.b.id,
                                                                   self._settings(self.topic_configs[tp[0]]),
                                                                   high_watermark=hw))
        return h

    def _settings(self, config: dict) -> ReplicaSettings:
        """The replication settings under a topic's overrides (min.insync.replicas; the rest are the broker's)."""
        lc = log_config(config, lambda key: self.settings.min_insync_replicas if key == "min.insync.replicas" else None)
        return replace(self.settings, min_insync_replicas=lc.min_insync_replicas)

    def reconfigure_topic(self, topic: str, config: dict) -> int:
        """A ``topics/<t>`` change notification (the broker's config-change listener): the hosted partitions
        of ``topic`` take its configs at once, as node/replicas/log_settings.py does."""
        self.topic_configs[topic] = dict(config)
        settings = self._settings(config)
        done = [h for (t, _p), h in self.hosted.items() if t == topic]
        for h in done:
            h.repl.settings = settings
        return len(done)

    def apply_leader_and_isr(self, p: PartitionInfo) -> int:
        """NONE, or KAFKA_STORAGE_ERROR when the replica's log is offline or could not be created."""
        h = self.hosted.get((p.topic, p.partition))
        action = roles.leader_and_isr_action(h.repl if h is not None else None, self.b.id, p.leader, p.leader_epoch)
        if action == roles.ISR:
            self.update_isr(p)
            return errors.NONE
        tp = (p.topic, p.partition)
        h = self._host(tp, p.is_new)
        if h is None:
            return errors.KAFKA_STORAGE_ERROR
        if action == roles.LEADER:
            self._change_role(tp, h, roles.become_leader(h.repl, h.log, h.log.epoch_cache.latest_epoch,
                                                         p.leader_epoch, p.isr, p.replicas, p.zk_version, self.live,
                                                         self.now()))
        else:
            self._change_role(tp, h, roles.become_follower(h.repl, p.leader, p.leader_epoch, p.isr, p.replicas,
                                                           p.zk_version))
        return errors.NONE

    def take_offline(self, tp: TP) -> None:
        """A replica of a failed log directory: served no more; its acks=all waits and parked fetches answered
        KAFKA_STORAGE_ERROR; the coordinator unloads it (as the broker's replica manager)."""
        h = self.hosted.pop(tp, None)
        if h is None:
            return
        h.fetching_from = None
        h.open, h.failed = False, True
        self._unassign(tp)
        waiters, h.waiters = h.waiters, []
        for w in waiters:
            w.done(errors.KAFKA_STORAGE_ERROR)
        self.fetches.wake(h)   # its parked fetches: KAFKA_STORAGE_ERROR now
        self.on_role(tp[0], tp[1], False, h.repl.leader_epoch)

    def missing(self, tp: TP) -> int:
        """The error for a replica not hosted here: KAFKA_STORAGE_ERROR when it is offline."""
        return errors.KAFKA_STORAGE_ERROR if self.b.dirs.is_offline(tp) else errors.NOT_LEADER_OR_FOLLOWER

    def _change_role(self, tp: TP, h: Hosted, change: roles.RoleChange) -> None:
        """Carry out replication.roles' RoleChange: the epoch cache, the log lines, the waiters and parked
        fetches (answered by the core's new role), the coordinator's hook, the fetches."""
        self._unassign(tp)
        if change.epoch_start is not None:
            h.log.epoch_cache.assign(*change.epoch_start)
        self.log_events(change.events)
        if not change.is_leader:   # a leadership lost answers its acks=all waits first, then the parked fetches
            self._settle_waiters(h)
        h.fetching_from = change.fetch_from
        self.wake(h)   # parked fetches are answered by the new role now
        self.on_role(tp[0], tp[1], change.is_leader, change.leader_epoch)
        if change.fetch_from is not None:
            leader, epoch = change.fetch_from
            f = self.fetchers.get(leader)
            if f is None:
                f = self.fetchers[leader] = SimFetcher(self, leader)
            f.assign(tp, h, epoch)

    def _unassign(self, tp: TP) -> None:
        for f in self.fetchers.values():
            f.unassign(tp)

    def set_live_brokers(self, live: set[int]) -> None:
        if frozenset(live) == self.live:
            return
        self.live = frozenset(live)
        for h in self.hosted.values():
            self.log_events(h.repl.set_live_brokers(self.live, h.log, self.now()))
            self.wake(h)

    def update_isr_if_newer(self, p: PartitionInfo) -> None:
        self.update_isr(p, newer_only=True)

    def update_isr(self, p: PartitionInfo, newer_only: bool = False) -> None:
        """replication.roles' ISR update, then what waits on the partition is woken."""
        h = self.hosted.get((p.topic, p.partition))
        events = None if h is None else roles.isr_update(h.repl, p.leader_epoch, p.zk_version, p.isr, h.log,
                                                         self.now(), newer_only)
        if events is not None:
            self.log_events(events)
            self.wake(h)

    def stop_replica(self, tp: TP) -> None:
        h = self.hosted.pop(tp, None)
        if h is None:
            return
        h.fetching_from = None
        h.open = False
        self._unassign(tp)
        self._settle_waiters(h, replica_open=False)
        self.fetches.wake(h)   # its parked fetches: NOT_LEADER_OR_FOLLOWER now
        self.on_role(tp[0], tp[1], False, h.repl.leader_epoch)

    # ------------------------------------------------------------------ leader: appends and waits

    def append(self, tp: TP, records: list[tuple[bytes | None, bytes | None]], acks: int, timeout_ms: float,
               done: Callable[[int, int], None], producer: ProducerBatch | None = None) -> None:
        """Append as leader; ``done(error, base offset)`` now (acks 0/1, errors) or once the HW covers it.
        ``producer``: the batch's producer fields, checked first as the broker does
        (replication/producer_state.py ``check_batch``): a duplicate is answered with its first offsets."""
        h = self.hosted.get(tp)
        if h is None:
            done(self.missing(tp), -1)
            return
        code = h.repl.check_produce(acks, self.now())
        if code != errors.NONE:
            done(code, -1)
            return
        if producer is not None:
            # the simulator's clients always send a sequence; its coordinators never do
            verdict = h.log.producers.check_batch(producer.producer_id, producer.producer_epoch,
                                                  producer.base_sequence, len(records), producer.transactional,
                                                  from_coordinator=producer.base_sequence < 0)
            code, dup = verdict.error, verdict.duplicate
            if code != errors.NONE:
                done(code, -1)
                return
            if dup is not None:
                self._await(h, dup.last_offset + 1, h.repl.leader_epoch, acks, timeout_ms,
                            lambda c, b=dup.first_offset: done(c, b if c == errors.NONE else -1))
                return
        self._leader_append(h, records, producer, acks, timeout_ms, done)

    def append_marker(self, tp: TP, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                      timeout_ms: float, done: Callable[[int, int], None]) -> None:
        """A transaction marker (WriteTxnMarkers) as the leader, acks=all: the producer's epoch and the
        coordinator's epoch checked first (node/replicas/appends.py's ``append_marker``)."""
        h = self.hosted.get(tp)
        if h is None:
            done(errors.NOT_LEADER_OR_FOLLOWER, -1)
            return
        code = h.repl.check_produce(-1, self.now())
        if code == errors.NONE:
            code = h.log.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        if code != errors.NONE:
            done(code, -1)
            return
        self._leader_append(h, [marker_record(commit, coordinator_epoch)],
                            ProducerBatch(producer_id, producer_epoch, -1, True, True), -1, timeout_ms, done)

    def _leader_append(self, h: Hosted, records: list, producer: ProducerBatch | None, acks: int,
                       timeout_ms: float, done: Callable[[int, int], None]) -> None:
        epoch = h.repl.leader_epoch
        try:
            base = h.log.append(epoch, records, self.now(), producer)
        except OSError as e:
            self.b.dir_failed(self.b.dir_of(h.log), "append", e)
            done(errors.KAFKA_STORAGE_ERROR, -1)
            return
        self.b.disk_wrote(h.log)
        self.log_events(h.repl.on_leader_append(h.log, self.now()))
        self._await(h, h.log.log_end_offset, epoch, acks, timeout_ms, lambda c: done(c, base if c == errors.NONE
                                                                                        else -1), woke=False)
        self.wake(h)

    def _await(self, h: Hosted, required_offset: int, epoch: int, acks: int, timeout_ms: float,
               done: Callable[[int], None], woke: bool = True) -> None:
        """acks 0/1: done at once; acks=all: once the HW covers ``required_offset`` (or the wait ends)."""
        if acks != -1:
            done(errors.NONE)
            return
        w = Waiter(required_offset, epoch, self.world.now_ms + timeout_ms, done)
        h.waiters.append(w)
        self.world.on_node(self.b.node, timeout_ms, self._expire, h, w)
        if woke:
            self.wake(h)

    def _expire(self, h: Hosted, w: Waiter) -> None:
        if w in h.waiters:
            h.waiters.remove(w)
            w.done(errors.REQUEST_TIMED_OUT)

    def _settle_waiters(self, h: Hosted, replica_open: bool = True) -> None:
        """The acks=all appends the core now answers (after a role change, or the replica stopped), first."""
        waiters, h.waiters = h.waiters, []
        for w in waiters:
            code = h.repl.check_acks_all(w.required_offset, w.epoch, replica_open=replica_open)
            if code is None:
                h.waiters.append(w)
            else:
                w.done(code)

    def wake(self, h: Hosted) -> None:
        """Answer the parked fetches that no longer wait, and complete the acks=all waits the core now says are
        done (after anything that may move the HW, the log end or the role)."""
        self.fetches.wake(h)   # replication.long_poll: an append, a role change or a newer epoch ends a wait
        if not h.waiters:
            return
        keep = []
        for w in h.waiters:
            code = h.repl.check_acks_all(w.required_offset, w.epoch)
            if code is None:
                keep.append(w)
            else:
                w.done(code)
        h.waiters = keep

    def check_shrinks(self) -> None:
        """The periodic ISR shrink check (every replica.lag.time.max.ms / 2)."""
        for tp, h in sorted(self.hosted.items()):
            if not h.repl.is_leader:
                continue
            prop = h.repl.maybe_shrink_isr(h.log, self.now())
            if prop is not None:   # as the broker's _shrink_isrs: the HW moves only when the AlterIsr lands
                self.b.log(Event("isr_change_proposed", prop.fields()))
                self.send_alter_isr(h, prop)

    # ------------------------------------------------------------------ AlterIsr

    def send_alter_isr(self, h: Hosted, prop) -> None:
        ctl = self.b.state.controller_id
        target = self.b.cluster.brokers.get(ctl)
        if target is None:
            self.world.on_node(self.b.node, 100.0, self._answer_isr, h, prop, None)
            return
        items = [((prop.topic, prop.partition), prop.leader_epoch, prop.new_isr, prop.zk_version)]
        rpc.call(self.world, self.b.node, target.node, target.handle_alter_isr,
                 (self.b.id, self.b.state.broker_epoch, items),
                 lambda ans: self._answer_isr(h, prop, ans), ALTER_ISR_TIMEOUT_MS)

    def _answer_isr(self, h: Hosted, prop, answer: Any) -> None:
        if self.hosted.get((prop.topic, prop.partition)) is not h:
            return
        if answer is None:
            code, state, version = errors.REQUEST_TIMED_OUT, None, -1
        else:
            top, per = answer
            code, state, version = (top, None, -1) if top != errors.NONE else per.get(
                (prop.topic, prop.partition), (errors.UNKNOWN_TOPIC_OR_PARTITION, None, -1))
        out = h.repl.on_alter_isr_result(code, state.isr if state is not None else None,
                                         version if state is not None else None,
                                         state.leader_epoch if state is not None else None,
                                         proposal=prop, log=h.log, now_ms=self.now())
        self.log_events(out.events)
        self.wake(h)

    # ------------------------------------------------------------------ fetches

    def handle_fetch(self, req: Any, reply: Callable[[Any], None]) -> None:
        """A follower's fetch (sim/fetching.py's leader side)."""
        self.fetches.handle_fetch(req, reply)

    def read_committed(self, tp: TP, offset: int, max_records: int = 500) -> tuple[int, int, list]:
        """A consumer's read (replica id -1): (error, HW, [(offset, key, value)]) up to the HW."""
        h = self.hosted.get(tp)
        if h is None or not h.repl.is_leader:
            return (self.missing(tp) if h is None else errors.NOT_LEADER_OR_FOLLOWER), -1, []
        hw = h.repl.high_watermark
        end = min(hw, offset + max_records)
        return errors.NONE, hw, [(o, h.log.records[o][1], h.log.records[o][2]) for o in range(max(offset, 0), end)]

    def read_isolated(self, tp: TP, offset: int, read_committed: bool, max_records: int = 500) -> tuple:
        """A consumer's Fetch with its isolation level: (error, HW, last stable offset, [(offset, key, value,
        producer id, control)], [(producer id, first offset)] of the aborted transactions in the range).
        read_committed reads up to the last stable offset, as the real broker (node/replicas/replica_manager.py)."""
        h = self.hosted.get(tp)
        if h is None or not h.repl.is_leader:
            return errors.NOT_LEADER_OR_FOLLOWER, -1, -1, [], []
        hw = h.repl.high_watermark
        lso = h.log.last_stable_offset(hw, self.lso_from_hw)
        upto = lso if read_committed else hw
        start = max(offset, 0)
        end = min(upto, start + max_records)
        out = []
        for o in range(start, end):
            meta = h.log.meta_at(o)
            out.append((o, h.log.records[o][1], h.log.records[o][2], -1 if meta is None else meta.producer_id,
                        meta is not None and meta.control))
        aborted = h.log.aborted_between(start, end) if read_committed and end > start else []
        return errors.NONE, hw, lso, out, aborted
