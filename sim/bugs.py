"""The planted bugs a simulated run can switch on: the chaos runs' three (node/server/bugs.py), three
subtler ones that need a rare interleaving, and two in transactions (found with a transactional workload,
``SimOptions.transactions``).  Each is a switch in the code the broker runs
(a core's setting, or the shell's), never a copy of the rule with a twist."""
from __future__ import annotations

from node.server import bugs as real

SUBTLE = {
    "hw-ignores-lagging-isr": "the leader's HW counts only followers caught up within replica.lag.time.max.ms, so "
                              "an ISR member that fell behind (not yet shrunk away) no longer holds it back "
                              "(replication.partition, ReplicaSettings.planted_hw_ignores_lagging_isr)",
    "load-to-hw": "a new coordinator's load stops at the HW of the partition's last HW checkpoint (written every "
                  "5 s) instead of its log end, so commits acknowledged since are not loaded "
                  "(coordinator.leadership, Coordinatorship.planted_load_to_hw)",
    "elect-outside-isr": "with unclean election off, a partition whose ISR has no live member elects the first "
                         "live replica anyway, as a clean election (controller.core, "
                         "ControllerSettings.planted_elect_outside_isr)",
}
TXN = {
    "marker-before-prepare": "the transaction coordinator sends an EndTxn's markers as it appends the "
                             "PrepareCommit/PrepareAbort record, not once the record is replicated: a coordinator "
                             "failover that loses the record leaves markers written for a transaction its "
                             "successor does not know was ending (transactions.core, "
                             "TxnConfig.planted_marker_before_prepare)",
    "lso-from-hw": "a read_committed fetch reads up to the high watermark instead of the last stable offset, so "
                   "it returns records of transactions still open (sim/log.py's SimLog.last_stable_offset, "
                   "the replica manager's switch)",
}
BUGS = {**real.BUGS, **SUBTLE, **TXN}


def check(names: tuple[str, ...]) -> tuple[str, ...]:
    unknown = [n for n in names if n not in BUGS]
    if unknown:
        raise ValueError(f"unknown planted bug {unknown[0]!r} (known: {', '.join(BUGS)})")
    return tuple(names)
