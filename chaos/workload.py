"""The chaos workloads: producers, consumer groups and commit probes, recorded as a history.

Every client operation is written to the history as an ``invoke`` and, later,
its ``ok``/``fail``/``info`` (see docs/chaos.md).  The workloads run as
threads of the chaos runner, through the client library and the fault proxy:

* **Producers** send unique values with acks=all, one attempt per operation
  (Kafka's ``retries=0``), so a duplicate in the log is a bug, not a retry.
* **Consumer groups** (:class:`client.group.GroupMember`) poll, record what they
  got, and commit their positions every ``commit.interval.ms``.  Members crash
  (no LeaveGroup; a new member with a new process number starts later) and
  stall (no heartbeats, then a commit in their old generation, as a consumer
  after a long GC pause) on seeded schedules.
* **Probes** commit an increasing offset outside any generation (simple
  commits, generation -1) and read it back.
"""
from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from typing import Any, Callable

import grpc

from chaos.scenario import GroupSpec, ProbeSpec, ProducerSpec
from client.consumer import PartitionFetcher
from client.group import ClientError, GroupMember
from client.metadata import ClusterClient
from kafkacommon import errors
from proto import kafkasim_pb2 as pb

log = logging.getLogger(__name__)

# Produce errors after which the record may still be committed: the outcome is unknown
UNKNOWN_PRODUCE = {errors.REQUEST_TIMED_OUT, errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND}
GROUP_OPS = {"join": "join", "sync": "sync", "heartbeat": "heartbeat", "commit": "commit",
             "fetch_committed": "fetch-committed", "leave": "leave"}


class Processes:
    """Jepsen's process numbers: one per single-threaded client, never reused."""

    def __init__(self) -> None:
        self._next = itertools.count()
        self._lock = threading.Lock()

    def new(self) -> int:
        with self._lock:
            return next(self._next)


def _tp_key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


def _records(recs) -> list[list[Any]]:
    return [[r.topic, r.partition, r.offset, (r.value or b"").decode("utf-8", "replace")] for r in recs]


class Worker(threading.Thread):
    # True: the worker sets ``ready`` itself once its client is built (a Java client's JVM takes seconds to
    # start, more on a busy machine); else ``ready`` is set as it starts
    opens_client = False

    def __init__(self, name: str, stop: threading.Event):
        super().__init__(name=name, daemon=True)
        self.stop_event = stop
        self.error: BaseException | None = None
        self.ready = threading.Event()   # the runner's schedule starts once every worker's is set

    def run(self) -> None:
        if not self.opens_client:
            self.ready.set()
        try:
            self.body()
        except BaseException as e:  # a workload bug must not vanish: the runner reports it
            log.exception("%s failed", self.name)
            self.error = e
        finally:
            self.ready.set()   # (a worker that failed before its client was built)

    def body(self) -> None:
        raise NotImplementedError


class ProducerWorker(Worker):
    """Sends unique values round-robin over the topic's partitions, ``rate`` per second."""

    def __init__(self, history, procs: Processes, cluster: ClusterClient, spec: ProducerSpec, index: int,
                 stop: threading.Event, timeout_ms: int = 5000):
        super().__init__(f"producer-{index}", stop)
        self.history, self.cluster, self.spec = history, cluster, spec
        self.process = procs.new()
        self.index = index
        self.timeout_ms = timeout_ms

    def body(self) -> None:
        period = 1.0 / self.spec.rate
        next_at = time.monotonic()
        for seq in itertools.count():
            if self.stop_event.wait(max(0.0, next_at - time.monotonic())):
                return
            next_at += period
            self.send_one(seq)

    def send_one(self, seq: int) -> None:
        topic, value = self.spec.topic, f"p{self.index}-{seq}"
        op = self.history.invoke(self.process, "send", {"topic": topic, "value": value})
        try:
            parts = self.cluster.partitions_for(topic, max_block_s=1.0)
        except ClientError as e:
            self.history.complete(op, "fail", error=f"metadata: {e}")
            return
        partition = seq % len(parts)   # round robin
        leader = self.cluster.leader_endpoint(topic, partition)
        base = {"topic": topic, "partition": partition, "value": value}
        if leader is None:
            self.history.complete(op, "fail", base, error="LEADER_NOT_AVAILABLE")
            self._refresh()
            return
        req = pb.ProduceRequest(topic=topic, partition=partition, acks=-1, timeout_ms=self.timeout_ms,
                                records=[pb.Record(key=b"", key_null=True, value=value.encode(), timestamp_ms=-1)])
        try:
            r = self.cluster.broker_stub(leader[1]).Produce(req, timeout=self.timeout_ms / 1000 + 2)
        except grpc.RpcError as e:
            # unreachable before sending = fail; a lost answer = unknown.  gRPC cannot always tell:
            # UNAVAILABLE is reported when no connection could be made, so only that one is a fail
            kind = "fail" if e.code() == grpc.StatusCode.UNAVAILABLE else "info"
            self.history.complete(op, kind, base, error=e.code().name, node=leader[0])
            self._refresh()
            return
        if r.error_code == errors.NONE:
            self.history.complete(op, "ok", dict(base, offset=r.base_offset), node=leader[0])
            return
        kind = "info" if r.error_code in UNKNOWN_PRODUCE else "fail"
        self.history.complete(op, kind, base, error=errors.name(r.error_code), node=leader[0])
        self._refresh()

    def _refresh(self) -> None:
        try:
            self.cluster.refresh()
        except ClientError:
            pass


class GroupRecorder:
    """Turns a GroupMember's ``on_op`` callbacks into history operations.

    The member's main thread and its heartbeat thread are two processes.  If the
    client raised between an operation's invoke and its completion, the next
    invoke of that process first completes the dangling one as ``info``."""

    def __init__(self, history, group: str, process: int, hb_process: int):
        self.history, self.group = history, group
        self.process, self.hb_process = process, hb_process
        self._pending: dict[int, dict] = {}
        self._lock = threading.Lock()
        self.final = False   # end of run: the group's last fetch-committed is marked final

    def invoke(self, f: str, value: dict) -> dict:
        proc = self.hb_process if f == "heartbeat" else self.process
        extra = {"final": True} if self.final and f == "fetch-committed" else {}
        with self._lock:
            dangling = self._pending.pop(proc, None)
            if dangling is not None:
                self.history.complete(dangling, "info", error="the client raised before completing it")
            op = self._pending[proc] = self.history.invoke(proc, f, value, group=self.group, **extra)
            return op

    def complete(self, f: str, type_: str, value: dict, error: str | None = None, node: int | None = None) -> None:
        proc = self.hb_process if f == "heartbeat" else self.process
        with self._lock:
            inv = self._pending.get(proc)
            if inv is None or inv["f"] != f:
                return  # nothing open for it (already completed as info)
            del self._pending[proc]
            extra = {"final": True} if inv.get("final") else {}
            self.history.complete(inv, type_, dict(inv["value"] or {}, **value), error=error, node=node, **extra)

    def __call__(self, op: str, phase: str, fields: dict) -> None:
        f = GROUP_OPS.get(op)
        if f is None:
            return
        value = {k: fields[k] for k in ("member", "generation", "offsets", "leader", "protocol", "assignment",
                                        "partitions") if k in fields}
        if phase == "invoke":
            self.invoke(f, value)
            return
        if f == "leave":  # the client library reports only the outcome of a LeaveGroup
            self.invoke(f, value)
        self.complete(f, phase, value, error=None if phase == "ok" else fields.get("error"), node=fields.get("node"))


class MemberWorker(Worker):
    """One consumer-group member after another in one slot: it polls, records and commits;
    on its seeded schedule it crashes (a new member takes the slot later) or stalls."""

    def __init__(self, history, procs: Processes, cluster: ClusterClient, spec: GroupSpec, slot: int,
                 stop: threading.Event, rng: random.Random, clock: Callable[[], float] = time.monotonic):
        super().__init__(f"member-{spec.id}-{slot}", stop)
        self.history, self.procs, self.cluster, self.spec = history, procs, cluster, spec
        self.slot, self.rng, self.clock = slot, rng, clock
        self.member: GroupMember | None = None
        self.process = -1
        self.draining = threading.Event()   # end of run: keep consuming and committing, no more crashes
        self.crashes = 0
        self.stalls = 0

    def _next(self, r) -> float | None:
        return None if r is None else self.clock() + self.rng.randint(r.lo, r.hi) / 1000

    def _start_member(self) -> None:
        self.process = self.procs.new()
        self.recorder = rec = GroupRecorder(self.history, self.spec.id, self.process, self.procs.new())
        self.member = GroupMember(self.cluster, self.spec.id, [self.spec.topic], client_id=f"chaos-{self.slot}",
                                  assignors=[self.spec.assignor], session_timeout_ms=self.spec.session_timeout_ms,
                                  rebalance_timeout_ms=max(self.spec.session_timeout_ms, 10000),
                                  heartbeat_interval_ms=self.spec.heartbeat_interval_ms, retry_timeout_s=10.0,
                                  on_op=rec)

    def body(self) -> None:
        self._start_member()
        crash_at = self._next(self.spec.crash_interval_ms)
        stall_at = self._next(self.spec.stall_interval_ms)
        commit_at = self.clock() + self.spec.commit_interval_ms / 1000
        while not self.stop_event.is_set():
            assert self.member is not None
            now = self.clock()
            chaos = not self.draining.is_set()
            if chaos and crash_at is not None and now >= crash_at:
                self._crash()
                crash_at = self._next(self.spec.crash_interval_ms)
                continue
            if chaos and stall_at is not None and now >= stall_at:
                self._stall()
                stall_at = self._next(self.spec.stall_interval_ms)
                continue
            self._poll()
            if self.clock() >= commit_at:
                self._commit()
                commit_at = self.clock() + self.spec.commit_interval_ms / 1000
        self._close(leave=True)

    def _poll(self) -> None:
        m = self.member
        try:
            m.ensure_active()   # joins and syncs first: those are operations of their own
        except (ClientError, grpc.RpcError) as e:
            log.debug("rejoin failed: %s", e)
            self.stop_event.wait(0.05)  # back off before trying again
            return
        self.recorder.invoke("poll", {"member": m.state.member_id, "generation": m.state.generation})
        try:
            recs = m.fetcher.poll(100)
        except (ClientError, grpc.RpcError) as e:
            self.recorder.complete("poll", "fail", {}, error=str(e)[:200])
            self.stop_event.wait(0.05)  # back off before polling again
            return
        self.recorder.complete("poll", "ok", {"records": _records(recs)})

    def _commit(self) -> None:
        try:
            self.member.commit()
        except (ClientError, grpc.RpcError) as e:  # recorded by the member's on_op; rejoin is flagged
            log.debug("commit failed: %s", e)

    def final_committed(self) -> dict:
        """The group's committed offsets, as the run's last word on them (a ``final`` fetch-committed)."""
        if self.member is None:
            return {}
        self.recorder.final = True
        return self.member.committed()

    def _crash(self) -> None:
        """A crash: heartbeats and fetches stop, no LeaveGroup; the coordinator finds out by the
        session timeout.  A new member (new process) takes the slot after restart.after.ms."""
        self.crashes += 1
        self._close(leave=False)
        self.stop_event.wait(self.spec.restart_after_ms / 1000)
        if not self.stop_event.is_set():
            self._start_member()

    def _stall(self) -> None:
        """A long pause (a GC pause, a stopped container): no heartbeats, no polls; then the
        member commits its old positions in its old generation, as a zombie would."""
        self.stalls += 1
        m = self.member
        m.pause_heartbeats()
        self.stop_event.wait(self.spec.stall_ms / 1000)
        m.resume_heartbeats()
        self._commit()

    def _close(self, leave: bool) -> None:
        if self.member is not None:
            try:
                self.member.close(leave=leave)
            except Exception as e:
                log.debug("close failed: %s", e)
            self.member = None if not leave else self.member


class ProbeWorker(Worker):
    """Commits an increasing offset for its own group outside any generation, then reads it back."""

    def __init__(self, history, procs: Processes, cluster: ClusterClient, spec: ProbeSpec, index: int,
                 topic: str, stop: threading.Event):
        super().__init__(f"probe-{index}", stop)
        self.group = f"chaos-probe-{index}"
        self.process = procs.new()
        self.recorder = GroupRecorder(history, self.group, self.process, procs.new())
        self.member = GroupMember(cluster, self.group, [], retry_timeout_s=5.0, on_op=self.recorder)
        self.spec, self.topic = spec, topic
        self.offset = 0

    def body(self) -> None:
        try:
            while not self.stop_event.wait(self.spec.interval_ms / 1000):
                self.offset += 1
                try:
                    self.member.commit_simple({(self.topic, 0): self.offset})
                    self.member.committed()
                except (ClientError, grpc.RpcError) as e:
                    log.debug("probe failed: %s", e)
            self.recorder.final = True
            try:
                self.member.committed()
            except (ClientError, grpc.RpcError) as e:
                log.info("the probe's final fetch failed: %s", e)
        finally:
            self.member.close(leave=False)


def read_partition(cluster: ClusterClient, topic: str, partition: int, deadline_s: float = 30.0) -> tuple[list, int]:
    """Every record of a partition from offset 0 to its high watermark, and that HW.  ClientError when the
    fetch fails, TimeoutError when the HW is not reached in ``deadline_s``."""
    f = PartitionFetcher(cluster, auto_offset_reset="earliest")
    tp = (topic, partition)
    f.assign([tp])
    f.seek(tp, 0)
    got: list = []
    end = time.monotonic() + deadline_s
    hw = None
    while time.monotonic() < end:
        got.extend(f.poll(200))
        hw = f.high_watermarks.get(tp)
        if hw is not None and f.positions.get(tp, -1) >= hw:
            return got, hw
    raise TimeoutError(f"did not reach the high watermark ({hw}) in {deadline_s}s")


def final_read(history, procs: Processes, cluster: ClusterClient, topic: str, partition: int,
               deadline_s: float = 30.0) -> bool:
    """Read a partition from offset 0 to its high watermark, as one ``final`` poll."""
    process = procs.new()
    op = history.invoke(process, "poll", {"topic": topic, "partition": partition}, final=True)
    try:
        got, hw = read_partition(cluster, topic, partition, deadline_s)
    except (ClientError, TimeoutError) as e:
        history.complete(op, "fail", error=str(e)[:200], final=True)
        return False
    history.complete(op, "ok", {"topic": topic, "partition": partition, "records": _records(got),
                                "high_watermark": hw}, final=True)
    return True
