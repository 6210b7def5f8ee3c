"""The simulated workload: producers and consumer-group members, recorded into the chaos history.

The operations and their values are those of chaos/workload.py (docs/chaos.md),
so judge/'s checkers read them unchanged.  Members follow Kafka's consumer
coordinator protocol with ``client.member_rules`` (the rules client/group.py
uses) and the client's assignors; requests cross the simulated network from
node ``client`` and time out as gRPC calls do.
"""
from __future__ import annotations

import random
from typing import Any, Callable

from client import member_rules as rules
from client.assignors import get_assignor
from client.member_rules import MemberState
from client.protocol import ProtocolError, Subscription
from coordinator import messages as m
from kafkacommon import errors
from sim import rpc
from sim.coordinators import SimCoordinators

CLIENT = "client"
UNKNOWN_PRODUCE = {errors.REQUEST_TIMED_OUT, errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND}
RETRY_BACKOFF_MS = 100.0


def tp_key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


class ClientBase:
    def __init__(self, run) -> None:
        self.run = run
        self.world = run.world
        self.history = run.history
        self.stopped = False
        self.leaders: dict[int, int] = {}
        self._next_broker = 0

    def later(self, delay_ms: float, fn: Callable[..., Any], *args: Any) -> None:
        self.world.on_node(CLIENT, delay_ms, self._if_running, fn, args)

    def _if_running(self, fn: Callable[..., Any], args: tuple) -> None:
        if not self.stopped:
            fn(*args)

    def call(self, broker_id: int, handler: str, payload: Any, on_reply: Callable[[Any], None],
             timeout_ms: float = 5000.0) -> None:
        b = self.run.cluster.brokers[broker_id]
        rpc.call(self.world, CLIENT, b.node, getattr(b, handler), payload, on_reply, timeout_ms)

    def any_broker(self) -> int:
        ids = sorted(self.run.cluster.brokers)
        self._next_broker = (self._next_broker + 1) % len(ids)
        return ids[self._next_broker]

    def refresh(self, topic: str, then: Callable[[], None]) -> None:
        def got(ans: Any) -> None:
            if ans:
                self.leaders = dict(ans)
            then()
        self.call(self.any_broker(), "handle_metadata", topic, got, 1000.0)


class SimProducer(ClientBase):
    """Unique values, round-robin over the partitions, acks=all, one attempt each (chaos's ProducerWorker)."""

    def __init__(self, run, index: int, topic: str, rate: float) -> None:
        super().__init__(run)
        self.index, self.topic, self.period = index, topic, 1000.0 / rate
        self.process = run.procs()
        self.seq = 0
        self.busy = False

    def start(self) -> None:
        self.refresh(self.topic, lambda: self.later(self.period, self._tick))

    def _tick(self) -> None:
        if not self.busy:
            self._send()
        self.later(self.period, self._tick)

    def _send(self) -> None:
        seq, self.seq = self.seq, self.seq + 1
        value = f"p{self.index}-{seq}"
        op = self.history.invoke(self.process, "send", {"topic": self.topic, "value": value})
        n = self.run.partitions[self.topic]
        p = seq % n
        base = {"topic": self.topic, "partition": p, "value": value}
        leader = self.leaders.get(p, -1)
        if leader < 0:
            self.history.complete(op, "fail", base, error="LEADER_NOT_AVAILABLE")
            self.refresh(self.topic, lambda: None)
            return
        self.busy = True

        def done(ans: Any) -> None:
            self.busy = False
            if ans is None:
                self.history.complete(op, "info", base, error="DEADLINE_EXCEEDED", node=leader)
                self.refresh(self.topic, lambda: None)
                return
            code, offset = ans
            if code == errors.NONE:
                self.history.complete(op, "ok", dict(base, offset=offset), node=leader)
                return
            kind = "info" if code in UNKNOWN_PRODUCE else "fail"
            self.history.complete(op, kind, base, error=errors.name(code), node=leader)
            self.refresh(self.topic, lambda: None)

        self.call(leader, "handle_produce", ((self.topic, p), [(None, value.encode())], -1, 5000), done, 7000.0)


class SimMember(ClientBase):
    """One consumer-group member: find the coordinator, join, sync, heartbeat, poll, commit."""

    def __init__(self, run, group: str, topic: str, slot: int, *, assignor: str = "range",
                 session_timeout_ms: int = 6000, heartbeat_interval_ms: int = 1000,
                 commit_interval_ms: int = 250, poll_interval_ms: float = 100.0,
                 stall_every_ms: tuple[int, int] | None = None, stall_ms: int = 0) -> None:
        super().__init__(run)
        self.group, self.topic, self.slot = group, topic, slot
        self.assignor = get_assignor(assignor)
        self.session_timeout_ms, self.heartbeat_interval_ms = session_timeout_ms, heartbeat_interval_ms
        self.commit_interval_ms, self.poll_interval_ms = commit_interval_ms, poll_interval_ms
        self.process, self.hb_process = run.procs(), run.procs()
        self.state = MemberState()
        self.coordinator: int | None = None
        self.positions: dict[tuple[str, int], int] = {}
        self.phase = "find"          # find | join | sync | stable
        self.rejoin = True
        self.hb_open = False
        self.next_commit_ms = 0.0
        self.final = False
        # stalls (chaos's consumer stalls: a long GC pause): no heartbeats, no polls, then a commit of the old
        # positions in the old generation, as a zombie consumer does; times from a generator drawn off the seed
        self.rng = random.Random(run.world.rng.getrandbits(64))
        self.stall_every_ms, self.stall_ms = stall_every_ms, stall_ms
        self.stalled = False
        self.stalls = 0

    def start(self) -> None:
        self.later(0.0, self._step)
        self.later(self.heartbeat_interval_ms, self._heartbeat_tick)
        if self.stall_every_ms is not None and self.stall_ms > 0:
            self.later(self.rng.randint(*self.stall_every_ms), self._stall)

    def _stall(self) -> None:
        if self.stall_every_ms is None:    # the run's end: no more stalls
            return
        self.stalled = True
        self.stalls += 1
        self.later(self.stall_ms, self._unstall)

    def _unstall(self) -> None:
        self.stalled = False
        self.next_commit_ms = 0.0      # commit the old positions first, in the old generation
        if self.stall_every_ms is not None:
            self.later(self.rng.randint(*self.stall_every_ms), self._stall)

    # ------------------------------------------------------------------ the main loop (one op at a time)

    def _step(self) -> None:
        if self.stalled:
            return self._again(50.0)
        if self.coordinator is None:
            self._find()
        elif self.next_commit_ms == 0.0 and self.positions and self.state.generation >= 0:
            self._commit()     # just back from a stall: the zombie's commit, before anything else
        elif self.rejoin:
            self._join()
        elif self._without_position():
            # Kafka's consumer (refreshCommittedOffsetsIfNeeded, on every poll): assigned partitions with no
            # position fetch their committed offsets again, after a fetch that failed (its coordinator lost)
            self._fetch_committed(self._without_position())
        elif self.world.now_ms >= self.next_commit_ms and self.positions:
            self._commit()
        else:
            self._poll()

    def _without_position(self) -> list[tuple[str, int]]:
        if self.state.generation < 0:
            return []
        return [tp for tp in self.state.assignment if tp not in self.positions]

    def _again(self, delay_ms: float = 0.0) -> None:
        self.later(delay_ms, self._step)

    def _coordinator_lost(self) -> None:
        self.coordinator = None

    def _find(self) -> None:
        def got(ans: Any) -> None:
            if ans is not None and ans[0] == errors.NONE:
                self.coordinator = ans[1]
                self._again()
            else:
                self._again(RETRY_BACKOFF_MS)
        self.call(self.any_broker(), "handle_find_coordinator", self.group, got, 2000.0)

    def _group_call(self, api: Callable[[SimCoordinators, Any, Callable[[Any], None]], None], req: Any,
                    on_reply: Callable[[Any], None], timeout_ms: float) -> None:
        """``api`` (``SimCoordinators.join_group``, ...) with ``req`` at the coordinator."""
        node = self.coordinator

        def got(ans: Any) -> None:
            on_reply(ans, node)
        self.call(node, "handle_group", (api, req), got, timeout_ms)

    def _join(self) -> None:
        _kind, gone = rules.join_prepare(self.state, self.assignor.rebalance_protocol == "EAGER")
        if gone:
            self.state.assignment = [tp for tp in self.state.assignment if tp not in gone]
            self.positions = {tp: o for tp, o in self.positions.items() if tp not in gone}
        sub = Subscription([self.topic], None, list(self.state.assignment), self.state.generation).encode()
        req = m.JoinGroupRequest(self.group, self.state.member_id, self.session_timeout_ms,
                                 max(self.session_timeout_ms, 10000), "consumer", [(self.assignor.name, sub)],
                                 None, f"sim-{self.slot}", "/sim", True)
        op = self.history.invoke(self.process, "join", {"member": self.state.member_id}, group=self.group)

        def got(r: Any, node: int) -> None:
            if r is None:
                self.history.complete(op, "fail", {"member": self.state.member_id}, error="DEADLINE_EXCEEDED")
                self._coordinator_lost()
                return self._again(RETRY_BACKOFF_MS)
            code = r.error_code
            self.history.complete(op, "ok" if code == errors.NONE else "fail",
                                  {"member": r.member_id, "generation": r.generation_id,
                                   "leader": r.leader == r.member_id and code == errors.NONE,
                                   "protocol": r.protocol_name},
                                  error=None if code == errors.NONE else errors.name(code), node=node)
            if code == errors.MEMBER_ID_REQUIRED:
                self.state.member_id = r.member_id
                return self._again()
            if code in rules.COORDINATOR_ERRORS:
                self._coordinator_lost()
                return self._again(RETRY_BACKOFF_MS)
            if code == errors.REBALANCE_IN_PROGRESS:
                return self._again(RETRY_BACKOFF_MS)
            if code != errors.NONE:
                rules.group_error(self.state, code)
                return self._again(RETRY_BACKOFF_MS)
            self._sync(r)
        self._group_call(SimCoordinators.join_group, req, got, max(self.session_timeout_ms, 10000) + 5000.0)

    def _sync(self, join: m.JoinGroupResponse) -> None:
        assignments: list[tuple[str, bytes]] = []
        if join.leader == join.member_id:
            try:
                assignments = rules.leader_assignment(
                    join.protocol_name, [(x.member_id, x.group_instance_id, x.metadata) for x in join.members],
                    {self.topic: self.run.partitions[self.topic]})
            except ProtocolError:
                assignments = []
        req = m.SyncGroupRequest(self.group, join.generation_id, join.member_id, None, "consumer",
                                 join.protocol_name, assignments)
        op = self.history.invoke(self.process, "sync", {"generation": join.generation_id,
                                                        "member": join.member_id}, group=self.group)

        def got(r: Any, node: int) -> None:
            if r is None:
                self.history.complete(op, "fail", error="DEADLINE_EXCEEDED")
                self._coordinator_lost()
                return self._again(RETRY_BACKOFF_MS)
            code = r.error_code
            new = rules.assignment_of(r.assignment) if code == errors.NONE else []
            self.history.complete(op, "ok" if code == errors.NONE else "fail",
                                  {"generation": join.generation_id, "member": join.member_id,
                                   "assignment": [tp_key(*tp) for tp in new]},
                                  error=None if code == errors.NONE else errors.name(code), node=node)
            if code != errors.NONE:
                if code in rules.COORDINATOR_ERRORS:
                    self._coordinator_lost()
                rules.group_error(self.state, code)
                return self._again(RETRY_BACKOFF_MS)
            revoked, added, rejoin = rules.sync_result(self.state, join.generation_id, join.member_id, join.leader,
                                                       join.protocol_name, new,
                                                       self.assignor.rebalance_protocol == "EAGER")
            for tp in revoked:
                self.positions.pop(tp, None)
            self.rejoin = rejoin
            self.next_commit_ms = self.world.now_ms + self.commit_interval_ms
            if added:
                return self._fetch_committed(added)
            self._again()
        self._group_call(SimCoordinators.sync_group, req, got, max(self.session_timeout_ms, 10000) + 5000.0)

    def _fetch_committed(self, tps: list[tuple[str, int]] | None, final: bool = False,
                         then: Callable[[], None] | None = None) -> None:
        asked = {} if tps is None else {"partitions": sorted(tp_key(*tp) for tp in tps)}
        extra = {"final": True} if final else {}
        op = self.history.invoke(self.process, "fetch-committed", asked, group=self.group, **extra)
        req = m.OffsetFetchRequest(self.group, None if tps is None else list(tps))

        def got(r: Any, node: int) -> None:
            if r is None or r.error_code != errors.NONE:
                err = "DEADLINE_EXCEEDED" if r is None else errors.name(r.error_code)
                self.history.complete(op, "fail", error=err, **extra)
                if r is None or r.error_code in rules.COORDINATOR_ERRORS:
                    self._coordinator_lost()
                if then is not None:
                    return then()
                if tps is not None and self.coordinator is not None:
                    for tp in tps:     # start from the log start, as auto.offset.reset=earliest
                        self.positions.setdefault(tp, 0)
                return self._again(RETRY_BACKOFF_MS)
            got_offsets = {(x.topic, x.partition): x.offset for x in r.partitions}
            self.history.complete(op, "ok", {"offsets": {tp_key(*tp): o for tp, o in sorted(got_offsets.items())}},
                                  node=node, **extra)
            if then is not None:
                return then()
            for tp in tps or ():
                self.positions[tp] = max(got_offsets.get(tp, -1), 0)
            self._again()
        if self.coordinator is None:
            self.history.complete(op, "fail", error="COORDINATOR_NOT_AVAILABLE", **extra)
            if then is not None:
                return then()
            return self._again(RETRY_BACKOFF_MS)
        self._group_call(SimCoordinators.offset_fetch, req, got, 5000.0)

    def _commit(self) -> None:
        offsets = dict(sorted(self.positions.items()))
        self.next_commit_ms = self.world.now_ms + self.commit_interval_ms
        gen, mid = self.state.generation, self.state.member_id
        fmt = {tp_key(*tp): o for tp, o in offsets.items()}
        op = self.history.invoke(self.process, "commit", {"offsets": fmt, "generation": gen, "member": mid},
                                 group=self.group)
        req = m.OffsetCommitRequest(self.group, gen, mid, None, -1,
                                    [m.CommitOffset(t, p, o) for (t, p), o in offsets.items()])

        def got(r: Any, node: int) -> None:
            if r is None:
                self.history.complete(op, "info", error="DEADLINE_EXCEEDED")
                self._coordinator_lost()
                return self._again(RETRY_BACKOFF_MS)
            code = next((c for _t, _p, c in r.partitions if c != errors.NONE), errors.NONE)
            self.history.complete(op, rules.commit_outcome(code), {"offsets": fmt},
                                  error=None if code == errors.NONE else errors.name(code), node=node)
            if code in rules.COORDINATOR_ERRORS:
                self._coordinator_lost()
            elif code in rules.RESET_ERRORS or code == errors.REBALANCE_IN_PROGRESS:
                rules.group_error(self.state, code)
                self.rejoin = True
            self._again(0.0 if code == errors.NONE else RETRY_BACKOFF_MS)
        self._group_call(SimCoordinators.offset_commit, req, got, 7000.0)

    def _poll(self) -> None:
        tps = sorted(self.positions)
        if not tps:
            return self._again(self.poll_interval_ms)
        op = self.history.invoke(self.process, "poll", {"member": self.state.member_id,
                                                        "generation": self.state.generation}, group=self.group)
        pending = set(tps)
        got_records: dict[tuple[str, int], list] = {}

        def one(tp: tuple[str, int], ans: Any) -> None:
            pending.discard(tp)
            if ans is not None and ans[0] == errors.NONE and tp in self.positions:
                recs = ans[2]
                if recs and self.positions[tp] == recs[0][0]:
                    got_records[tp] = recs
                    self.positions[tp] = recs[-1][0] + 1
            elif ans is None or ans[0] != errors.NONE:
                self.leaders.pop(tp[1], None)
            if not pending:
                records = [[t, p, o, (v or b"").decode()] for (t, p) in sorted(got_records)
                           for o, _k, v in got_records[(t, p)]]
                self.history.complete(op, "ok", {"records": records})
                if any(self.leaders.get(p, -1) < 0 for _t, p in tps):
                    return self.refresh(self.topic, lambda: self._again(self.poll_interval_ms))
                self._again(self.poll_interval_ms)

        for tp in tps:
            leader = self.leaders.get(tp[1], -1)
            if leader < 0:
                self.later(0.0, one, tp, None)
                continue
            self.call(leader, "handle_consume", (tp, self.positions[tp]), lambda ans, tp=tp: one(tp, ans), 1000.0)

    # ------------------------------------------------------------------ heartbeats (their own process)

    def _heartbeat_tick(self) -> None:
        self.later(self.heartbeat_interval_ms, self._heartbeat_tick)
        if self.stalled or self.hb_open or self.rejoin or self.state.generation < 0 or self.coordinator is None:
            return
        gen, mid = self.state.generation, self.state.member_id
        op = self.history.invoke(self.hb_process, "heartbeat", {"generation": gen, "member": mid}, group=self.group)
        self.hb_open = True

        def got(r: Any, node: int) -> None:
            self.hb_open = False
            code = errors.NOT_COORDINATOR if r is None else r.error_code
            self.history.complete(op, "ok" if code == errors.NONE else "fail", {},
                                  error=None if code == errors.NONE else errors.name(code), node=node)
            if code in rules.COORDINATOR_ERRORS and gen == self.state.generation:
                self._coordinator_lost()
            if rules.heartbeat_result(self.state, code, gen):
                self.rejoin = True
        self._group_call(SimCoordinators.heartbeat, m.HeartbeatRequest(self.group, gen, mid), got, 5000.0)

    # ------------------------------------------------------------------ the end

    def committed_at_end(self, then: Callable[[], None], attempts: int = 20) -> None:
        """The run's last word on the group's offsets: a fetch-committed marked final (the coordinator found
        first; tried again, up to ``attempts`` times, while it fails)."""
        if self.coordinator is None and attempts > 0:
            def found(ans: Any) -> None:
                if ans is not None and ans[0] == errors.NONE:
                    self.coordinator = ans[1]
                self.world.on_node(CLIENT, 0.0 if self.coordinator is not None else RETRY_BACKOFF_MS,
                                   self.committed_at_end, then, attempts - 1)
            self.call(self.any_broker(), "handle_find_coordinator", self.group, found, 2000.0)
            return

        def fetched() -> None:
            last = self.history.lines[-1] if hasattr(self.history, "lines") else None
            if attempts > 0 and last is not None and last.get("f") == "fetch-committed" and last["type"] == "fail":
                self.world.on_node(CLIENT, RETRY_BACKOFF_MS, self.committed_at_end, then, attempts - 1)
                return
            then()
        self._fetch_committed(None, final=True, then=fetched)
