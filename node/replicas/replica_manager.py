"""The broker's partitions: their logs on disk, produce and fetch, and follower fetching.

The I/O shell around two cores: :class:`node.storage.PartitionLog` (the log
on disk) and :class:`replication.partition.PartitionReplication` (HW, ISR and the
rules of Kafka's replication, sans-IO).  LeaderAndIsr requests make this
broker a leader or a follower of a partition; a follower runs a fetcher
thread that long-polls the leader; the leader's Fetch handler feeds the
core, which moves the high watermark and proposes ISR changes, which go to
the controller as AlterIsr requests.

The logs live in the directories of ``log.dirs`` (``node.replicas.log_dir_manager``).  An I/O
error in one takes it offline: its replicas leave ``hosted`` and answer KAFKA_STORAGE_ERROR
(Kafka's ``HostedPartition.Offline``), then ``on_dir_failure`` (the broker) notifies the
controller or halts.
"""
from __future__ import annotations

import logging
import shutil
import threading
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from kafkacommon import errors
from node.clock import now_ms
from replication.broker_state import PartitionInfo
from node.events import EventLog
from node.replicas.fetcher import LeaderFetcher, assign_by_leader, repositioned
from node.replicas.housekeeping import CleanerSettings, HousekeepingMixin
from node.replicas.log_settings import LogSettingsMixin
from node.replicas.alter_isr import AlterIsrSender
from node.replicas.appends import AppendsMixin
from node.replicas.delete_records import DeleteRecordsMixin
from node.replicas.hosted import AckWaiter, Appended, Hosted
from node.replicas.leader_fetch import LeaderFetchHandler
from node.replicas.purgatory import Purgatory
from node.replicas.reads import ReadsMixin
from node.replicas.side_by_side import SideBySide
from node.replicas.log_dir_manager import LogDirManager
from node.storage import PartitionLog
from node.storage.checkpoint import PreparedCheckpoint
from node.storage.errors import KafkaStorageError
from proto import kafkasim_pb2 as pb
from replication import roles
from replication.fetch_session import LeaderSessions
from replication.log_dirs import DirFailure
from replication.partition import PartitionReplication
from replication.partition_types import ReplicaSettings

log = logging.getLogger(__name__)

TP = tuple[str, int]
INITIAL_TASK_DELAY_S = 30.0  # Kafka's LogManager.InitialTaskDelayMs
MAKE_LEADERS_TOGETHER = 16   # hosted replicas of one LeaderAndIsr taking up leadership side by side
STORAGE = errors.KAFKA_STORAGE_ERROR


__all__ = ["Appended", "CleanerSettings", "Hosted", "ReplicaManager"]


class ReplicaManager(LogSettingsMixin, HousekeepingMixin, AppendsMixin, DeleteRecordsMixin, ReadsMixin):
    def __init__(self, broker_id: int, log_dir: Path | list[Path], settings: ReplicaSettings, events: EventLog,
                 broker_epoch: Callable[[], int], endpoint_of: Callable[[int], str | None],
                 controller_endpoint: Callable[[], str | None], fetch_wait_ms: int, segment_bytes: int,
                 checkpoint_interval_ms: int, topic_config: Callable[[str], dict] = lambda t: {},
                 cleaner: "CleanerSettings | None" = None, log_defaults: Callable[[str], Any] | None = None,
                 retention_check_interval_ms: int = 300_000, fetch_max_bytes: int = 1 << 20,
                 on_dir_failure: Callable[[DirFailure], None] | None = None,
                 shutting_down: Callable[[], bool] = lambda: False):
        self.broker_id = broker_id
        # whether this broker is shutting down (from the stop signal on): it then follows without fetching
        self.shutting_down = shutting_down
        dirs = [Path(log_dir)] if isinstance(log_dir, (str, Path)) else [Path(d) for d in log_dir]
        self.log_dir = dirs[0]
        # after a log directory failed and its replicas went offline: the broker's ZooKeeper notification or halt
        self.on_dir_failure = on_dir_failure
        self.settings = settings
        self.events = events
        self.broker_epoch = broker_epoch  # () -> this broker's epoch
        self.endpoint_of = endpoint_of    # broker id -> its address, or None
        self.fetch_wait_ms = fetch_wait_ms
        self.fetch_max_bytes = fetch_max_bytes  # replica.fetch.max.bytes, per partition
        self.segment_bytes = segment_bytes
        self._topic_config = topic_config
        # the broker's defaults of topic configs, by Kafka's broker key (None: Kafka's default); without
        # ``log_defaults``, segment_bytes is log.segment.bytes
        self._log_default = log_defaults or (lambda key: segment_bytes if key == "log.segment.bytes" else None)
        self.hosted: dict[TP, Hosted] = {}
        self._live: frozenset[int] | None = None  # registered brokers, from UpdateMetadata
        # (topic, partition, is_leader, leader_epoch) after each role change: the group coordinator's hook
        self.on_leadership: Callable[[str, int, bool, int], None] | None = None
        self.fetchers: dict[int, LeaderFetcher] = {}  # one per leader broker, as Kafka's fetcher threads
        self._lock = threading.Lock()
        # (thread id, lines): while one LeaderAndIsr step runs in that thread, the lines it logs, each stamped at
        # its own time, written together when the step is done (``_lines_held``)
        self._held: tuple[int, list[dict[str, Any]]] | None = None
        self._data = threading.Condition()  # notified on every append or HW move: wakes long polls
        self._wake_owed = False             # appends made with wake_later whose long polls wait for wake_fetches()
        self._stopping = threading.Event()
        self._alter_isr = AlterIsrSender(broker_id, broker_epoch, controller_endpoint, events.emit,
                                         self.log_events, self._wake, self._notify, self._stopping)
        self._purgatory = Purgatory(self._waiter_outcome)
        self._make_leaders = SideBySide(MAKE_LEADERS_TOGETHER)   # started with the first LeaderAndIsr
        self._fetches = LeaderFetchHandler(  # the leader's Fetch handler, with its fetch sessions (KIP-227)
            self.hosted, LeaderSessions(first_id=time.time_ns() // 1_000_000), self._lock, self._data,
            self._stopping, self.log_events, self._wake, self._alter_isr.send, offline=self._offline)
        self.dirs = LogDirManager(dirs, events.emit, self._dir_failed)
        self._hw_at_start = self.dirs.hw_at_start
        self._tasks = [threading.Thread(target=self._every, args=(settings.replica_lag_time_max_ms / 2000,
                                                                  self._shrink_isrs), daemon=True,
                                        name="isr-shrink"),
                       threading.Thread(target=self._every, args=(checkpoint_interval_ms / 1000,
                                                                  self.checkpoint_hws), daemon=True,
                                        name="hw-checkpoint")]
        self.cleaner = cleaner
        if cleaner is not None and cleaner.enable:
            self._tasks.append(threading.Thread(target=self._every, args=(cleaner.backoff_ms / 1000, self.clean_logs),
                                                daemon=True, name="log-cleaner"))
        # Kafka's LogManager runs retention first InitialTaskDelayMs (30 s) after start, then every interval;
        # an interval shorter than that runs first after one interval (docs/deviations.md)
        retention_s = retention_check_interval_ms / 1000
        self._tasks.append(threading.Thread(target=self._every, args=(retention_s, self.retain_logs,
                                                                      min(INITIAL_TASK_DELAY_S, retention_s)),
                                            daemon=True, name="retention"))
        started, flusher_ran = now_ms(), threading.Event()
        self._tasks.append(threading.Thread(target=self._every, args=(1.0, lambda: self.purge_and_flush(
            started, flusher_ran)), daemon=True, name="log-flusher"))
        for t in self._tasks:
            t.start()
        self.dirs.start()

    # ------------------------------------------------------------------ roles (from LeaderAndIsr)

    def _host(self, tp: TP, configs: dict[str, dict] | None = None, is_new: bool = False) -> Hosted | None:
        """The hosted replica, opening its log first if needed. Roles are applied one
        LeaderAndIsr at a time, so the log and the topic's config (a ZooKeeper read) are
        loaded outside the partitions lock, which only guards the insertion.

        ``configs`` memoises the topic configs over one LeaderAndIsr request: a
        broker taking 1,000 partitions of one topic reads and decodes its
        znode once, not once per partition.  None: the replica is offline (its log directory is, or no
        directory could take its log; ``replication.log_dirs``' placement)."""
        h = self.hosted.get(tp)
        if h is not None:
            return h
        configs = {} if configs is None else configs
        overrides = configs.get(tp[0])
        if overrides is None:
            overrides = configs[tp[0]] = self._topic_config(tp[0])
        lc = self.resolve_log_config(tp[0], overrides)
        settings = replace(self.settings, min_insync_replicas=lc.min_insync_replicas)
        plog, why = self.dirs.open_in(tp, is_new, lambda d: PartitionLog(
            d, tp[0], tp[1], segment_bytes=lc.segment_bytes, segment_ms=lc.max_segment_ms,
            index_interval_bytes=lc.index_interval_bytes, on_io_error=self.dirs.report))
        if plog is None:
            self.log_events([("replica_offline", dict(topic=tp[0], partition=tp[1], reason=why))])
            return None
        assert isinstance(plog, PartitionLog)
        if plog.recovery.truncated_bytes:
            self.log_events([("log_recovered", dict(topic=tp[0], partition=tp[1],
                                                    truncated_bytes=plog.recovery.truncated_bytes,
                                                    dropped_batches=plog.recovery.dropped_batches,
                                                    log_end_offset=plog.recovery.log_end_offset))])
        repl = PartitionReplication(tp[0], tp[1], self.broker_id, settings,
                                    high_watermark=min(self._hw_at_start.get(tp, 0), plog.log_end_offset))
        h = Hosted(plog, repl)
        self.apply_log_config(h, overrides, lc)
        plog.last_flush_ms = now_ms()
        with self._lock:
            h = self.hosted.setdefault(tp, h)
        if h.log is not plog:
            plog.close()
        return h

    def apply_leader_and_isrs(self, parts: Iterable[PartitionInfo]) -> dict[TP, int]:
        """One LeaderAndIsr request's partitions, reading each topic's config once; returns the partitions that
        failed: KAFKA_STORAGE_ERROR (the replica is offline now).

        In ``replication.roles.leader_and_isr_order``'s steps (the simulator's too); the hosted replicas that now
        lead are taken up side by side (``node.replicas.side_by_side``), each with the same steps under its own
        lock: the filesystem commits their epoch checkpoints' fsyncs together, so a request moving many leaders
        here (a controlled shutdown elsewhere) costs about one fsync's wait, not one per partition.  The other two
        steps wake the parked long polls once each, when done (Kafka's makeFollowers completes its delayed fetches
        after making every partition a follower): a wake makes every parked fetch look at its whole session again.
        Those two steps' event lines are written together when the step is done, each stamped at its own time
        (``_lines_held``)."""
        self._make_leaders.start()
        configs: dict[str, dict] = {}
        failed = {}
        first, together, last = roles.leader_and_isr_order(
            parts, lambda p: h.repl if (h := self.hosted.get((p.topic, p.partition))) is not None else None,
            self.broker_id)

        def apply(p: PartitionInfo, fetches: list | None = None) -> None:
            code = self.apply_leader_and_isr(p, configs, fetches)
            if code != errors.NONE:
                failed[(p.topic, p.partition)] = code
        # a step's new followers start fetching together once it is done (Kafka's makeFollowers adds the
        # fetchers once for all of them): a fetcher's parked poll is cut short once, not once per partition
        fetches: list = []
        try:
            with self._lines_held():
                for p in first:
                    apply(p, fetches)
        finally:
            self._start_fetching(fetches)
            if first:
                self._notify()
        if len(together) > 1:
            self._make_leaders.run(apply, together)
        elif together:
            apply(together[0])
        fetches = []
        try:
            with self._lines_held():
                for p in last:
                    apply(p, fetches)
        finally:
            self._start_fetching(fetches)
            if last:
                self._notify()
        return failed

    def apply_leader_and_isr(self, p: PartitionInfo, configs: dict[str, dict] | None = None,
                             fetches: list | None = None) -> int:
        """A LeaderAndIsr for this replica: a new role, or (same leader epoch) a newer ISR.  Returns NONE, or
        KAFKA_STORAGE_ERROR when its log could not be opened or written (Kafka's makeLeaders/makeFollowers).
        ``fetches``: where a new follower's fetch goes for :meth:`_start_fetching` (None: it starts at once); given,
        waking the parked long polls is the caller's too."""
        h = self.hosted.get((p.topic, p.partition))
        action = roles.leader_and_isr_action(h.repl if h is not None else None, self.broker_id, p.leader,
                                             p.leader_epoch)
        try:
            if action == roles.ISR:
                self.update_isr(p, notify=fetches is None)
            elif action == roles.LEADER:
                return self.become_leader(p, configs, notify=fetches is None)
            else:
                return self.become_follower(p, configs, fetches)
        except KafkaStorageError:
            return STORAGE
        return errors.NONE

    def become_leader(self, p: PartitionInfo, configs: dict[str, dict] | None = None, notify: bool = True) -> int:
        tp = (p.topic, p.partition)
        h = self._host(tp, configs, p.is_new)
        if h is None:
            return STORAGE
        self._unassign(tp, h)
        # a new epoch's checkpoint written and fsynced before the lock, only renamed under it if still the same
        # (LeaderEpochCache.assign): the other ISR members' fetches, which take the lock, wait for no fsync
        prepared = h.log.prepare_epoch(p.leader_epoch)
        with h.cond:   # (a .tmp file an I/O error leaves behind goes when the log is loaded)
            change = roles.become_leader(h.repl, h.log, h.log.epoch_cache.latest_epoch, p.leader_epoch, p.isr,
                                         p.replicas, p.zk_version, self._live, now_ms())
            self._apply_role(h, change, prepared)
        self._announce_role(tp, h, change, notify=notify)
        return errors.NONE

    def become_follower(self, p: PartitionInfo, configs: dict[str, dict] | None = None,
                        fetches: list | None = None) -> int:
        tp = (p.topic, p.partition)
        h = self._host(tp, configs, p.is_new)
        if h is None:
            return STORAGE
        self._unassign(tp, h)
        with h.cond:
            change = roles.become_follower(h.repl, p.leader, p.leader_epoch, p.isr, p.replicas, p.zk_version,
                                           shutting_down=self.shutting_down())
            self._apply_role(h, change)
        self._announce_role(tp, h, change, fetches, notify=fetches is None)
        return errors.NONE

    def _apply_role(self, h: Hosted, change: roles.RoleChange, prepared: PreparedCheckpoint | None = None) -> None:
        """With ``h.cond`` held: replication.roles' RoleChange, to the log, the fetch state and the waiters (a
        new leader epoch's checkpoint in place under the lock, as Kafka's makeLeader: written, fsynced and renamed
        here, or ``prepared``'s, written and fsynced before the lock, renamed here)."""
        if change.epoch_start is not None:
            h.log.assign_epoch(*change.epoch_start, prepared=prepared)
        elif prepared is not None:
            prepared.discard()
        h.fetching_from = change.fetch_from
        self.log_events(change.events)
        self._wake(h)

    def _announce_role(self, tp: TP, h: Hosted, change: roles.RoleChange, fetches: list | None = None,
                       notify: bool = True) -> None:
        """After the lock: wake long polls (unless ``notify`` is False: the caller wakes them once for its step), tell
        the group coordinator, and fetch from the new leader (now, or with the rest of ``fetches``)."""
        if notify:
            self._notify()
        self._role_changed(tp[0], tp[1], change.is_leader, change.leader_epoch)
        if change.fetch_from is not None:
            leader, epoch = change.fetch_from
            item = (leader, tp, h, epoch)
            if fetches is None:
                self._start_fetching([item])
            else:
                fetches.append(item)

    def log_starts_moved(self, moved: list) -> None:
        """(leader, tp) of followed partitions whose log start this broker's retention moved: their fetchers'
        next requests list them."""
        repositioned(self.fetchers, self._lock, moved)

    def _start_fetching(self, fetches: list) -> None:
        """Hand (leader, tp, hosted, leader epoch) items to each leader's fetcher, all of a leader's at once."""
        assign_by_leader(self, self.fetchers, self._lock, fetches)

    def set_live_brokers(self, live: set[int]) -> None:
        """From UpdateMetadata: leaders stop waiting for followers that are gone."""
        if frozenset(live) == self._live:
            return  # the periodic re-send: nothing changed
        self._live = frozenset(live)
        for h in list(self.hosted.values()):
            with h.cond:
                if h.log.closed:
                    continue
                self.log_events(h.repl.set_live_brokers(self._live, h.log, now_ms()))
                self._wake(h)
        self._notify()

    def update_isr_if_newer(self, p: PartitionInfo) -> None:
        """From UpdateMetadata: a newer ISR of the same leader epoch (e.g. after an AlterIsr)."""
        self.update_isr(p, newer_only=True)

    def update_isr(self, p: PartitionInfo, newer_only: bool = False, notify: bool = True) -> None:
        """replication.roles' ISR update (a LeaderAndIsr of the same role, or UpdateMetadata's newer ISR); the long
        polls woken after it unless ``notify`` is False (the caller wakes them once for its step)."""
        h = self.hosted.get((p.topic, p.partition))
        if h is None:
            return
        with h.cond:
            events = roles.isr_update(h.repl, p.leader_epoch, p.zk_version, p.isr, h.log, now_ms(), newer_only)
            if events is None:
                return
            self.log_events(events)
            self._wake(h)
        if notify:
            self._notify()

    def stop_replica(self, tp: TP, delete: bool) -> int:
        """StopReplica: NONE, or KAFKA_STORAGE_ERROR for an offline replica (Kafka's stopReplicas)."""
        if self._offline(tp):
            return STORAGE
        with self._lock:
            h = self.hosted.pop(tp, None)
        if h is None:
            if delete:   # stopped already (a reassignment's StopReplica, then its deletion): the files go now
                d = self.dirs.where(tp)
                if d is not None:
                    shutil.rmtree(Path(d) / f"{tp[0]}-{tp[1]}", ignore_errors=True)
                    self.dirs.removed(tp)
            return errors.NONE
        self._unassign(tp, h)
        with h.cond:
            h.fetching_from = None
            try:
                h.log.close()
            except KafkaStorageError:
                pass   # its directory is offline now
            self._wake(h)
        if delete:
            shutil.rmtree(h.log.dir, ignore_errors=True)
            self.dirs.removed(tp)
        self._role_changed(tp[0], tp[1], False, h.repl.leader_epoch)
        return errors.NONE

    # ------------------------------------------------------------------ offline log directories

    def _offline(self, tp: TP) -> bool:
        return self.dirs.is_offline(tp)

    def _dir_failed(self, failure: DirFailure) -> None:
        """The log-dir-failure-handler thread, once per directory that went offline (Kafka's
        handleLogDirFailure): its replicas stop being served, then the broker is told."""
        self.log_events(failure.events)
        for tp in failure.partitions:
            self._take_offline(tp)
        if self.on_dir_failure is not None:
            self.on_dir_failure(failure)

    def _take_offline(self, tp: TP) -> None:
        """A replica of a failed directory: out of ``hosted`` and its fetcher, its files closed unflushed, its
        acks=all waiters answered KAFKA_STORAGE_ERROR, long polls woken; the group coordinator unloads it
        (docs/deviations.md)."""
        with self._lock:
            h = self.hosted.pop(tp, None)
        if h is None:
            return
        self._unassign(tp, h)
        with h.cond:
            h.fetching_from = None
            waiters, h.waiters = h.waiters, []
            for w in waiters:
                w.settled = True
            h.log.close_handles()
            h.repl.touch()
            h.cond.notify_all()
        for w in waiters:
            self._purgatory.complete(w, STORAGE)
        self._notify()
        self._role_changed(tp[0], tp[1], False, h.repl.leader_epoch)

    def _role_changed(self, topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None:
        if self.on_leadership is not None:
            self.on_leadership(topic, partition, is_leader, leader_epoch)

    def _unassign(self, tp: TP, h: Hosted) -> None:
        with self._lock:
            for f in self.fetchers.values():
                f.unassign(tp)

    def _notify(self) -> None:
        with self._data:
            self._data.notify_all()
            self._fetches.notify_async()

    def _wake(self, h: Hosted, done: list[tuple[AckWaiter, int]] | None = None) -> None:
        """Called with ``h.cond`` held after anything that may move the HW or the role:
        wakes blocked produce requests and completes acks=all waiters that are done: their
        callbacks go to the purgatory's thread, or (those that only signal: ``AckWaiter.inline``) into
        ``done`` for the caller to run (``purgatory.run_callbacks``) once it has let go of the lock.
        Followers' sessions that left the partition idle look at it again (``PartitionReplication.touch``)."""
        h.repl.touch()
        h.cond.notify_all()
        if h.waiters:
            keep = []
            for w in h.waiters:
                code = self._waiter_outcome(h, w)
                if code is None:
                    keep.append(w)
                    continue
                w.settled = True
                if done is not None and w.inline:
                    done.append((w, code))
                else:
                    self._purgatory.complete(w, code)
            h.waiters[:] = keep

    @staticmethod
    def _waiter_outcome(h: Hosted, w: AckWaiter) -> int | None:
        """With ``h.cond`` held: the core's answer for an acks=all waiter (None: it still waits)."""
        return h.repl.check_acks_all(w.required, w.leader_epoch, replica_open=not h.log.closed)

    def wait_for_data(self, timeout_s: float) -> None:
        """Block until the next append or HW move anywhere on this broker, or ``timeout_s``
        (a consumer fetch's min_bytes wait)."""
        with self._data:
            self._data.wait(max(timeout_s, 0))

    def partition_lock(self, tp: TP) -> threading.Condition | None:
        """The lock that guards one hosted partition (re-entrant), or None when it is not hosted."""
        h = self.hosted.get(tp)
        return None if h is None else h.cond

    def describe_log_dirs(self, partitions: set[TP] | None = None) -> list:
        """DescribeLogDirs (``node.replicas.log_dir_manager.LogDirManager.describe_logs``)."""
        return self.dirs.describe_logs(self.hosted, partitions)

    def replica_statuses(self) -> list[pb.ReplicaStatus]:
        out = []
        for (t, p), h in sorted(list(self.hosted.items())):
            with h.cond:
                if h.log.closed:
                    continue
                out.append(pb.ReplicaStatus(topic=t, partition=p, is_leader=h.repl.is_leader,
                                            leader_epoch=h.repl.leader_epoch,
                                            log_start_offset=h.log.log_start_offset,
                                            log_end_offset=h.log.log_end_offset,
                                            high_watermark=h.repl.high_watermark,
                                            isr=list(h.repl.isr) if h.repl.is_leader else []))
        return out

    def led_with_followers(self, among: Iterable[TP] | None = None) -> set[TP]:
        """The partitions this broker leads that have another replica: those a controlled shutdown moves away
        (only those ``among`` these, when given)."""
        hosted = self.hosted
        items = list(hosted.items()) if among is None else [(tp, h) for tp in among if (h := hosted.get(tp))]
        return {tp for tp, h in items if not h.log.closed and h.repl.is_leader and len(h.repl.replicas) > 1}

    def parked_fetches(self) -> dict[int, int]:
        """Followers' fetches now long-polling here (so a test can tell that a paused follower's
        last request has been answered before it appends what that follower must not get)."""
        return self._fetches.parked()

    def fetch(self, req: pb.FetchRequest) -> pb.FetchResponse:
        """A follower's or a consumer's Fetch (``node.replicas.leader_fetch``)."""
        return self._fetches.fetch(req)

    async def fetch_async(self, req: pb.FetchRequest, executor: Any = None) -> pb.FetchResponse:
        """:meth:`fetch` on an event loop, its long poll a coroutine (the gRPC servicer's); what may
        wait for a busy partition lock runs on ``executor``."""
        return await self._fetches.fetch_async(req, executor)

    # ------------------------------------------------------------------ ISR changes

    def _shrink_isrs(self) -> None:
        for h in list(self.hosted.values()):
            with h.cond:
                if not h.repl.is_leader or h.log.closed:
                    continue
                proposal = h.repl.maybe_shrink_isr(h.log, now_ms())
            if proposal is not None:
                self._alter_isr.send(h, proposal)

    # ------------------------------------------------------------------ housekeeping

    def checkpointed_hw(self, tp: TP) -> int:
        """The partition's HW in the last HW checkpoint of its log directory (0 when it has none)."""
        return self.dirs.checkpointed_hw(tp)

    def checkpoint_hws(self) -> None:
        """Every online directory's HW checkpoint (a failed write takes that directory offline)."""
        self.dirs.checkpoint_hws({tp: h.repl.high_watermark for tp, h in self.hosted.copy().items()})

    def _every(self, interval_s: float, fn: Callable[[], None], first_s: float | None = None) -> None:
        wait = interval_s if first_s is None else first_s
        while not self._stopping.wait(wait):
            wait = interval_s
            try:
                fn()
            except Exception:
                log.exception("periodic %s failed", fn.__name__)

    def log_events(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        """A core's events, in order, each stamped at its own time as ``emit`` does, in one write (or, from the
        thread of a LeaderAndIsr step, held until the step is done: ``_lines_held``)."""
        if not events:
            return
        held = self._held
        if held is not None and held[0] == threading.get_ident():
            stamp = self.events.stamp
            held[1].extend([stamp(name, **fields) for name, fields in events])
        else:
            self.events.emit_many(events)

    @contextmanager
    def _lines_held(self) -> Iterator[None]:
        """The lines this thread logs meanwhile (``log_events``), each stamped when logged, handed to the OS in
        one write at the end.  Each write gives up the interpreter lock, and on a busy broker taking it back waits
        up to another thread's switch interval: a stopping broker's own LeaderAndIsr, 2,010 partitions becoming
        followers at 10,000 partitions, made 4,020 writes and took 1.8-2.5 s (bench/become_follower.py)."""
        lines: list[dict[str, Any]] = []
        self._held = (threading.get_ident(), lines)
        try:
            yield
        finally:
            self._held = None
            self.events.write_stamped(lines)

    def close(self) -> None:
        self._stopping.set()
        self._purgatory.stop()
        self._make_leaders.shutdown()
        self.dirs.stop()
        with self._lock:
            fetchers = list(self.fetchers.values())
        for f in fetchers:
            f.stop()
        self._notify()
        try:
            self.checkpoint_hws()
        finally:
            for h in list(self.hosted.values()):
                with h.cond:
                    try:
                        h.log.close()   # flushes, or (an I/O error) only closes: its directory is offline
                    except KafkaStorageError:
                        pass
