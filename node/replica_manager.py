"""The broker's partitions: their logs on disk, produce and fetch, and follower fetching.

The I/O shell around two cores: :class:`node.storage.PartitionLog` (the log
on disk) and :class:`node.replication.PartitionReplication` (HW, ISR and the
rules of Kafka's replication, sans-IO).  LeaderAndIsr requests make this
broker a leader or a follower of a partition; a follower runs a fetcher
thread that long-polls the leader; the leader's Fetch handler feeds the
core, which moves the high watermark and proposes ISR changes, which go to
the controller as AlterIsr requests.
"""
from __future__ import annotations

import logging
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import grpc

from kafkacommon import errors
from node.clock import now_ms
from node.broker_state import PartitionInfo
from node.events import EventLog
from node.fetch_session import LeaderSessions
from node.fetcher import LeaderFetcher
from node.leader_fetch import LeaderFetchMixin
from node.hosted import AckWaiter, Hosted
from node.purgatory import Purgatory
from node.replication import AlterIsrProposal, PartitionReplication, ReplicaSettings
from node.storage import OffsetCheckpointFile, PartitionLog
from node.storage.cleaner import CleanResult, clean
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg

log = logging.getLogger(__name__)

TP = tuple[str, int]
HW_CHECKPOINT = "replication-offset-checkpoint"


@dataclass(frozen=True)
class CleanerSettings:
    enable: bool = True
    backoff_ms: int = 15000                   # log.cleaner.backoff.ms: the pause between passes
    delete_retention_ms: int = 86_400_000     # log.cleaner.delete.retention.ms (topic: delete.retention.ms)
    min_cleanable_ratio: float = 0.5          # log.cleaner.min.cleanable.ratio


ALTER_ISR_BATCH = 1000  # proposals per AlterIsr request at most


class ReplicaManager(LeaderFetchMixin):
    def __init__(self, broker_id: int, log_dir: Path, settings: ReplicaSettings, events: EventLog,
                 broker_epoch: Callable[[], int], endpoint_of: Callable[[int], str | None],
                 controller_endpoint: Callable[[], str | None], fetch_wait_ms: int, segment_bytes: int,
                 checkpoint_interval_ms: int, topic_config: Callable[[str], dict] = lambda t: {},
                 cleaner: "CleanerSettings | None" = None):
        self.broker_id = broker_id
        self.log_dir = log_dir
        self.settings = settings
        self.events = events
        self._broker_epoch = broker_epoch
        self._endpoint_of = endpoint_of
        self._controller_endpoint = controller_endpoint
        self.fetch_wait_ms = fetch_wait_ms
        self.segment_bytes = segment_bytes
        self._topic_config = topic_config
        self.hosted: dict[TP, Hosted] = {}
        self._live: frozenset[int] | None = None  # registered brokers, from UpdateMetadata
        # (topic, partition, is_leader, leader_epoch) after each role change: the group coordinator's hook
        self.on_leadership: Callable[[str, int, bool, int], None] | None = None
        self.fetchers: dict[int, LeaderFetcher] = {}  # one per leader broker, as Kafka's fetcher threads
        self._lock = threading.Lock()
        self._data = threading.Condition()  # notified on every append or HW move: wakes long polls
        self._parked: dict[int, int] = {}   # replica id (-1: consumers) -> fetches now in their long poll
        self._stopping = threading.Event()
        self._isr_queue: list[tuple[Hosted, AlterIsrProposal]] = []  # proposals not yet sent (AlterIsrManager)
        self._isr_queue_cond = threading.Condition()
        self._isr_sender: threading.Thread | None = None
        self._purgatory = Purgatory(self._waiter_outcome)
        self._sessions = LeaderSessions(first_id=time.time_ns() // 1_000_000)  # fetch sessions (KIP-227)
        self._checkpoint = OffsetCheckpointFile(log_dir / HW_CHECKPOINT)
        log_dir.mkdir(parents=True, exist_ok=True)
        self._hw_at_start = self._checkpoint.read()
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
        for t in self._tasks:
            t.start()

    # ------------------------------------------------------------------ roles (from LeaderAndIsr)

    def _host(self, tp: TP, configs: dict[str, dict] | None = None) -> Hosted:
        """The hosted replica, opening its log first if needed. Roles are applied one
        LeaderAndIsr at a time, so the log and the topic's config (a ZooKeeper read) are
        loaded outside the partitions lock, which only guards the insertion.

        ``configs`` memoises the topic configs over one LeaderAndIsr request: a
        broker taking 1,000 partitions of one topic reads and decodes its
        znode once, not once per partition."""
        h = self.hosted.get(tp)
        if h is not None:
            return h
        configs = {} if configs is None else configs
        overrides = configs.get(tp[0])
        if overrides is None:
            overrides = configs[tp[0]] = self._topic_config(tp[0])
        settings = self.settings
        if "min.insync.replicas" in overrides:  # a topic-level override of the broker default
            settings = ReplicaSettings(settings.replica_lag_time_max_ms, int(overrides["min.insync.replicas"]))
        segment_bytes = int(overrides.get("segment.bytes", self.segment_bytes))
        plog = PartitionLog(self.log_dir, tp[0], tp[1], segment_bytes=segment_bytes)
        if plog.recovery.truncated_bytes:
            self.events.emit("log_recovered", topic=tp[0], partition=tp[1],
                             truncated_bytes=plog.recovery.truncated_bytes,
                             dropped_batches=plog.recovery.dropped_batches,
                             log_end_offset=plog.recovery.log_end_offset)
        repl = PartitionReplication(tp[0], tp[1], self.broker_id, settings,
                                    high_watermark=min(self._hw_at_start.get(tp, 0), plog.log_end_offset))
        with self._lock:
            h = self.hosted.setdefault(tp, Hosted(plog, repl, config=dict(overrides)))
        if h.log is not plog:
            plog.close()
        return h

    def apply_leader_and_isrs(self, parts: Iterable[PartitionInfo]) -> None:
        """One LeaderAndIsr request's partitions, in order, reading each topic's config once."""
        configs: dict[str, dict] = {}
        for p in parts:
            self.apply_leader_and_isr(p, configs)

    def apply_leader_and_isr(self, p: PartitionInfo, configs: dict[str, dict] | None = None) -> None:
        """A LeaderAndIsr for this replica: a new role, or (same leader epoch) a newer ISR."""
        h = self.hosted.get((p.topic, p.partition))
        if h is not None and h.repl.leader_epoch == p.leader_epoch and h.repl.leader_id == p.leader:
            self.update_isr(p)
        elif p.leader == self.broker_id:
            self.become_leader(p, configs)
        else:
            self.become_follower(p, configs)

    def become_leader(self, p: PartitionInfo, configs: dict[str, dict] | None = None) -> None:
        tp = (p.topic, p.partition)
        h = self._host(tp, configs)
        self._unassign(tp, h)
        with h.cond:
            h.fetching_from = None
            if self._live is not None:
                h.repl.set_live_brokers(self._live)
            self._log_events(h.repl.become_leader(p.leader_epoch, list(p.isr), list(p.replicas), p.zk_version,
                                                  h.log, now_ms()))
            self._wake(h)
        self._notify()
        self._role_changed(p.topic, p.partition, True, p.leader_epoch)

    def become_follower(self, p: PartitionInfo, configs: dict[str, dict] | None = None) -> None:
        tp = (p.topic, p.partition)
        h = self._host(tp, configs)
        self._unassign(tp, h)
        with h.cond:
            self._log_events(h.repl.become_follower(p.leader, p.leader_epoch, list(p.isr), list(p.replicas),
                                                    p.zk_version))
            h.fetching_from = (p.leader, p.leader_epoch) if p.leader >= 0 else None
            self._wake(h)
        self._notify()
        self._role_changed(p.topic, p.partition, False, p.leader_epoch)
        if p.leader >= 0:
            with self._lock:
                f = self.fetchers.get(p.leader)
                if f is None or not f.is_alive():
                    f = self.fetchers[p.leader] = LeaderFetcher(self, p.leader)
                    f.start()
                f.assign(tp, h, p.leader_epoch)

    def set_live_brokers(self, live: set[int]) -> None:
        """From UpdateMetadata: leaders stop waiting for followers that are gone."""
        if frozenset(live) == self._live:
            return  # the periodic re-send: nothing changed
        self._live = frozenset(live)
        for h in list(self.hosted.values()):
            with h.cond:
                if h.log.closed:
                    continue
                self._log_events(h.repl.set_live_brokers(self._live, h.log, now_ms()))
                self._wake(h)
        self._notify()

    def update_isr_if_newer(self, p: PartitionInfo) -> None:
        """From UpdateMetadata: a newer ISR of the same leader epoch (e.g. after an AlterIsr)."""
        h = self.hosted.get((p.topic, p.partition))
        if h is not None and h.repl.leader_epoch == p.leader_epoch and p.zk_version > h.repl.zk_version:
            self.update_isr(p)

    def update_isr(self, p: PartitionInfo) -> None:
        h = self.hosted.get((p.topic, p.partition))
        if h is not None:
            with h.cond:
                self._log_events(h.repl.apply_isr_update(list(p.isr), p.zk_version, p.leader_epoch,
                                                         log=h.log, now_ms=now_ms()))
                self._wake(h)
            self._notify()

    def stop_replica(self, tp: TP, delete: bool) -> None:
        with self._lock:
            h = self.hosted.pop(tp, None)
        if h is None:
            return
        self._unassign(tp, h)
        with h.cond:
            h.fetching_from = None
            h.log.close()
            self._wake(h)
        if delete:
            shutil.rmtree(h.log.dir, ignore_errors=True)
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

    def _wake(self, h: Hosted) -> None:
        """Called with ``h.cond`` held after anything that may move the HW or the role:
        wakes blocked produce requests and completes acks=all waiters that are done."""
        h.cond.notify_all()
        if h.waiters:
            keep = []
            for w in h.waiters:
                code = self._waiter_outcome(h, w)
                if code is None:
                    keep.append(w)
                else:
                    self._purgatory.complete(w, code)
            h.waiters[:] = keep

    @staticmethod
    def _waiter_outcome(h: Hosted, w: AckWaiter) -> int | None:
        if h.log.closed or not h.repl.is_leader or h.repl.leader_epoch != w.leader_epoch:
            return errors.NOT_LEADER_OR_FOLLOWER
        return h.repl.check_acks_all(w.required)

    # ------------------------------------------------------------------ produce

    def append(self, tp: TP, records: list[tuple[bytes | None, bytes | None, int | None]], acks: int,
               timeout_ms: int, on_done: Callable[[int], None]) -> tuple[int, int, int] | None:
        """Append as the leader without blocking (the group coordinator's write path).

        Returns ``(error, base_offset, last_offset)`` when the outcome is known
        at once (an error, or acks 0/1); otherwise returns None and calls
        ``on_done(error)`` from another thread once the HW covers the records,
        the leadership is lost (NOT_LEADER_OR_FOLLOWER) or the timeout passes
        (REQUEST_TIMED_OUT).
        """
        h = self.hosted.get(tp)
        if h is None:
            return errors.NOT_LEADER_OR_FOLLOWER, -1, -1
        with h.cond:
            code, base, last, epoch = self._leader_append(h, records, acks)
            if code != errors.NONE or acks != -1:
                return code, base, last
            w = AckWaiter(tp, last + 1, epoch, time.monotonic() + max(timeout_ms, 1) / 1000, on_done)
            h.waiters.append(w)
            self._purgatory.watch(h, w)
            self._wake(h)  # the HW may already cover it
        return None

    def _leader_append(self, h: Hosted, records: list[tuple[bytes | None, bytes | None, int | None]],
                       acks: int) -> tuple[int, int, int, int]:
        """With ``h.cond`` held: the produce checks, then the append as leader, which wakes
        followers' long polls (and acks=all waiters, for a lone ISR moves the HW at once).
        Returns (error, base offset, last offset, leader epoch); nothing is appended on error."""
        if not h.repl.is_leader or h.log.closed:
            return errors.NOT_LEADER_OR_FOLLOWER, -1, -1, -1
        code = h.repl.check_produce(acks)
        if code != errors.NONE:
            return code, -1, -1, -1
        epoch = h.repl.leader_epoch
        base, last = h.log.append_as_leader(records, epoch, now_ms())
        self._log_events(h.repl.on_leader_append(h.log, now_ms()))
        self._wake(h)
        self._notify()
        return errors.NONE, base, last, epoch

    def partition_lock(self, tp: TP) -> threading.Condition | None:
        """The lock that guards one hosted partition (re-entrant), or None when it is not hosted."""
        h = self.hosted.get(tp)
        return None if h is None else h.cond

    def read_log(self, tp: TP, offset: int, max_bytes: int) -> tuple[bytes, int, int] | None:
        """Whole batches from ``offset`` up to the LEO (the coordinator's load reads
        to the LEO, as Kafka's does), with the log start and end offsets; None when
        this broker no longer hosts the replica."""
        h = self.hosted.get(tp)
        if h is None:
            return None
        with h.cond:
            if h.log.closed:
                return None
            start, end = h.log.log_start_offset, h.log.log_end_offset
            if offset >= end:
                return b"", start, end
            return bytes(h.log.read(max(offset, start), max_bytes)), start, end

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

    def parked_fetches(self) -> dict[int, int]:
        """Followers' fetches now long-polling here (so a test can tell that a paused follower's
        last request has been answered before it appends what that follower must not get)."""
        with self._data:
            return {r: n for r, n in self._parked.items() if n and r >= 0}

    def list_offsets(self, req: pb.ListOffsetsRequest) -> pb.ListOffsetsResponse:
        """Kafka's ListOffsets for consumers: -1 latest (the HW, what a consumer can
        read up to), -2 earliest (the log start offset). Only the leader answers."""
        out = []
        for tp in req.partitions:
            h = self.hosted.get((tp.topic, tp.partition))
            r = pb.ListOffsetsPartition(topic=tp.topic, partition=tp.partition, offset=-1, leader_epoch=-1)
            if h is None or not h.repl.is_leader:
                r.error_code = errors.NOT_LEADER_OR_FOLLOWER
            elif req.timestamp not in (-1, -2):
                r.error_code = errors.INVALID_REQUEST
            else:
                with h.cond:
                    r.offset = h.repl.high_watermark if req.timestamp == -1 else h.log.log_start_offset
                    r.leader_epoch = h.repl.leader_epoch
            out.append(r)
        return pb.ListOffsetsResponse(partitions=out)

    def produce(self, req: pb.ProduceRequest) -> pb.ProduceResponse:
        h = self.hosted.get((req.topic, req.partition))
        if h is None or not h.repl.is_leader:
            return pb.ProduceResponse(error_code=errors.NOT_LEADER_OR_FOLLOWER, base_offset=-1, last_offset=-1)
        if req.acks not in (0, 1, -1):
            return pb.ProduceResponse(error_code=errors.INVALID_REQUIRED_ACKS, base_offset=-1, last_offset=-1)
        records = [(None if r.key_null else r.key, None if r.value_null else r.value,
                    None if r.timestamp_ms < 0 else r.timestamp_ms) for r in req.records]
        if not records:
            return pb.ProduceResponse(error_code=errors.NONE, base_offset=-1, last_offset=-1)
        deadline = time.monotonic() + max(req.timeout_ms, 1) / 1000
        with h.cond:
            code, base, last, epoch = self._leader_append(h, records, req.acks)
            if code != errors.NONE:
                return pb.ProduceResponse(error_code=code, base_offset=-1, last_offset=-1)
            if req.acks != -1:
                return pb.ProduceResponse(error_code=errors.NONE, base_offset=base, last_offset=last, leader_epoch=epoch)
            while True:
                if not h.repl.is_leader or h.repl.leader_epoch != epoch:
                    code = errors.NOT_LEADER_OR_FOLLOWER
                    break
                done = h.repl.check_acks_all(last + 1)
                if done is not None:
                    code = done
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    code = errors.REQUEST_TIMED_OUT
                    break
                h.cond.wait(remaining)
        return pb.ProduceResponse(error_code=code, base_offset=base, last_offset=last, leader_epoch=epoch)

    # ------------------------------------------------------------------ ISR changes

    def _send_alter_isr(self, h: Hosted, proposal: AlterIsrProposal) -> None:
        """Queue a proposal for the AlterIsr sender (Kafka's AlterIsrManager): whatever is queued
        while a request is in flight goes in the next one, so an ISR storm over 1,000 partitions
        costs the controller a few batched requests, not 1,000 (each its own ZooKeeper write and
        UpdateMetadata round)."""
        self.events.emit("isr_change_proposed", **proposal.fields())
        with self._isr_queue_cond:
            self._isr_queue.append((h, proposal))
            if self._isr_sender is None or not self._isr_sender.is_alive():
                self._isr_sender = threading.Thread(target=self._alter_isr_sender, daemon=True, name="alter-isr")
                self._isr_sender.start()
            self._isr_queue_cond.notify()

    def _alter_isr_sender(self) -> None:
        while not self._stopping.is_set():
            with self._isr_queue_cond:
                while not self._isr_queue and not self._stopping.is_set():
                    self._isr_queue_cond.wait(0.5)
                batch, self._isr_queue = self._isr_queue[:ALTER_ISR_BATCH], self._isr_queue[ALTER_ISR_BATCH:]
            if batch:
                self._alter_isr(batch)

    def _alter_isr(self, batch: list[tuple[Hosted, AlterIsrProposal]]) -> None:
        """One AlterIsr request for ``batch``; each proposal gets its partition's answer, or the
        request's error (NOT_CONTROLLER when there is no controller or the call failed)."""
        top, answers = errors.NOT_CONTROLLER, {}
        target = self._controller_endpoint()
        if target is not None:
            try:
                with grpc.insecure_channel(target) as ch:
                    r = pbg.BrokerStub(ch).AlterIsr(pb.AlterIsrRequest(
                        broker_id=self.broker_id, broker_epoch=self._broker_epoch(), partitions=[pb.AlterIsrPartition(
                            topic=p.topic, partition=p.partition, leader_epoch=p.leader_epoch,
                            new_isr=list(p.new_isr), current_isr_version=p.zk_version) for _, p in batch]),
                        timeout=10)
                top = r.error_code
                answers = {(a.topic, a.partition): a for a in r.partitions}
            except grpc.RpcError as e:
                log.warning("AlterIsr failed: %s", e)
        for h, proposal in batch:
            code, isr, version, epoch = top, None, None, None
            res = answers.get((proposal.topic, proposal.partition)) if top == errors.NONE else None
            if res is not None:
                code, isr, version, epoch = res.error_code, list(res.isr), res.current_isr_version, res.leader_epoch
            with h.cond:
                outcome = h.repl.on_alter_isr_result(code, isr, version, epoch, proposal=proposal, log=h.log,
                                                     now_ms=now_ms())
                self._log_events(outcome.events)
                self._wake(h)
        self._notify()

    def _shrink_isrs(self) -> None:
        for h in list(self.hosted.values()):
            with h.cond:
                if not h.repl.is_leader or h.log.closed:
                    continue
                proposal = h.repl.maybe_shrink_isr(h.log, now_ms())
            if proposal is not None:
                self._send_alter_isr(h, proposal)

    # ------------------------------------------------------------------ housekeeping

    def clean_logs(self) -> list[CleanResult]:
        """One pass of the log cleaner over every compacted partition hosted here, never past
        its HW (Kafka's firstUncleanableOffset); the partition's lock is held while it cleans."""
        settings = self.cleaner or CleanerSettings()
        done = []
        for (t, p), h in sorted(list(self.hosted.items())):
            if "compact" not in str(h.config.get("cleanup.policy", "delete")):
                continue
            retention = int(h.config.get("delete.retention.ms", settings.delete_retention_ms))
            with h.cond:
                if h.log.closed:
                    continue
                t0 = time.monotonic_ns()
                r = clean(h.log, now_ms=now_ms(), delete_retention_ms=retention,
                          min_cleanable_ratio=settings.min_cleanable_ratio,
                          upper_bound_offset=h.repl.high_watermark,
                          min_compaction_lag_ms=int(h.config.get("min.compaction.lag.ms", 0)))
            if r.segments_cleaned:
                done.append(r)
                self.events.emit("log_cleaned", topic=t, partition=p, segments=r.segments_cleaned,
                                 records_read=r.records_read, records_kept=r.records_kept,
                                 tombstones_dropped=r.tombstones_dropped, bytes_before=r.bytes_before,
                                 bytes_after=r.bytes_after, first_dirty_offset=r.first_dirty_offset,
                                 duration_ms=round((time.monotonic_ns() - t0) / 1e6, 3))
        return done

    def checkpoint_hws(self) -> None:
        hws = {tp: h.repl.high_watermark for tp, h in list(self.hosted.items())}
        if hws:
            self._checkpoint.write(hws)

    def _every(self, interval_s: float, fn: Callable[[], None]) -> None:
        while not self._stopping.wait(interval_s):
            try:
                fn()
            except Exception:
                log.exception("periodic %s failed", fn.__name__)

    def _log_events(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        for name, fields in events:
            self.events.emit(name, **fields)

    def close(self) -> None:
        self._stopping.set()
        self._purgatory.stop()
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
                    h.log.flush()
                    h.log.close()
