"""Checking a chaos run: the history and the brokers' event logs -> a verdict and its evidence.

    result = check(read_history(run / "history.jsonl"), read_run_events(run))
    result.verdict      # "valid" | "invalid" | "unknown"
    result.exit_code    # 0 | 1 | 2
    result.anomalies    # [Anomaly(kind, message, ops, events, details)]

Each checker is a function ``(ops, events, **options) -> CheckResult`` that
can be called alone; :func:`check` runs them all and merges their results.
Anomaly kinds and the exact rule behind each: docs/chaos.md, "Checkers".
The checkers are pure: the history's ``time`` and the events' ``mono_ns``
are the same clock, and nothing here reads a clock or a file.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from chaos.check_model import Anomaly, CheckResult, Events, History, as_events, as_history
from chaos.check_names import CHECKS
from chaos.checks_cluster import check_controllers, check_hw, check_unclean_elections
from chaos.checks_groups import (check_commit_order, check_fenced_generations, check_lost_commits,
                                 check_split_coordinator)
from chaos.checks_log import check_lost_writes, check_offsets, check_unseen

__all__ = ["Anomaly", "CheckResult", "CHECKERS", "FUNCTIONS", "KINDS", "check", "check_commit_order", "check_controllers",
           "check_fenced_generations", "check_hw", "check_lost_commits", "check_lost_writes", "check_offsets",
           "check_split_coordinator", "check_unclean_elections", "check_unseen"]

Checker = Callable[..., CheckResult]

# each checker of chaos.check_names.CHECKS (names, kinds and descriptions are defined there, once)
FUNCTIONS: dict[str, Checker] = {
    "lost-write": check_lost_writes,
    "offsets": check_offsets,
    "commit-order": check_commit_order,
    "lost-commit": check_lost_commits,
    "fenced-generation": check_fenced_generations,
    "split-coordinator": check_split_coordinator,
    "controllers": check_controllers,
    "unclean-election": check_unclean_elections,
    "hw": check_hw,
    "unseen-message": check_unseen,
}
# name -> (checker, the anomaly kinds it reports), in CHECKS's order
CHECKERS: dict[str, tuple[Checker, tuple[str, ...]]] = {
    name: (FUNCTIONS[name], c.kinds) for name, c in CHECKS.items() if name in FUNCTIONS}
KINDS: tuple[str, ...] = tuple(k for _f, kinds in CHECKERS.values() for k in kinds)


def check(ops: "History | Iterable[dict[str, Any]]", events: "Events | Iterable[dict[str, Any]] | None", *,
          unclean_election: bool = False, final_reads_required: bool = True,
          offsets_partitions: int | None = None) -> CheckResult:
    """Run every checker over a run's history and merged event logs.

    ``unclean_election``: the cluster allowed unclean elections (the
    ``unclean-election`` checker is then skipped).  ``final_reads_required``:
    a partition with acknowledged sends but no final read makes the verdict
    unknown.  ``offsets_partitions``: the number of ``__consumer_offsets``
    partitions, when the events have no ``topic_created`` line for it."""
    try:
        h = as_history(ops)
    except (ValueError, KeyError, TypeError) as e:
        return CheckResult(unknowns=[f"malformed history: {e}"], stats={"anomalies": {}})
    ev = as_events(events)
    options = {"unclean_election": unclean_election, "final_reads_required": final_reads_required,
               "offsets_partitions": offsets_partitions}
    results = [fn(h, ev, **options) for fn, _kinds in CHECKERS.values()]
    out = CheckResult.merge(results)
    out.stats["history"] = {"lines": len(h.lines), "operations": len(h.ops),
                            "open": sum(1 for op in h.ops if op.type == "open")}
    out.stats["events"] = len(ev)
    return out
