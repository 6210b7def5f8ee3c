"""The chaos checkers, named once: each checker's name, the anomaly kinds it reports, and what it looks for.

Both implementations are keyed by these names, in this order: the Python
checkers of one run (``chaos.checkers.CHECKERS``) and the Spark checkers of
many (``analysis.checks.CHECKERS``); tests check that each covers exactly
these.  The exact rule behind each kind: docs/chaos.md, "Checkers".  Pure.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckName:
    kinds: tuple[str, ...]   # the anomaly kinds it reports
    description: str


CHECKS: dict[str, CheckName] = {
    "lost-write": CheckName(("lost-write",), "an acknowledged send that no final read of its partition has"),
    "offsets": CheckName(("inconsistent-offset", "duplicate-value"),
                         "two values at one offset, or one value at two offsets, over every observation"),
    "commit-order": CheckName(("commit-went-backwards",),
                              "a group's committed offset going down after a higher commit completed"),
    "lost-commit": CheckName(("lost-commit",), "a committed offset that a later fetch of the group does not return"),
    "fenced-generation": CheckName(("fenced-generation-commit",),
                                   "a commit of a generation the group had moved past accepted"),
    "split-coordinator": CheckName(("split-coordinator",),
                                   "a commit accepted by a broker that was not the group's coordinator"),
    "controllers": CheckName(("multiple-controllers", "zombie-controller-write"),
                             "two controllers of one epoch, or a write by a controller already replaced"),
    "unclean-election": CheckName(("unclean-election",),
                                  "a leader elected from outside the ISR (skipped when unclean elections are on)"),
    "hw": CheckName(("hw-regression",), "a partition's high watermark going down within one broker process"),
    "unseen-message": CheckName(("unseen-message",),
                                "an acknowledged send that a consuming group never returned before its final commit"),
}
KINDS: tuple[str, ...] = tuple(k for c in CHECKS.values() for k in c.kinds)
