"""The simulated transactional workload's clients: exactly-once pipelines and read_committed readers.

The operations and values are chaos/txn_workload.py's (docs/chaos.md, "Exactly-once pipelines"), so
judge/checks_txn.py reads a simulated run as a real one.

* :class:`SimTxnPipeline`: one process with a transactional id (``eos-<i>``): InitProducerId, the group's
  committed offsets of its input partitions (OffsetFetch, require_stable), then per batch of input records
  read (read_committed) one transaction: AddPartitionsToTxn, one transactional Produce per output partition
  (its producer id, epoch and sequence: a retry is a duplicate the leader answers with the first offsets),
  AddOffsetsToTxn, TxnOffsetCommit to the group's coordinator (generation -1: the input partitions are the
  pipeline's by index, not by a rebalance), EndTxn.  Retriable errors (a coordinator moved or loading,
  CONCURRENT_TRANSACTIONS, a leader moved, no answer in time) are retried within the operation; an
  abortable one aborts the transaction, bumps the epoch (InitProducerId with its id and epoch, KIP-360) and
  rewinds to the committed offsets; a fatal one (fenced) ends the process, and the workload starts the next
  instance of its transactional id.  A pipeline told to freeze stops before its commit (a zombie) while the
  workload starts its successor, and commits once that one holds the id.
* :class:`SimTxnReader`: a read_committed consumer of the whole output, each round of fetches a ``poll``.

read_committed filtering is the consumer's (Kafka's Fetcher): up to the last stable offset the broker
answers, skipping control records and the records of the aborted transactions the fetch lists
(:class:`CommittedFilter`).
"""
from __future__ import annotations

from typing import Any, Callable

from coordinator import messages as m
from judge.checks_txn import output_value
from kafkacommon import errors
from kafkacommon.control import marker_commit
from sim.clients import ClientBase, tp_key
from sim.coordinators import SimCoordinators
from sim.log import ProducerBatch
from sim.txn_coordinators import SimTxnCoordinators
from transactions import messages as t

BACKOFF_MS = 100.0
INIT_DEADLINE_MS = 30_000.0
TXN_DEADLINE_MS = 20_000.0
END_DEADLINE_MS = 60_000.0
COORDINATOR_MOVED = frozenset({errors.NOT_COORDINATOR, errors.COORDINATOR_NOT_AVAILABLE})
TXN_RETRIABLE = COORDINATOR_MOVED | {errors.COORDINATOR_LOAD_IN_PROGRESS, errors.CONCURRENT_TRANSACTIONS,
                                     errors.REQUEST_TIMED_OUT}
PRODUCE_RETRIABLE = frozenset({errors.NOT_LEADER_OR_FOLLOWER, errors.NOT_ENOUGH_REPLICAS,
                               errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, errors.REQUEST_TIMED_OUT,
                               errors.UNKNOWN_TOPIC_OR_PARTITION, errors.LEADER_NOT_AVAILABLE})
FATAL = frozenset({errors.PRODUCER_FENCED, errors.INVALID_PRODUCER_EPOCH, errors.INVALID_PRODUCER_ID_MAPPING,
                   errors.INVALID_TXN_STATE, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
GROUP_RETRIABLE = COORDINATOR_MOVED | {errors.COORDINATOR_LOAD_IN_PROGRESS, errors.REQUEST_TIMED_OUT,
                                       errors.UNKNOWN_TOPIC_OR_PARTITION}


class CommittedFilter:
    """One partition's read_committed filtering (Kafka's Fetcher): a producer's records are skipped from the
    first offset of one of its aborted transactions to its ABORT marker; control records are never returned."""

    def __init__(self) -> None:
        self.aborting: set[int] = set()

    def filter(self, records: list, aborted: list[tuple[int, int]]) -> list[tuple[int, Any, Any]]:
        queue = sorted(aborted, key=lambda a: a[1])
        out = []
        for o, k, v, pid, control in records:
            while queue and queue[0][1] <= o:
                self.aborting.add(queue.pop(0)[0])
            if control:
                if marker_commit(k) is False:
                    self.aborting.discard(pid)
                continue
            if pid not in self.aborting:
                out.append((o, k, v))
        return out


class TxnClient(ClientBase):
    """Leaders per topic, coordinators (the transaction coordinator of ``self.tid``, the group's), reads."""

    def __init__(self, run) -> None:
        super().__init__(run)
        self.topic_leaders: dict[str, dict[int, int]] = {}
        self.coordinator: int | None = None            # the transaction coordinator
        self.group_coordinator: int | None = None
        self.tid = ""

    def refresh_topic(self, topic: str, then: Callable[[], None]) -> None:
        def got(ans: Any) -> None:
            if ans:
                self.topic_leaders[topic] = dict(ans)
            then()
        self.call(self.any_broker(), "handle_metadata", topic, got, 1000.0)

    def leader(self, topic: str, p: int) -> int:
        return self.topic_leaders.get(topic, {}).get(p, -1)

    def read(self, topic: str, p: int, offset: int, on_answer: Callable[[Any], None]) -> None:
        """A read_committed fetch: (error, HW, LSO, records, aborted) or None."""
        leader = self.leader(topic, p)
        if leader < 0:
            self.refresh_topic(topic, lambda: on_answer(None))
            return

        def got(ans: Any) -> None:
            if ans is None or ans[0] != errors.NONE:
                self.topic_leaders.get(topic, {}).pop(p, None)
            on_answer(ans)
        self.call(leader, "handle_fetch_isolated", ((topic, p), offset, True), got, 1000.0)

    def txn_call(self, api: Callable, req: Any, on_answer: Callable[[Any], None]) -> None:
        """``api`` (a SimTxnCoordinators method) at the transaction coordinator, found first if need be; a
        request with no answer in time is answered REQUEST_TIMED_OUT, one with no coordinator found
        COORDINATOR_NOT_AVAILABLE."""
        if self.coordinator is None:
            def found(ans: Any) -> None:
                if ans is not None and ans[0] == errors.NONE:
                    self.coordinator = ans[1]
                    self.txn_call(api, req, on_answer)
                else:
                    on_answer(req.error_response(errors.COORDINATOR_NOT_AVAILABLE))
            self.call(self.any_broker(), "handle_find_txn_coordinator", self.tid, found, 2000.0)
            return

        def got(r: Any) -> None:
            r = req.error_response(errors.REQUEST_TIMED_OUT) if r is None else r
            if r.error_code in COORDINATOR_MOVED or r.error_code == errors.REQUEST_TIMED_OUT:
                self.coordinator = None
            on_answer(r)
        self.call(self.coordinator, "handle_txn", (api, req), got, 10_000.0)

    def group_call(self, group: str, api: Callable, req: Any, on_answer: Callable[[Any], None]) -> None:
        """``api`` (a SimCoordinators method) at the group's coordinator: the answer, or None (no coordinator
        found, or no answer in time: it is looked up again next time)."""
        if self.group_coordinator is None:
            def found(ans: Any) -> None:
                if ans is not None and ans[0] == errors.NONE:
                    self.group_coordinator = ans[1]
                    self.group_call(group, api, req, on_answer)
                else:
                    on_answer(None)
            self.call(self.any_broker(), "handle_find_coordinator", group, found, 2000.0)
            return

        def got(r: Any) -> None:
            if r is None:
                self.group_coordinator = None
            on_answer(r)
        self.call(self.group_coordinator, "handle_group", (api, req), got, 7000.0)

    def fetch_committed(self, group: str, tps: list[tuple[str, int]], then: Callable[[dict | None], None]) -> None:
        """The group's committed offsets of ``tps``, stable (no transaction pending on them): {tp: offset}
        (-1: none), or None when they could not be had now."""
        def got(r: Any) -> None:
            if r is None or r.error_code != errors.NONE or any(x.error_code != errors.NONE for x in r.partitions):
                if r is None or r.error_code in GROUP_RETRIABLE:
                    self.group_coordinator = None
                return then(None)
            then({(x.topic, x.partition): x.offset for x in r.partitions})
        self.group_call(group, SimCoordinators.offset_fetch, m.OffsetFetchRequest(group, list(tps), True), got)


class _Txn:
    def __init__(self, op: dict, inputs: list, deadline: float) -> None:
        self.op = op
        self.inputs = inputs            # [[topic, partition, offset, value], ...]
        self.deadline = deadline
        self.ends: dict[int, int] = {}
        for _t, p, o, _v in inputs:
            self.ends[p] = max(self.ends.get(p, 0), o + 1)


class SimTxnPipeline(TxnClient):
    def __init__(self, run, wl, index: int, instance: int) -> None:
        super().__init__(run)
        self.wl, self.index, self.instance = wl, index, instance
        self.tid = f"{wl.transactional_id}-{index}"
        self.process = run.procs()
        self.pid, self.epoch = -1, -1
        self.mine = [p for p in range(wl.partitions_in) if p % wl.pipelines == index]
        self.positions: dict[int, int] = {}
        self.filters: dict[int, CommittedFilter] = {}
        self.seqs: dict[int, int] = {}
        self.txn_seq = 0
        self.open_op: dict | None = None
        self.initialized = False
        self.fenced = False
        self.stopping = False          # finish the transaction under way, then stop
        self.freeze = False            # become a zombie before the next commit
        self.crashed = False           # the process died: nothing it asked is answered to it any more
        self.commits = 0

    def call(self, broker_id: int, handler: str, payload: Any, on_reply: Callable[[Any], None],
             timeout_ms: float = 5000.0) -> None:
        super().call(broker_id, handler, payload, lambda ans: None if self.crashed else on_reply(ans), timeout_ms)

    def crash(self) -> None:
        """The process dies where it is: an operation under way stays open (its outcome unknown)."""
        self.crashed = self.stopped = True

    def start(self) -> None:
        self.refresh_topic(self.wl.input, lambda: self.refresh_topic(self.wl.output, self._init))

    def _invoke(self, f: str, value: dict) -> dict:
        self.open_op = self.history.invoke(self.process, f, value)
        return self.open_op

    def _complete(self, op: dict, type_: str, error: str | None = None) -> None:
        if self.open_op is op:
            self.open_op = None
            self.history.complete(op, type_, error=error, node=self.coordinator)

    def abandon(self) -> None:
        """The run's end: an operation still open is unknown (a crashed process's too)."""
        if self.open_op is not None:
            self._complete(self.open_op, "info", error="stopped")
        self.stopped = True

    # ------------------------------------------------------------------ init, offsets

    def _init(self) -> None:
        if self.stopped:
            return
        op = self._invoke("init-txn", {"transactional_id": self.tid, "instance": self.instance})
        self._init_try(op, self.world.now_ms + INIT_DEADLINE_MS)

    def _init_try(self, op: dict, deadline: float) -> None:
        def got(r: Any) -> None:
            code = r.error_code
            if code == errors.NONE:
                self.pid, self.epoch = r.producer_id, r.producer_epoch
                self.seqs.clear()
                self._complete(op, "ok")
                self.initialized = True
                return self._fetch_offsets()
            if code in TXN_RETRIABLE and self.world.now_ms < deadline:
                return self.later(BACKOFF_MS, self._init_try, op, deadline)
            if code in TXN_RETRIABLE:
                self._complete(op, "info", errors.name(code))
                return self.later(BACKOFF_MS, self._init)
            self._complete(op, "fail", errors.name(code))
            self._fenced()
        self.txn_call(SimTxnCoordinators.init_producer_id,
                      t.InitProducerIdRequest(self.tid, self.wl.timeout_ms, self.pid, self.epoch), got)

    def _fetch_offsets(self) -> None:
        def got(offsets: dict | None) -> None:
            if offsets is None:
                return self.later(BACKOFF_MS, self._fetch_offsets)
            for p in self.mine:
                self.positions[p] = max(offsets.get((self.wl.input, p), -1), 0)
                self.filters[p] = CommittedFilter()
            self._consume()
        self.fetch_committed(self.wl.group, [(self.wl.input, p) for p in self.mine], got)

    # ------------------------------------------------------------------ consume

    def _consume(self) -> None:
        if self.stopped:
            return
        if self.stopping:
            self.stopped = True
            return
        got: dict[int, Any] = {}
        left = set(self.mine)

        def one(p: int, ans: Any) -> None:
            got[p] = ans
            left.discard(p)
            if not left:
                self._consumed(got)
        if not left:
            return self.later(self.wl.poll_interval_ms, self._consume)
        for p in self.mine:
            self.read(self.wl.input, p, self.positions[p], lambda ans, p=p: one(p, ans))

    def _consumed(self, got: dict[int, Any]) -> None:
        if self.stopped:
            return
        inputs: list[list[Any]] = []
        room = self.wl.max_records
        for p in sorted(got):
            ans = got[p]
            if ans is None or ans[0] != errors.NONE or room <= 0:
                continue
            kept = self.filters[p].filter(ans[3], ans[4])[:room]
            room -= len(kept)
            inputs += [[self.wl.input, p, o, (v or b"").decode()] for o, _k, v in kept]
        if not inputs:
            return self.later(self.wl.poll_interval_ms, self._consume)
        self._begin(inputs)

    # ------------------------------------------------------------------ a transaction

    def _begin(self, inputs: list) -> None:
        offsets = {}
        for _t, p, o, _v in inputs:
            offsets[tp_key(self.wl.input, p)] = max(offsets.get(tp_key(self.wl.input, p), 0), o + 1)
        op = self._invoke("txn", {"transactional_id": self.tid, "instance": self.instance, "seq": self.txn_seq,
                                  "inputs": inputs, "offsets": dict(sorted(offsets.items()))})
        tx = _Txn(op, inputs, self.world.now_ms + TXN_DEADLINE_MS)
        parts = sorted({p % self.wl.partitions_out for _t, p, _o, _v in inputs})
        self._add_partitions(tx, parts)

    def _retry_or_fail(self, tx: _Txn, code: int, again: Callable[[], None]) -> None:
        if code not in FATAL and self.world.now_ms < tx.deadline and not self.stopped:
            self.later(BACKOFF_MS, again)
        else:
            self._txn_failed(tx, code)

    def _add_partitions(self, tx: _Txn, parts: list[int]) -> None:
        def got(r: Any) -> None:
            code = r.error_code
            if code == errors.NONE:
                return self._produce(tx, parts, 0)
            if code in TXN_RETRIABLE:
                return self._retry_or_fail(tx, code, lambda: self._add_partitions(tx, parts))
            self._txn_failed(tx, code)
        self.txn_call(SimTxnCoordinators.add_partitions, t.AddPartitionsToTxnRequest(
            self.tid, self.pid, self.epoch, tuple((self.wl.output, p) for p in parts)), got)

    def _produce(self, tx: _Txn, parts: list[int], i: int) -> None:
        if i == len(parts):
            return self._add_offsets(tx)
        p = parts[i]
        values = [output_value(v, self.tid, self.instance, self.txn_seq) for _t, ip, _o, v in tx.inputs
                  if ip % self.wl.partitions_out == p]
        seq = self.seqs.get(p, 0)
        meta = ProducerBatch(self.pid, self.epoch, seq, True)
        leader = self.leader(self.wl.output, p)
        again = lambda: self._produce(tx, parts, i)   # noqa: E731  the same batch, the same sequence

        def got(ans: Any) -> None:
            code = errors.REQUEST_TIMED_OUT if ans is None else ans[0]
            if code == errors.NONE:
                self.seqs[p] = seq + len(values)
                return self._produce(tx, parts, i + 1)
            if code in PRODUCE_RETRIABLE:
                return self.refresh_topic(self.wl.output, lambda: self._retry_or_fail(tx, code, again))
            self._txn_failed(tx, code)
        if leader < 0:
            return self.refresh_topic(self.wl.output,
                                      lambda: self._retry_or_fail(tx, errors.LEADER_NOT_AVAILABLE, again))
        self.call(leader, "handle_produce", ((self.wl.output, p), [(None, x.encode()) for x in values], -1, 5000,
                                             meta), got, 7000.0)

    def _add_offsets(self, tx: _Txn) -> None:
        def got(r: Any) -> None:
            code = r.error_code
            if code == errors.NONE:
                return self._txn_offsets(tx)
            if code in TXN_RETRIABLE:
                return self._retry_or_fail(tx, code, lambda: self._add_offsets(tx))
            self._txn_failed(tx, code)
        self.txn_call(SimTxnCoordinators.add_offsets,
                      t.AddOffsetsToTxnRequest(self.tid, self.pid, self.epoch, self.wl.group), got)

    def _txn_offsets(self, tx: _Txn) -> None:
        req = m.TxnOffsetCommitRequest(self.tid, self.wl.group, self.pid, self.epoch, -1, "", None,
                                       [m.CommitOffset(self.wl.input, p, o) for p, o in sorted(tx.ends.items())])

        def got(r: Any) -> None:
            code = errors.REQUEST_TIMED_OUT if r is None else next(
                (c for _t, _p, c in r.partitions if c != errors.NONE), errors.NONE)
            if code == errors.NONE:
                self._complete(tx.op, "ok")
                return self._pre_commit(tx)
            if code in GROUP_RETRIABLE:
                self.group_coordinator = None
                return self._retry_or_fail(tx, code, lambda: self._txn_offsets(tx))
            self._txn_failed(tx, code)
        self.group_call(self.wl.group, SimCoordinators.txn_offset_commit, req, got)

    def _txn_failed(self, tx: _Txn, code: int) -> None:
        self._complete(tx.op, "fail", errors.name(code))
        if code in FATAL:
            return self._fenced()
        self._end(tx, False)

    def _pre_commit(self, tx: _Txn) -> None:
        if not self.freeze:
            return self._end(tx, True)
        successor = self.wl.take_over(self)        # a zombie now: its successor starts

        def wait() -> None:
            if self.crashed:
                return
            if successor.initialized or successor.fenced or successor.stopped:
                self.world.on_node("client", self.wl.zombie_ms, self._end, tx, True)
            else:
                self.world.on_node("client", BACKOFF_MS, wait)
        wait()

    def _end(self, tx: _Txn, commit: bool) -> None:
        op = self._invoke("end-txn", {"transactional_id": self.tid, "instance": self.instance,
                                      "seq": self.txn_seq, "commit": commit})
        self._end_try(tx, op, commit, self.world.now_ms + END_DEADLINE_MS)

    def _end_try(self, tx: _Txn, op: dict, commit: bool, deadline: float) -> None:
        def got(r: Any) -> None:
            code = r.error_code
            if code == errors.NONE:
                self._complete(op, "ok")
                self.txn_seq += 1
                if commit:
                    self.commits += 1
                    self.positions.update(tx.ends)
                    return self._consume()
                return self._reinit()
            if code in TXN_RETRIABLE and self.world.now_ms < deadline and not self.stopped:
                return self.later(BACKOFF_MS, self._end_try, tx, op, commit, deadline)
            if code in TXN_RETRIABLE:     # no answer: its outcome is unknown; start over with a bumped epoch
                self._complete(op, "info", errors.name(code))
                self.txn_seq += 1
                return self._reinit()
            self._complete(op, "fail", errors.name(code))
            self.txn_seq += 1
            self._fenced() if code in FATAL else self._reinit()
        self.txn_call(SimTxnCoordinators.end_txn, t.EndTxnRequest(self.tid, self.pid, self.epoch, commit), got)

    def _reinit(self) -> None:
        """After an abort (or an unknown end): a bumped epoch (KIP-360), then the committed offsets again."""
        self.later(0.0, self._init)

    def _fenced(self) -> None:
        self.fenced = True
        self.stopped = True
        self.wl.ended(self)


class SimTxnReader(TxnClient):
    """A read_committed consumer of every output partition from the beginning; each round a ``poll``."""

    def __init__(self, run, wl) -> None:
        super().__init__(run)
        self.wl = wl
        self.process = run.procs()
        self.positions = {p: 0 for p in range(wl.partitions_out)}
        self.filters = {p: CommittedFilter() for p in range(wl.partitions_out)}
        self.open_op: dict | None = None

    def start(self) -> None:
        self.refresh_topic(self.wl.output, self._poll)

    def _poll(self) -> None:
        if self.stopped:
            return
        op = self.open_op = self.history.invoke(self.process, "poll", {"topic": self.wl.output,
                                                                       "isolation": "read_committed"})
        got: dict[int, Any] = {}

        def one(p: int, ans: Any) -> None:
            got[p] = ans
            if len(got) < len(self.positions) or self.open_op is not op:
                return
            records = []
            for q in sorted(got):
                a = got[q]
                if a is None or a[0] != errors.NONE or not a[3] or a[3][0][0] != self.positions[q]:
                    continue
                kept = self.filters[q].filter(a[3], a[4])
                self.positions[q] = a[3][-1][0] + 1
                records += [[self.wl.output, q, o, (v or b"").decode()] for o, _k, v in kept]
            self.open_op = None
            self.history.complete(op, "ok", {"topic": self.wl.output, "isolation": "read_committed",
                                             "records": records})
            self.later(self.wl.poll_interval_ms, self._poll)
        for p in sorted(self.positions):
            self.read(self.wl.output, p, self.positions[p], lambda ans, p=p: one(p, ans))

    def abandon(self) -> None:
        if self.open_op is not None:
            op, self.open_op = self.open_op, None
            self.history.complete(op, "info", error="stopped")
        self.stopped = True
