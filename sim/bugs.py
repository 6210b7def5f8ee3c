"""The planted bugs a simulated run can switch on: the chaos runs' three (node/server/bugs.py) and
three subtler ones that need a rare interleaving.  Each is a switch in the code the broker runs
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
BUGS = {**real.BUGS, **SUBTLE}


def check(names: tuple[str, ...]) -> tuple[str, ...]:
    unknown = [n for n in names if n not in BUGS]
    if unknown:
        raise ValueError(f"unknown planted bug {unknown[0]!r} (known: {', '.join(BUGS)})")
    return tuple(names)
