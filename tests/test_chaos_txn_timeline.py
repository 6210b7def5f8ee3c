"""judge.txn_timeline on a synthetic history and event log: the stages of a transaction coordinator's failover.

Brokers 1-3, broker 3 the controller; __transaction_state with 4 partitions: eos-0 -> P0 (broker 1),
eos-1 -> P1 (broker 2).
"""
from __future__ import annotations

from judge.txn_timeline import TXN_ROW_FIELDS, format_txn_table, txn_failover_timeline, txn_summary
from kafkacommon.hashing import partition_for

BASE_NS = 7_000_000_000_000
TXN = "__transaction_state"


def ns(ms: float) -> int:
    return BASE_NS + round(ms * 1_000_000)


class Run:
    def __init__(self) -> None:
        self.ops: list[dict] = []
        self.events: list[dict] = []
        self._process = 0

    def ev(self, t_ms: float, broker: int, type_: str, **fields) -> None:
        self.events.append({"ts_ms": 1.7e12 + t_ms, "mono_ns": ns(t_ms), "broker": broker, "type": type_, **fields})

    def state(self, t_ms: float, p: int, leader: int, reason: str, prev: int | None) -> None:
        self.ev(t_ms, 3, "partition_state_written", topic=TXN, partition=p, reason=reason, leader=leader,
                leader_epoch=0 if prev is None else 1, isr=[leader], controller_epoch=1, zk_version=0,
                previous_leader=prev, previous_isr=None)

    def op(self, tid: str, f: str, invoke_ms: float, done_ms: float, result: str = "ok", error=None,
           **value) -> None:
        p = self._process
        self._process += 1
        v = {"transactional_id": tid, **value}
        self.ops.append({"type": "invoke", "process": p, "time": ns(invoke_ms), "f": f, "value": v})
        self.ops.append({"type": result, "process": p, "time": ns(done_ms), "f": f, "value": v, "error": error})

    def fault(self, t_ms: float, target: str, nodes: list) -> None:
        self.ops.append({"type": "info", "process": "nemesis", "time": ns(t_ms), "f": "kill",
                         "value": {"fault": 0, "phase": "start", "kind": "kill", "target": target, "nodes": nodes}})

    def timeline(self) -> list[dict]:
        ops = sorted(self.ops, key=lambda o: o["time"])
        return txn_failover_timeline([dict(o, index=i) for i, o in enumerate(ops)], self.events, 4)


def test_the_ids_map_to_the_partitions_the_test_assumes():
    assert partition_for("eos-0", 4) == 0 and partition_for("eos-1", 4) == 1


def test_a_kill_of_one_transaction_coordinator():
    r = Run()
    r.ev(0, 3, "controller_elected", epoch=1, epoch_zk_version=1, elect_ms=3.0)
    r.state(10, 0, 1, "new_partition", None)
    r.state(10, 1, 2, "new_partition", None)
    for tid in ("eos-0", "eos-1"):
        r.op(tid, "init-txn", 100, 200)
        r.op(tid, "end-txn", 900, 950, commit=True)
    r.fault(1000, "txn-coordinator:eos-0", [1])
    r.op("eos-0", "end-txn", 1100, 1400, "fail", error="NOT_COORDINATOR", commit=True)
    r.ev(2500, 3, "broker_change", controller_epoch=1, new=[], dead=[1], bounced=[], epochs={})
    r.state(2502, 0, 2, "offline_election", 1)
    r.ev(2510, 2, "txn_partition_loaded", partition=0, resumed=1)
    r.ev(2530, 2, "txn_coordinator_loaded", partition=0, leader_epoch=1, records=12, replayed=7, bytes=900,
         end_offset=12, transactional_ids=1, duration_ms=20.0)
    r.op("eos-0", "end-txn", 2400, 2600, "info", error="COORDINATOR_LOAD_IN_PROGRESS", commit=True)
    r.op("eos-0", "end-txn", 2700, 2750, commit=True)
    r.op("eos-1", "end-txn", 2000, 2050, commit=True)

    rows = r.timeline()
    assert [row["transactional_id"] for row in rows] == ["eos-0"]   # eos-1's coordinator was not hit
    row = rows[0]
    assert list(row) == list(TXN_ROW_FIELDS)
    assert row == dict(row, fault=0, kind="kill", partition=0, old_leader=1, new_leader=2, moved=True,
                       detect_ms=1500.0, detect_by="broker_change", elect_ms=1502.0, load_ms=1530.0,
                       load_duration_ms=20.0, records_replayed=7, resumed=1, first_end_txn_ms=1750.0,
                       unavailable_ms=1350.0)
    s = txn_summary(rows)
    assert s["rows"] == 1 and s["moved"] == 1 and s["never_recovered"] == 0
    assert s["stages"]["first_end_txn_ms"] == {"count": 1, "median": 1750.0, "max": 1750.0}
    table = format_txn_table(rows).splitlines()
    assert table[0].split()[:3] == ["fault", "kind", "transactional"] and "1→2" in table[1]
    assert "1530.0 (7)" in table[1]


def test_a_coordinator_that_never_comes_back_has_no_first_end_txn():
    r = Run()
    r.ev(0, 3, "controller_elected", epoch=1, epoch_zk_version=1, elect_ms=3.0)
    r.state(10, 0, 1, "new_partition", None)
    r.op("eos-0", "init-txn", 100, 200)
    r.fault(1000, "txn-coordinator:eos-0", [1])
    r.op("eos-0", "end-txn", 1100, 1400, "fail", error="NOT_COORDINATOR", commit=True)
    [row] = r.timeline()
    assert row["moved"] is False and row["first_end_txn_ms"] is None and row["unavailable_ms"] is None
    assert txn_summary([row])["never_recovered"] == 1
    assert format_txn_table([]) == "(no fault hit a transaction coordinator)"
