"""Checking a run (chaos or simulated): the history and the brokers' event logs -> a verdict and its evidence.

    result = check(read_history(run / "history.jsonl"), read_run_events(run))
    result.verdict      # "valid" | "invalid" | "unknown"
    result.exit_code    # 0 | 1 | 2
    result.anomalies    # [Anomaly(kind, message, ops, events, details)]

Each checker is a function ``(ops, events, **options) -> CheckResult`` that
can be called alone; :func:`check` runs every checker of ``judge.registry.CHECKERS``
and merges their results.
Anomaly kinds and the exact rule behind each: docs/chaos.md, "Checkers".
The checkers are pure: the history's ``time`` and the events' ``mono_ns``
are the same clock, and nothing here reads a clock or a file.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from judge.check_model import Anomaly, CheckResult, Events, History, as_events, as_history
from judge.checks_cluster import check_controllers, check_hw, check_unclean_elections
from judge.checks_groups import (check_commit_order, check_fenced_generations, check_lost_commits,
                                 check_split_coordinator)
from judge.checks_log import check_lost_writes, check_offsets, check_unseen
from judge.registry import APP_CHECKERS, CHECKERS, TXN_CHECKERS

__all__ = ["Anomaly", "CheckResult", "check", "check_commit_order", "check_controllers", "check_fenced_generations",
           "check_hw", "check_lost_commits", "check_lost_writes", "check_offsets", "check_split_coordinator",
           "check_unclean_elections", "check_unseen"]


def check(ops: "History | Iterable[dict[str, Any]]", events: "Events | Iterable[dict[str, Any]] | None", *,
          unclean_election: bool = False, final_reads_required: bool = True,
          offsets_partitions: int | None = None, app: Mapping[str, Any] | None = None,
          txn: Mapping[str, Any] | None = None) -> CheckResult:
    """Run every checker over a run's history and merged event logs.

    ``unclean_election``: the cluster allowed unclean elections (the
    ``unclean-election`` checker is then skipped).  ``final_reads_required``:
    a partition with acknowledged sends but no final read makes the verdict
    unknown.  ``offsets_partitions``: the number of ``__consumer_offsets``
    partitions, when the events have no ``topic_created`` line for it.  ``app``: what the run observed of
    the user's application (chaos/apps.py's ``app.json``); the checkers of ``APP_CHECKERS`` run with it.
    ``txn``: what the run saw of its transactional workload (chaos/txn_run.py's ``txn.json``); the checkers of
    ``TXN_CHECKERS`` run with it."""
    try:
        h = as_history(ops)
    except (ValueError, KeyError, TypeError) as e:
        return CheckResult(unknowns=[f"malformed history: {e}"], stats={"anomalies": {}})
    ev = as_events(events)
    options = {"unclean_election": unclean_election, "final_reads_required": final_reads_required,
               "offsets_partitions": offsets_partitions}
    results = [c.check(h, ev, **options) for c in CHECKERS.values()]
    if app is not None:
        results += [c.check(h, ev, app=app, **options) for c in APP_CHECKERS.values()]
    if txn is not None:
        results += [c.check(h, ev, txn=txn, **options) for c in TXN_CHECKERS.values()]
    out = CheckResult.merge(results)
    out.stats["history"] = {"lines": len(h.lines), "operations": len(h.ops),
                            "open": sum(1 for op in h.ops if op.type == "open")}
    out.stats["events"] = len(ev)
    return out
