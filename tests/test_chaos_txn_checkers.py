"""The transactional workload's checkers (judge/checks_txn.py) on small histories: each anomaly kind found
where it is, and a clean history valid."""
from __future__ import annotations

import itertools

from judge.check_model import CheckResult
from judge.checkers import check
from judge.checks_txn import output_value, parse_output
from judge.registry import KINDS, TXN_CHECKERS, TXN_KINDS

TXN = {"input": "in", "output": "out", "group": "g", "drained": True, "final_committed": {"in/0": 2}}


class H:
    """A history written line by line, the clock ticking one per line."""

    def __init__(self) -> None:
        self.lines: list[dict] = []
        self._t = itertools.count(1)
        self._procs = itertools.count()

    def op(self, f: str, value: dict, type_: str = "ok", done: dict | None = None, process: int | None = None,
           **extra) -> tuple[dict, dict]:
        process = next(self._procs) if process is None else process
        inv = {"index": len(self.lines), "type": "invoke", "process": process, "time": next(self._t), "f": f,
               "value": value, "error": None, "node": None, "group": None, **extra}
        self.lines.append(inv)
        out = {"index": len(self.lines), "type": type_, "process": process, "time": next(self._t), "f": f,
               "value": done if done is not None else value, "error": None if type_ == "ok" else "X", "node": None,
               "group": None, **extra}
        self.lines.append(out)
        return inv, out

    def send(self, offset: int, value: str) -> None:
        self.op("send", {"topic": "in", "partition": 0, "offset": offset, "value": value})

    def txn(self, seq: int, inputs: list[tuple[int, str]], commit: str | None = "ok", instance: int = 0) -> None:
        base = {"transactional_id": "t", "instance": instance, "seq": seq}
        self.op("txn", {**base, "inputs": [["in", 0, o, v] for o, v in inputs], "offsets": {"in/0": inputs[-1][0] + 1}})
        if commit is not None:
            self.op("end-txn", {**base, "commit": True}, commit)

    def read(self, values: list[str], final: bool = False) -> None:
        recs = [["out", 0, i, v] for i, v in enumerate(values)]
        extra = {"final": True} if final else {}
        self.op("poll", {"topic": "out", "partition": 0, "isolation": "read_committed", "records": recs}, **extra)


def out(v: str, seq: int, instance: int = 0) -> str:
    return output_value(v, "t", instance, seq)


def clean() -> H:
    h = H()
    h.send(0, "a")
    h.send(1, "b")
    h.op("init-txn", {"transactional_id": "t", "instance": 0})
    h.txn(0, [(0, "a"), (1, "b")])
    h.read([out("a", 0), out("b", 0)])
    h.read([out("a", 0), out("b", 0)], final=True)
    return h


def txn_check(h: H, txn=TXN) -> CheckResult:
    """The transactional checkers alone (the others need broker events)."""
    return CheckResult.merge(c.check(h.lines, [], txn=txn) for c in TXN_CHECKERS.values())


def kinds(h: H, txn=TXN) -> set[str]:
    return txn_check(h, txn).kinds()


def test_output_values_name_their_input_and_transaction():
    assert parse_output(output_value("p0-7", "eos-1", 2, 31)) == ("p0-7", ("eos-1", 2, 31))
    assert parse_output("plain") is None and parse_output("x@y") is None
    assert set(TXN_KINDS).isdisjoint(KINDS) and list(TXN_CHECKERS) == ["read-committed", "exactly-once",
                                                                       "txn-offsets", "zombie"]


def test_a_clean_history_is_valid():
    assert txn_check(clean()).verdict == "valid"


def test_reading_an_aborted_or_uncommitted_record():
    h = clean()
    h.txn(1, [(0, "a")], commit="fail")                 # refused: it did not commit
    h.read([out("a", 1)])
    assert kinds(h) >= {"txn-read-aborted"}
    h2 = clean()
    h2.txn(1, [(1, "b")], commit=None)                  # never asked to commit
    h2.read([out("b", 1)])
    assert "txn-read-uncommitted" in kinds(h2)


def test_a_commit_written_late_counts_from_the_clients_own_stamp():
    """A Java pipeline's lines reach the runner late on a loaded machine: the EndTxn's invoke carries the JVM's
    own stamp (``client_time``), and a read between the ask and the late line is not past the LSO."""
    def late_commit(client_time) -> H:
        h = clean()
        base = {"transactional_id": "t", "instance": 0, "seq": 1}
        h.op("txn", {**base, "inputs": [["in", 0, 1, "b"]], "offsets": {"in/0": 2}})
        asked = next(h._t)                         # the client asked here, before the read
        h.read([out("b", 1)])
        extra = {} if client_time is None else {"client_time": client_time(asked)}
        h.op("end-txn", {**base, "commit": True}, **extra)    # the runner writes the invoke after the read
        return h
    assert "txn-read-uncommitted" not in kinds(late_commit(lambda asked: asked))
    assert "txn-read-uncommitted" in kinds(late_commit(None))
    assert "txn-read-uncommitted" in kinds(late_commit(lambda asked: asked + 100))   # later than written: not used


def test_duplicates_and_lost_inputs():
    h = clean()
    h.read([out("a", 0), out("a", 5)], final=True)
    assert "txn-duplicate-output" in kinds(h)
    h2 = H()
    h2.send(0, "a")
    h2.read([], final=True)
    assert "txn-lost-input" in kinds(h2, {**TXN, "final_committed": {"in/0": 0}})
    assert "txn-lost-input" not in kinds(h2, {**TXN, "drained": False, "final_committed": {"in/0": 0}})


def test_offsets_that_moved_without_their_records_or_the_other_way():
    h = H()
    h.send(0, "a")
    h.send(1, "b")
    h.read([out("a", 0)], final=True)
    assert "txn-offsets-ahead" in kinds(h, {**TXN, "drained": False})             # committed to 2, b not there
    assert "txn-offsets-behind" in kinds(h, {**TXN, "drained": False, "final_committed": {"in/0": 0}})


def test_a_zombie_commit():
    h = clean()
    h.op("init-txn", {"transactional_id": "t", "instance": 1})     # a newer process fences instance 0
    h.txn(1, [(1, "b")], commit="ok", instance=0)                  # and yet the zombie's commit succeeds
    assert "zombie-write-committed" in kinds(h)
    h2 = clean()
    h2.op("init-txn", {"transactional_id": "t", "instance": 1})
    h2.txn(1, [(1, "b")], commit="fail", instance=0)               # fenced, as it should be
    assert "zombie-write-committed" not in kinds(h2)


def test_nothing_is_judged_without_the_txn_option():
    h = clean()
    h.txn(1, [(1, "b")], commit=None)
    h.read([out("b", 1)])
    assert "txn-read-uncommitted" not in check(h.lines, [], final_reads_required=False).kinds()
    assert "txn-read-uncommitted" in kinds(h)
