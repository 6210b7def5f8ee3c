"""The checkers, named once: each checker's name, the anomaly kinds it reports, what it looks for, and its
Python implementation (one run's history and events -> a ``CheckResult``).

Everything that judges a run reads these tables: ``judge.checkers.check`` (a chaos run, a simulated run, the
shrinker's target checker) runs its Python checkers in this order, and ``analysis.checks.CHECKERS`` puts
each checker's Spark implementation, named as its Python one, in the same place for many runs at once.
The exact rule behind each kind: docs/chaos.md, "Checkers".  Pure.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from judge.check_model import CheckResult
from judge.checks_app import check_app_output, check_observed_commits
from judge.checks_cluster import check_controllers, check_hw, check_unclean_elections
from judge.checks_groups import (check_commit_order, check_fenced_generations, check_lost_commits,
                                 check_split_coordinator)
from judge.checks_log import check_lost_writes, check_offsets, check_unseen
from judge.checks_txn import check_exactly_once, check_read_committed, check_txn_offsets, check_zombies


@dataclass(frozen=True)
class Checker:
    name: str
    kinds: tuple[str, ...]            # the anomaly kinds it reports
    description: str
    check: Callable[..., CheckResult]   # (history, events, **options) -> CheckResult, callable alone


CHECKERS: dict[str, Checker] = {c.name: c for c in (
    Checker("lost-write", ("lost-write",), "an acknowledged send that no final read of its partition has",
            check_lost_writes),
    Checker("offsets", ("inconsistent-offset", "duplicate-value"),
            "two values at one offset, or one value at two offsets, over every observation", check_offsets),
    Checker("commit-order", ("commit-went-backwards",),
            "a group's committed offset going down after a higher commit completed", check_commit_order),
    Checker("lost-commit", ("lost-commit",), "a committed offset that a later fetch of the group does not return",
            check_lost_commits),
    Checker("fenced-generation", ("fenced-generation-commit",),
            "a commit of a generation the group had moved past accepted", check_fenced_generations),
    Checker("split-coordinator", ("split-coordinator",),
            "a commit accepted by a broker that was not the group's coordinator", check_split_coordinator),
    Checker("controllers", ("multiple-controllers", "zombie-controller-write"),
            "two controllers of one epoch, or a write by a controller already replaced", check_controllers),
    Checker("unclean-election", ("unclean-election",),
            "a leader elected from outside the ISR (skipped when unclean elections are on)", check_unclean_elections),
    Checker("hw", ("hw-regression",), "a partition's high watermark going down within one broker process", check_hw),
    Checker("unseen-message", ("unseen-message",),
            "an acknowledged send that a consuming group never returned before its final commit", check_unseen),
)}
KINDS: tuple[str, ...] = tuple(k for c in CHECKERS.values() for k in c.kinds)

#: The checkers of the user's own application (a chaos run's ``workload.command``, judge/checks_app.py): they
#: also read what the runner observed of the app (the ``app`` option: its group, input, output and delivery),
#: and judge nothing without it.  ``judge.checkers.check`` runs them after ``CHECKERS`` when given ``app``.
#: The Spark analysis does not run them (it judges runs of kafkasim's own workloads).
APP_CHECKERS: dict[str, Checker] = {c.name: c for c in (
    Checker("observed-commits", ("app-commit-went-backwards", "app-commit-lost"),
            "the app's committed offsets, as our OffsetFetch polling saw them, going down (across a coordinator "
            "failover: an acknowledged commit lost)", check_observed_commits),
    Checker("app-output", ("app-record-lost", "app-record-duplicated"),
            "a record the app committed past but never wrote to its output, or (exactly-once) wrote twice",
            check_app_output),
)}
APP_KINDS: tuple[str, ...] = tuple(k for c in APP_CHECKERS.values() for k in c.kinds)


@dataclass(frozen=True)
class Invariant:
    """A rule that holds at every instant of a run (judge/invariants.py), checked while a simulated run goes."""
    name: str
    kinds: tuple[str, ...]
    description: str


#: The invariants, named once.  Where an invariant reports a kind an end-of-run checker reports too
#: (``lost-write``, ``unclean-election``, ``multiple-controllers``), that checker is the one it is counted under.
INVARIANTS: dict[str, Invariant] = {i.name: i for i in (
    Invariant("one-controller-per-epoch", ("multiple-controllers",), "two brokers elected for one controller epoch"),
    Invariant("leader-in-isr", ("leader-not-in-isr", "unclean-election"),
              "a leader outside its ISR, or elected from outside the previous ISR (unclean elections off)"),
    Invariant("hw-within-isr", ("hw-above-isr-leo",),
              "a leader's high watermark above the log end of a member of its ISR"),
    Invariant("no-acknowledged-record-lost", ("lost-write",),
              "a broker became leader without a record a producer had acknowledged"),
    Invariant("one-coordinator-per-epoch", ("multiple-coordinators",),
              "two brokers loaded one offsets partition in the same leader epoch"),
)}


#: The checkers of a transactional workload (``workload.transactions``, judge/checks_txn.py): they also read
#: what the runner saw at its end (the ``txn`` option: the topics, the group, its final offsets, whether it
#: drained), and judge nothing without it.  ``judge.checkers.check`` runs them after ``CHECKERS`` when given
#: ``txn``.  The Spark analysis does not run them.
TXN_CHECKERS: dict[str, Checker] = {c.name: c for c in (
    Checker("read-committed", ("txn-read-aborted", "txn-read-uncommitted"),
            "a read_committed consumer saw a record of a transaction that did not commit, or saw one before its "
            "transaction asked to commit", check_read_committed),
    Checker("exactly-once", ("txn-duplicate-output", "txn-lost-input"),
            "an input record in the committed output twice, or (drained) not at all", check_exactly_once),
    Checker("txn-offsets", ("txn-offsets-ahead", "txn-offsets-behind"),
            "the group's committed offsets and the committed output disagree: the offsets moved without their "
            "transaction's records, or the records without their offsets", check_txn_offsets),
    Checker("zombie", ("zombie-write-committed",),
            "a pipeline fenced by a newer one with its transactional id got a transaction committed",
            check_zombies),
)}
TXN_KINDS: tuple[str, ...] = tuple(k for c in TXN_CHECKERS.values() for k in c.kinds)


def kinds_of(name: str) -> tuple[str, ...]:
    """The anomaly kinds of a checker (a transactional one too) or an invariant, by its name."""
    for table in (CHECKERS, TXN_CHECKERS, INVARIANTS):
        if name in table:
            return table[name].kinds
    raise KeyError(name)
