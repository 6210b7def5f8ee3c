"""Checkers of a transactional workload (a chaos run's ``workload.transactions``, or a simulated one).

Consume-transform-produce pipelines read the input topic (read_committed) and, in one transaction each time,
write one output record per input record and send the group's offsets (AddOffsetsToTxn, TxnOffsetCommit).
An output record's value names its input and its transaction: ``<input value>@<transactional id>#<instance>.<seq>``
(instance: the pipeline process with that transactional id, counted from 0; seq: its transactions).  The
history has, per pipeline process:

* ``init-txn`` ``{transactional_id, instance}``: InitProducerId (ok: the producer's id and epoch);
* ``txn`` ``{transactional_id, instance, seq, inputs: [[topic, partition, offset, value], ...], offsets}``:
  the transaction's records produced and its offsets sent (ok), before the commit;
* ``end-txn`` ``{transactional_id, instance, seq, commit}``: EndTxn, commit or abort (``ok``: done; ``fail``:
  refused, the transaction did not commit; ``info``: unknown);

and read_committed consumers' ``poll`` operations of the output (``value.isolation`` ``read_committed``), the
final ones (``final``) reading each output partition to its end once the pipelines stopped.  ``txn`` (the
option, chaos/txn_run.py's ``txn.json``): ``input``, ``output``, ``group``, ``drained`` (the group's
committed offsets reached the input's end), ``final_committed`` (``{"t/p": offset}``: the group's offsets at
the end).  Without it these checkers judge nothing.  Pure: no clock, no I/O.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping

from judge.check_model import CheckResult, Op, Report, as_history, offsets_of, poll_records, sent_record

TxnKey = tuple[str, int, int]          # (transactional id, instance, seq)


def parse_output(value: Any) -> tuple[str, TxnKey] | None:
    """(input value, transaction) of an output record's value; None when it is not one."""
    if not isinstance(value, str) or "@" not in value:
        return None
    inp, _, tag = value.rpartition("@")
    head, _, seq = tag.rpartition(".")
    tid, _, inst = head.rpartition("#")
    if not tid or not inst.isdigit() or not seq.isdigit():
        return None
    return inp, (tid, int(inst), int(seq))


def output_value(input_value: str, transactional_id: str, instance: int, seq: int) -> str:
    return f"{input_value}@{transactional_id}#{instance}.{seq}"


@dataclass
class Txn:
    key: TxnKey
    op: Op | None = None                       # the txn op
    commit: Op | None = None                   # the end-txn commit op
    abort: Op | None = None                    # the end-txn abort op

    @property
    def outcome(self) -> str:
        """committed, aborted (refused, or aborted), unknown, or open (no EndTxn commit asked)."""
        if self.commit is not None:
            if self.commit.type == "ok":
                return "committed"
            if self.commit.type == "fail":
                return "aborted"
            return "unknown"
        if self.abort is not None and self.abort.type == "ok":
            return "aborted"
        return "open"


@dataclass
class TxnHistory:
    txns: dict[TxnKey, Txn] = field(default_factory=dict)
    inits: dict[tuple[str, int], Op] = field(default_factory=dict)       # (tid, instance) -> its ok init-txn
    reads: list[Op] = field(default_factory=list)                         # read_committed polls (ok)
    finals: list[Op] = field(default_factory=list)                        # the final ones among them

    @classmethod
    def of(cls, h: Any, output: str) -> "TxnHistory":
        out = cls()
        for op in h.ops:
            v = op.invoke.get("value")
            if not isinstance(v, dict):
                continue
            if op.f in ("txn", "end-txn") and "transactional_id" in v:
                key = (v["transactional_id"], int(v.get("instance", 0)), int(v.get("seq", -1)))
                t = out.txns.setdefault(key, Txn(key))
                if op.f == "txn":
                    t.op = op
                elif v.get("commit"):
                    t.commit = op
                else:
                    t.abort = op
            elif op.f == "init-txn" and op.type == "ok" and "transactional_id" in v:
                out.inits[(v["transactional_id"], int(v.get("instance", 0)))] = op
            elif op.f == "poll" and op.type == "ok" and v.get("isolation") == "read_committed" \
                    and v.get("topic") == output:
                out.reads.append(op)
                if op.final:
                    out.finals.append(op)
        return out

    def committed_output(self) -> dict[str, set[tuple[int, int]]]:
        """The final read_committed reads: input value -> the (partition, offset) of each output record of it."""
        out: dict[str, set[tuple[int, int]]] = defaultdict(set)
        for op in self.finals:
            for _t, p, o, val in poll_records(op):
                parsed = parse_output(val)
                if parsed is not None:
                    out[parsed[0]].add((p, o))
        return out


def _inputs(h: Any, topic: str) -> list[tuple[Op, tuple[str, int, int, Any]]]:
    out = []
    for op in h.of("send", "ok"):
        rec = sent_record(op)
        if rec is not None and rec[0] == topic:
            out.append((op, rec))
    return out


def asked_at(invoke: Mapping[str, Any]) -> int:
    """When an EndTxn was asked for: the invoke's ``time``, or the client's own earlier stamp of it
    (``client_time``, same monotonic clock) when the runner wrote the line late."""
    t = invoke["time"]
    c = invoke.get("client_time")
    return min(t, c) if isinstance(c, int) and not isinstance(c, bool) else t


def check_read_committed(ops: Any, events: Any = None, *, txn: Mapping[str, Any] | None = None,
                         **_: Any) -> CheckResult:
    """``txn-read-aborted``: a read_committed read returned a record of a transaction that did not commit (its
    EndTxn commit refused, or it was aborted).  ``txn-read-uncommitted``: it returned a record before the
    record's transaction asked to commit (or of one that never did): past the last stable offset."""
    r = Report("read-committed", "records_judged", "unjudged")
    if not txn:
        return r.result()
    h = as_history(ops)
    th = TxnHistory.of(h, txn["output"])
    r.stats["reads"] = len(th.reads)
    for op in th.reads:
        for t, p, o, val in poll_records(op):
            parsed = parse_output(val)
            t_ = th.txns.get(parsed[1]) if parsed else None
            if t_ is None:
                r.count("unjudged")
                continue
            r.count("records_judged")
            read_at = op.done["time"]
            if t_.commit is None or read_at < asked_at(t_.commit.invoke):
                when = "it never asked to commit" if t_.commit is None else "before it asked to commit"
                r.add("txn-read-uncommitted", f"read_committed read {val!r} at {t}/{p} offset {o}, of transaction "
                      f"{parsed[1]}, {when}", [op.done, t_.commit.invoke if t_.commit else None],
                      topic=t, partition=p, offset=o, value=val)
            elif t_.outcome == "aborted":
                r.add("txn-read-aborted", f"read_committed read {val!r} at {t}/{p} offset {o}, of transaction "
                      f"{parsed[1]}, which did not commit", [op.done, t_.commit.done if t_.commit else None],
                      topic=t, partition=p, offset=o, value=val)
    return r.result()


def check_exactly_once(ops: Any, events: Any = None, *, txn: Mapping[str, Any] | None = None,
                       **_: Any) -> CheckResult:
    """``txn-duplicate-output``: an input record is in the committed output more than once.  ``txn-lost-input``:
    the pipelines drained the input (the group's committed offsets reached its end), yet an acknowledged input
    record is not in the committed output."""
    r = Report("exactly-once", "inputs", "in_output_once")
    if not txn:
        return r.result()
    h = as_history(ops)
    th = TxnHistory.of(h, txn["output"])
    if not th.finals:
        r.unknown("exactly-once: no final read_committed read of the output")
        return r.result()
    output = th.committed_output()
    drained = bool(txn.get("drained"))
    if not drained:
        r.unknown("exactly-once: the pipelines did not drain the input: lost inputs are not judged")
    for op, (t, p, o, val) in _inputs(h, txn["input"]):
        r.count("inputs")
        got = output.get(val, set())
        if len(got) == 1:
            r.count("in_output_once")
        elif len(got) > 1:
            r.add("txn-duplicate-output", f"input {val!r} ({t}/{p} offset {o}) is in the committed output "
                  f"{len(got)} times, at {sorted(got)}", [op.done], value=val, topic=t, partition=p, offset=o)
        elif drained:
            r.add("txn-lost-input", f"input {val!r} ({t}/{p} offset {o}) is not in the committed output, though "
                  f"the group's offsets passed it", [op.done], value=val, topic=t, partition=p, offset=o)
    return r.result()


def check_txn_offsets(ops: Any, events: Any = None, *, txn: Mapping[str, Any] | None = None,
                      **_: Any) -> CheckResult:
    """The group's offsets move only with their transaction: ``txn-offsets-ahead``, the final committed offset
    of an input partition is past an input record that is not in the committed output; ``txn-offsets-behind``,
    an input record at or past it is in the committed output."""
    r = Report("txn-offsets", "inputs_judged")
    if not txn:
        return r.result()
    h = as_history(ops)
    th = TxnHistory.of(h, txn["output"])
    committed = offsets_of({"offsets": txn.get("final_committed") or {}})
    if not th.finals or not committed:
        r.unknown("txn-offsets: no final committed offsets of the group, or no final read of the output")
        return r.result()
    output = th.committed_output()
    for op, (t, p, o, val) in _inputs(h, txn["input"]):
        c = committed.get((t, p))
        if (t, p) not in committed:
            continue
        c = c if c is not None else 0
        r.count("inputs_judged")
        there = bool(output.get(val))
        if o < c and not there:
            r.add("txn-offsets-ahead", f"the group committed {t}/{p} up to {c}, past input {val!r} at offset {o}, "
                  f"which is not in the committed output", [op.done], topic=t, partition=p, offset=o, value=val)
        elif o >= c and there:
            r.add("txn-offsets-behind", f"input {val!r} at {t}/{p} offset {o} is in the committed output, but the "
                  f"group's committed offset is {c}", [op.done], topic=t, partition=p, offset=o, value=val)
    return r.result()


def check_zombies(ops: Any, events: Any = None, *, txn: Mapping[str, Any] | None = None,
                  **_: Any) -> CheckResult:
    """``zombie-write-committed``: a pipeline process whose transactional id a newer one had initialized (its
    InitProducerId acknowledged) got a later transaction committed: its EndTxn commit acknowledged, or its
    records in the committed output."""
    r = Report("zombie", "zombie_transactions")
    if not txn:
        return r.result()
    h = as_history(ops)
    th = TxnHistory.of(h, txn["output"])
    by_txn: dict[TxnKey, list[str]] = defaultdict(list)
    for op in th.finals:
        for _t, _p, _o, val in poll_records(op):
            parsed = parse_output(val)
            if parsed is not None:
                by_txn[parsed[1]].append(val)
    for key, t_ in sorted(th.txns.items()):
        tid, inst, _seq = key
        later = [op for (t2, i2), op in th.inits.items() if t2 == tid and i2 > inst]
        if not later or t_.commit is None:
            continue
        fenced_at = min(op.done["time"] for op in later)
        if t_.commit.invoke["time"] <= fenced_at:
            continue
        r.count("zombie_transactions")
        if t_.commit.type == "ok" or by_txn.get(key):
            r.add("zombie-write-committed", f"transaction {key} of a fenced process (a newer {tid!r} initialized "
                  f"first) committed: EndTxn {t_.commit.type}, {len(by_txn.get(key, []))} records in the committed "
                  f"output", [t_.commit.invoke, t_.commit.done, min(later, key=lambda op: op.done['time']).done],
                  transactional_id=tid, instance=inst)
    return r.result()
