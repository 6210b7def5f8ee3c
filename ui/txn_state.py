"""The web view's transactions: each transactional id's state and its coordinator, from events (a part of
ui/state.py's :class:`ClusterState`, kept apart for size).  Pure, as the rest of the reducer.

A transactional id's row follows its coordinator's events (docs/events.md): ``txn_loaded`` (what a load
found) and ``txn_state_changed`` (state, producer id and epoch, the transaction's partitions, the reason;
commits and aborts are counted as they complete) from the broker that logged them; its coordinator is
also the leader of its ``__transaction_state`` partition (``partition_state_written``), loading or loaded
(``txn_coordinator_load_started``, ``txn_coordinator_loaded``, ``txn_coordinator_unloaded``).  Rows are
keyed ``t:<id>`` in ``dirty``.
"""
from __future__ import annotations

from typing import Any

TXN_TOPIC = "__transaction_state"


class TxnStateMixin:
    """Expects ``self.dirty`` (a set) and ``self.t_ns``; call :meth:`_txn_init` from ``__init__``."""

    dirty: set[str]

    def _txn_init(self) -> None:
        self.txns: dict[str, dict[str, Any]] = {}
        self.txn_coordinators: dict[int, dict[str, Any]] = {}   # partition -> {broker, state, load_ms}

    def _txn_coordinator(self, p: int) -> dict[str, Any]:
        c = self.txn_coordinators.get(p)
        if c is None:
            c = self.txn_coordinators[p] = {"broker": None, "state": None, "load_ms": None}
        return c

    def _txn(self, txn_id: str, p: int) -> dict[str, Any]:
        row = self.txns.get(txn_id)
        if row is None:
            row = self.txns[txn_id] = {"transactional_id": txn_id, "partition": p, "coordinator": None,
                                       "coordinator_state": None, "state": None, "producer_id": None,
                                       "producer_epoch": None, "partitions": [], "reason": None, "commits": 0,
                                       "aborts": 0, "changed_ns": None}
        self.dirty.add("t:" + txn_id)
        return row

    def _txn_rows_of(self, p: int) -> list[dict[str, Any]]:
        return [r for r in self.txns.values() if r["partition"] == p]

    def _txn_coordinator_moved(self, p: int) -> None:
        c = self._txn_coordinator(p)
        for row in self._txn_rows_of(p):
            if (row["coordinator"], row["coordinator_state"]) != (c["broker"], c["state"]):
                self._txn(row["transactional_id"], p).update(coordinator=c["broker"], coordinator_state=c["state"])

    def txn_partition_state(self, e: dict) -> None:
        """A ``partition_state_written`` of ``__transaction_state``: the partition's new leader coordinates."""
        p, leader = e["partition"], e["leader"]
        c = self._txn_coordinator(p)
        if c["broker"] != (leader if leader >= 0 else None):
            c.update(broker=leader if leader >= 0 else None, state=None, load_ms=None)
            self._txn_coordinator_moved(p)

    def _on_txn_coordinator_load_started(self, e: dict, t: int) -> None:
        self._txn_coordinator(e["partition"]).update(broker=e["broker"], state="loading", load_ms=None)
        self._txn_coordinator_moved(e["partition"])

    def _on_txn_coordinator_loaded(self, e: dict, t: int) -> None:
        self._txn_coordinator(e["partition"]).update(broker=e["broker"], state="loaded",
                                                     load_ms=e.get("duration_ms"))
        self._txn_coordinator_moved(e["partition"])

    def _on_txn_coordinator_unloaded(self, e: dict, t: int) -> None:
        c = self._txn_coordinator(e["partition"])
        if c["broker"] == e["broker"]:
            c["state"] = "unloaded"
            self._txn_coordinator_moved(e["partition"])

    def _txn_seen(self, e: dict, t: int, state: str | None) -> dict[str, Any]:
        row = self._txn(e["transactional_id"], e["partition"])
        c = self._txn_coordinator(e["partition"])
        row.update(coordinator=e["broker"], coordinator_state=c["state"] if c["broker"] == e["broker"] else None,
                   state=state, producer_id=e.get("producer_id"), producer_epoch=e.get("producer_epoch"),
                   partitions=[f"{tp[0]}-{tp[1]}" for tp in e.get("partitions") or []], changed_ns=t)
        return row

    def _on_txn_loaded(self, e: dict, t: int) -> None:
        self._txn_seen(e, t, e.get("state"))["reason"] = "loaded"

    def _on_txn_state_changed(self, e: dict, t: int) -> None:
        row = self._txn_seen(e, t, e.get("to"))
        row["reason"] = e.get("reason")
        if e.get("to") == "CompleteCommit":
            row["commits"] += 1
        elif e.get("to") == "CompleteAbort":
            row["aborts"] += 1

    def _on_txn_expired(self, e: dict, t: int) -> None:
        row = self._txn(e["transactional_id"], e["partition"])
        row.update(state="Dead", reason="expired", changed_ns=t)

    def txns_json(self, keys: Any = None) -> list[dict[str, Any]]:
        names = sorted(self.txns) if keys is None else sorted(k for k in keys if k in self.txns)
        return [dict(self.txns[n]) for n in names]
