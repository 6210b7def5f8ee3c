"""The failover timeline of the transaction coordinators: per fault, and per transactional id whose
coordinator it hit.

The same rules as judge/timeline.py's group rows (read there: detection, write times, windows), over the
``__transaction_state`` partition P = partition_for(id, n) of each transactional id of the history (its
``init-txn``, ``txn`` and ``end-txn`` operations).  For each fault start at time T whose brokers led P at T, a
row with the stages as ms from T (None when the stage did not happen), in order::

    detect_ms          the controller learned that the old leader was gone (detect_by: how)
    elect_ms           the first failover state of P after the detection (new_leader)
    load_ms            the new leader's txn_coordinator_loaded for P (load_duration_ms, records_replayed,
                       resumed: transactions found in PrepareCommit/PrepareAbort, their markers sent again)
    first_end_txn_ms   the first EndTxn of the id acknowledged (an ok end-txn completing) after the earlier stages
    unavailable_ms     from the first failed init-txn, txn or end-txn of the id completing after T to its first
                       ok end-txn after that (None: never)

Pure: lists of dicts in, lists of dicts (and text) out.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from judge.timeline import (
    SHUTDOWN_KINDS, TimelineEvents, TimelineHistory, detections, first_of, is_failover, ms_since,
)
from kafkacommon.hashing import partition_for

TXN_TOPIC = "__transaction_state"
TXN_OPS = frozenset({"init-txn", "txn", "end-txn"})
TXN_ROW_FIELDS = ("fault", "kind", "target", "nodes", "time_ns", "transactional_id", "partition", "old_leader",
                  "new_leader", "moved", "detect_ms", "detect_by", "elect_ms", "load_ms", "load_duration_ms",
                  "records_replayed", "resumed", "first_end_txn_ms", "unavailable_ms")
TXN_STAGES = ("detect_ms", "elect_ms", "load_ms", "first_end_txn_ms", "unavailable_ms")
_INF = math.inf


def _completions(ops: Sequence[dict]) -> dict[str, list[dict]]:
    """Each transactional id's txn operations' completions, in order: {time, f, type, inv_time}."""
    open_ops: dict[Any, dict] = {}
    out: dict[str, list[dict]] = {}
    for op in ops:
        if op.get("process") == "nemesis" or op.get("f") not in TXN_OPS:
            continue
        if op.get("type") == "invoke":
            open_ops[op.get("process")] = op
            continue
        inv = open_ops.pop(op.get("process"), None) or {}
        v = inv.get("value") if isinstance(inv.get("value"), dict) else {}
        tid = v.get("transactional_id")
        if tid is None:
            continue
        out.setdefault(tid, []).append({"time": op["time"], "f": op.get("f"), "type": op.get("type"),
                                        "inv_time": inv.get("time"), "commit": v.get("commit")})
    return out


def txn_failover_timeline(ops: Sequence[dict], events: Iterable[dict], txn_partitions: int) -> list[dict]:
    """One row per (fault start, transactional id whose coordinator's partition the fault's brokers led)."""
    events = list(events)
    hist = TimelineHistory(ops)
    ev = TimelineEvents(events, topic=TXN_TOPIC, load_event="txn_coordinator_loaded")
    core_loads = sorted((e for e in events if e.get("type") == "txn_partition_loaded"), key=lambda e: e["mono_ns"])
    mine = _completions(ops)
    stop = hist.stop_ns if hist.stop_ns is not None else _INF
    rows: list[dict] = []
    for i, fault in enumerate(hist.faults):
        if not fault.brokers:
            continue
        t0 = fault.time
        later = [f for f in hist.faults[i + 1:] if f.time > t0]
        any_end = min((f.time for f in later), default=_INF)
        controller = ev.controller_at(t0)
        for tid in sorted(mine):
            p = partition_for(tid, txn_partitions)
            old = ev.leader_at(p, t0)
            if old is None or old not in fault.brokers:
                continue
            lead_end = min([f.time for f in later if f.hits(old)] + [stop])
            row: dict[str, Any] = dict.fromkeys(TXN_ROW_FIELDS)
            row.update(fault=fault.id, kind=fault.kind, target=fault.target, nodes=list(fault.nodes), time_ns=t0,
                       transactional_id=tid, partition=p, old_leader=old, moved=False)
            found = detections(ev, old, t0, lead_end, shutdown=fault.kind in SHUTDOWN_KINDS,
                               elected_not_by=controller if controller is not None and controller in fault.brokers
                               else None, partition=p, topic=TXN_TOPIC)
            floor = t0
            if found:
                detect_ns, by = min(found)
                row.update(detect_ms=ms_since(detect_ns, t0), detect_by=by)
                floor = detect_ns
                change = first_of(ev.states.get(p, ()), lambda s: t0 < s["_landed"] < lead_end
                                  and s.get("leader", -1) >= 0 and s.get("leader") != old)
                if change is not None and change["_landed"] >= detect_ns and is_failover(change, old):
                    floor = change["_landed"]
                    row.update(moved=True, new_leader=change["leader"], elect_ms=ms_since(floor, t0))
                    loaded = first_of(ev.loads, lambda e: e["mono_ns"] >= change["_landed"]
                                      and e["broker"] == change["leader"] and e.get("partition") == p)
                    if loaded is not None:
                        floor = loaded["mono_ns"]
                        row.update(load_ms=ms_since(floor, t0), load_duration_ms=loaded.get("duration_ms"),
                                   records_replayed=loaded.get("replayed"))
                        core = first_of(core_loads, lambda e: change["_landed"] <= e["mono_ns"] <= loaded["mono_ns"]
                                        and e["broker"] == change["leader"] and e.get("partition") == p)
                        row["resumed"] = core.get("resumed") if core else None
            done = mine[tid]
            first = first_of(done, lambda c: c["time"] > floor and c["type"] == "ok" and c["f"] == "end-txn")
            row["first_end_txn_ms"] = ms_since(first["time"], t0) if first else None
            failed = first_of(done, lambda c: t0 < c["time"] < any_end and c["type"] in ("fail", "info"))
            if failed is None:
                row["unavailable_ms"] = 0.0
            else:
                back = first_of(done, lambda c: c["time"] > failed["time"] and c["type"] == "ok"
                                and c["f"] == "end-txn")
                row["unavailable_ms"] = ms_since(back["time"], failed["time"]) if back else None
            rows.append(row)
    rows.sort(key=lambda r: (r["time_ns"], r["transactional_id"]))
    return rows


def txn_summary(rows: Sequence[dict]) -> dict:
    """Counts, and median / max of each stage over the rows that have it."""
    stages = {}
    for stage in TXN_STAGES:
        vals = sorted(r[stage] for r in rows if r.get(stage) is not None)
        mid = len(vals) // 2
        median = None if not vals else vals[mid] if len(vals) % 2 else round((vals[mid - 1] + vals[mid]) / 2, 3)
        stages[stage] = {"count": len(vals), "median": median, "max": vals[-1] if vals else None}
    return {"rows": len(rows), "moved": sum(1 for r in rows if r.get("moved")),
            "never_recovered": sum(1 for r in rows if r.get("unavailable_ms") is None), "stages": stages}


def format_txn_table(rows: Sequence[dict]) -> str:
    if not rows:
        return "(no fault hit a transaction coordinator)"

    def num(v: Any) -> str:
        return "-" if v is None else f"{v:.1f}"
    head = ("fault", "kind", "transactional id", "P", "leader", "detect", "elect", "load (replayed)",
            "first EndTxn", "unavailable")
    lines = [head]
    for r in rows:
        who = f"{r['old_leader']}→" + (str(r["new_leader"]) if r.get("new_leader") is not None else "-")
        load = num(r.get("load_ms")) + (f" ({r['records_replayed']})" if r.get("records_replayed") is not None else "")
        lines.append((str(r["fault"]), str(r["kind"]), str(r["transactional_id"]), str(r["partition"]), who,
                      num(r.get("detect_ms")), num(r.get("elect_ms")), load, num(r.get("first_end_txn_ms")),
                      num(r.get("unavailable_ms"))))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
                     for line in lines)
