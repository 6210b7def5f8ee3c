"""The synthetic runs' fixed shape (``analysis.synthetic``): topics, groups, time, fault pacing, the plants, and
the small helpers every part of the generator shares."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any


# ---------------------------------------------------------------------- the workload's shape

FORMAT_VERSION = 1           # bumped when the same parameters would give other files (caches check it)

TOPIC = "events"
OFFSETS_TOPIC = "__consumer_offsets"
BROKERS = (1, 2, 3)
NPART = 3                    # partitions of TOPIC (replication factor 3)
NOFF = 10                    # __consumer_offsets partitions
NPROD = 2                    # producers: one send each per tick
PROBE_GROUP = "chaos-probe-0"
PROBE_EVERY, PROBE_PHASE = 6, 3
HB_EVERY = 20                # ticks between two heartbeats of a member
HW_EVERY = 20                # ticks between two hw_changed samples
FINAL_BATCH = 1000           # records per final read


@dataclass(frozen=True)
class GroupSpec:
    name: str
    members: int
    protocol: str
    commit_every: int
    commit_phase: int
    slot_base: int           # global index of its first member slot (process numbers)


GROUPS = (GroupSpec("g1", 3, "range", 4, 1, 0), GroupSpec("g2", 2, "cooperative-sticky", 6, 2, 3))
NSLOTS = sum(g.members for g in GROUPS)
MEMBER_PROC_BASE = 4         # producers 0..NPROD-1, the probe NPROD, members from here

# time
TICK_NS = 50_000_000
LINE_NS = 40_000             # between two history lines of a tick (at most 500 lines a tick)
SAMPLE_NS = 25_000_000       # hw_changed samples, after the tick's ops
GAP_NS = 15_000_000          # events between ticks are logged from tick_start - GAP_NS ...
GAP_STEP_NS = 20_000         # ... every 20 µs
T0 = 5_000_000_000_000       # CLOCK_MONOTONIC of tick 0
WALL0_MS = 1_795_000_000_000.0

# faults (in ticks)
FAULT_START = 40
QUIET_END = 60
DETECT = (20, 30)            # kill -> the controller notices (session timeout)
HEAL_AFTER = (5, 15)         # detection -> restart
EXPAND_AFTER = (3, 6)        # restart -> back in every ISR
FAULT_GAP = (10, 25)         # ISR expanded -> next fault
MAX_FAULTS = 400             # per run: larger runs space their faults out
FAULT_MIX = (("coordinator:g1", 3), ("coordinator:g2", 2), ("controller", 1), ("random", 1))

SINGLE_FILE_LINES = 1_000_000   # a run with more history lines is written as part files
PART_LINES = 1_000_000          # lines per part file

# ---------------------------------------------------------------------- plants

PLANT_KINDS = ("lost-write", "inconsistent-offset", "duplicate-value", "commit-went-backwards", "lost-commit",
               "fenced-generation-commit", "split-coordinator", "multiple-controllers", "zombie-controller-write",
               "unclean-election", "hw-regression", "unseen-message")
# What each plant does; every plant is designed to imply no other kind (docs/analysis.md).
PLANT_HOW = {
    "lost-write": "an acknowledged send is left out of the final read of its partition",
    "inconsistent-offset": "a member's poll also returns a stray value at an offset it had already consumed",
    "duplicate-value": "a producer's acknowledged send repeats the value of an earlier acknowledged send",
    "commit-went-backwards": "a member commits one below the offset its previous ok commit stored",
    "lost-commit": "the probe's fetch-committed returns one below the commit it just made",
    "fenced-generation-commit": "after a rebalance's syncs, a member commits again in the old generation",
    "split-coordinator": "a member's ok commit is answered by a live broker that never loaded the group",
    "multiple-controllers": "at a controller failover the losing broker also logs controller_elected",
    "zombie-controller-write": "a deposed controller epoch writes a state (zookeeper) or a broker applies a "
                               "stale request (broker), alternately",
    "unclean-election": "before a kill, the victim's partition shrinks its ISR to the victim; the election "
                        "then picks a replica outside it",
    "hw-regression": "a broker logs an hw_changed below its previous one, without decreased",
    "unseen-message": "a group's poll skips one record; the group commits past it",
}
DEFAULT_INSTANCES = 3


class SyntheticError(ValueError):
    pass


# ---------------------------------------------------------------------- small helpers

def tick_start(t: int) -> int:
    return T0 + t * TICK_NS


def gap_ns(t: int, i: int) -> int:
    """The i-th event logged between tick t-1 and tick t."""
    if i >= GAP_NS // GAP_STEP_NS - 10:
        raise SyntheticError(f"too many events between ticks {t - 1} and {t}")
    return tick_start(t) - GAP_NS + i * GAP_STEP_NS


def ts_ms(ns: int) -> float:
    return round(WALL0_MS + (ns - T0) / 1e6, 3)


_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def event_line(ns: int, broker: int, type_: str, **fields: Any) -> str:
    return _ENCODE({"ts_ms": ts_ms(ns), "mono_ns": ns, "broker": broker, "type": type_, **fields}) + "\n"


def tp(p: int) -> str:
    return f"{TOPIC}/{p}"


def assignment(g: GroupSpec, gen: int, slot: int) -> list[int]:
    """The partitions of TOPIC that member slot ``slot`` of ``g`` owns in generation ``gen``: they rotate."""
    return [p for p in range(NPART) if (p + gen) % g.members == slot]


def stable_uuid(*parts: Any) -> str:
    h = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=16).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def js(x: Any) -> str:
    return _ENCODE(x)
