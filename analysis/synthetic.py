"""Synthetic chaos runs of any size, with planted anomalies, for the analysis tests and benchmarks.

    python -m analysis.synthetic OUT_DIR --ops N [--runs R] [--plant KIND]... [--seed S] [--jobs J] [--check]

    from analysis.synthetic import generate
    runs = generate(out_dir, ops=5000, plant=["lost-write"], seed=3)   # -> [Path of each run directory]

Each run directory has the chaos run format (docs/chaos.md, "The run directory"):
``history.jsonl`` (a file, or for large runs a directory of ``part-NNNNN.jsonl``
files written in parallel), ``cluster/events/broker-<id>.jsonl``, a compacted
``__consumer_offsets`` segment per replica in ``cluster/data/``,
``results.json``, ``schedule.json``, and ``planted.json`` (what was planted
and the history lines and events that show it).  docs/analysis.md,
"Synthetic runs", describes the model; in short:

* The run is a sequence of **ticks** (50 ms).  Each tick has a fixed shape:
  every producer sends once, every group member polls, members commit every
  few ticks, heartbeat every second, the probe commits and reads back.  Ops
  never span ticks, and brokers' events that are not tied to an op (faults,
  elections, loads) are logged in the idle end of a tick.
* Everything a tick needs (offsets, positions, generations, who leads what)
  is a closed form of the tick number and small per-tick numpy arrays
  computed once (:class:`Plan`), so any range of ticks can be written by a
  worker process without the ones before it: that is how a 10M-op history
  is written in parallel.
* Faults are SIGKILLs of a role (``coordinator:g1``, ``controller``, ...)
  with the events a real failover leaves, simulated on a small cluster model.
* A **clean** run is judged ``valid`` with no anomaly by ``chaos.checkers``;
  each ``--plant KIND`` plants a few anomalies of exactly that kind
  (:data:`PLANT_KINDS`).
"""
from __future__ import annotations

import argparse
import bisect
import hashlib
import itertools
import json
import multiprocessing
import os
import random
import shutil
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from coordinator.hashing import partition_for

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


def _uuid(*parts: Any) -> str:
    h = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=16).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _js(x: Any) -> str:
    return _ENCODE(x)


# ---------------------------------------------------------------------- the cluster model

@dataclass
class PState:
    topic: str
    partition: int
    replicas: list[int]
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    controller_epoch: int

    def fields(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "leader": self.leader,
                "leader_epoch": self.leader_epoch, "isr": list(self.isr), "zk_version": self.zk_version,
                "controller_epoch": self.controller_epoch}


@dataclass
class Fault:
    id: int
    start: int                 # tick of the kill
    detect: int                # tick before which the controller has acted
    heal: int                  # tick of the restart
    expand: int                # tick before which the victim is back in every ISR
    target: str
    victim: int = 0
    plant: str | None = None   # "unclean-election" or "multiple-controllers"
    plant_id: str | None = None
    controller_before: int = 0
    controller_after: int = 0


class Cluster:
    """Leaders, ISRs, epochs and broker processes, moved fault by fault; logs the events it causes."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.ev = plan.events
        self.alive = {b: True for b in BROKERS}
        self.pid = 4000
        self.zxid = 8
        self.sessions = {b: "" for b in BROKERS}
        self.broker_epoch = {b: 0 for b in BROKERS}
        self.proc_start: dict[int, list[int]] = {b: [] for b in BROKERS}   # ticks from which a process runs
        self.proc_end: dict[int, list[int]] = {b: [] for b in BROKERS}
        self.controller = 0
        self.epoch = 0
        self.parts: dict[tuple[str, int], PState] = {}
        self.changes: dict[tuple[str, int], list[tuple[int, int]]] = {}   # -> [(tick, leader or -dead)]
        self.loaded_epochs: dict[int, list[tuple[int, int, int]]] = {}   # offsets p -> [(tick, broker, epoch)]
        self.patches: list[tuple[int, dict[str, Any], int, int]] = []    # coordinator_loaded to fill in
        self._gap_used: dict[int, int] = {}   # tick -> events already logged before it (ISR expansions)

    # -- events
    def log(self, ns: int, broker: int, type_: str, **fields: Any) -> dict[str, Any]:
        e = {"ns": ns, "broker": broker, "type": type_, "fields": fields}
        self.ev.append(e)
        return e

    def _clock(self, t: int, start: int = 0):
        i = [start]

        def nxt() -> int:
            ns = gap_ns(t, i[0])
            i[0] += 1
            return ns
        return nxt

    def _start_broker(self, b: int, tick: int, nxt, predecessor: str | None) -> None:
        self.pid += 1 + (b * 7) % 5
        self.zxid += 3 + b
        self.sessions[b] = f"0x1000{self.plan.seed % 65536:04x}{self.zxid:07x}"
        self.broker_epoch[b] = self.zxid
        self.log(nxt(), b, "broker_starting", host="127.0.0.1", port=20000 + b, pid=self.pid, planted_bugs=[])
        self.log(nxt(), b, "broker_registering", predecessor_session=predecessor)
        self.log(nxt(), b, "broker_registered", broker_epoch=self.zxid, session_id=self.sessions[b],
                 replaced_predecessor=None)
        self.alive[b] = True
        self.proc_start[b].append(tick)

    def _state_written(self, ns: int, s: PState, reason: str, prev_leader: int | None, prev_isr: list[int] | None,
                       controller: int | None = None, epoch: int | None = None) -> dict[str, Any]:
        return self.log(ns, self.controller if controller is None else controller, "partition_state_written",
                        topic=s.topic, partition=s.partition, reason=reason, leader=s.leader,
                        leader_epoch=s.leader_epoch, isr=list(s.isr),
                        controller_epoch=s.controller_epoch if epoch is None else epoch, zk_version=s.zk_version,
                        previous_leader=prev_leader, previous_isr=None if prev_isr is None else list(prev_isr))

    def _states_written(self, nxt, first_ns: int, count: int, controller: int | None = None,
                        epoch: int | None = None, write_ms: float = 4.0) -> dict[str, Any]:
        ns = nxt()
        return self.log(ns, self.controller if controller is None else controller, "partition_states_written",
                        epoch=self.epoch if epoch is None else epoch, count=count, write_ms=write_ms,
                        mono_ns_written=first_ns - 2_000)

    def _set_leader(self, key: tuple[str, int], tick: int, value: int) -> None:
        self.changes.setdefault(key, []).append((tick, value))

    def _load(self, nxt, tick: int, s: PState) -> None:
        """The leader of offsets partition s loads it (Kafka's loadGroupsAndOffsets)."""
        b, p = s.leader, s.partition
        self.log(nxt(), b, "coordinator_load_started", partition=p, leader_epoch=s.leader_epoch)
        groups = self.plan.groups_on.get(p, [])
        for g in groups:
            spec = self.plan.group_spec.get(g)
            if spec is None:
                continue
            gen = self.plan.generation(spec, tick - 1)
            if gen <= 0:
                continue
            members = [self.plan.member_id(spec, m, tick - 1) for m in range(spec.members)]
            self.log(nxt(), b, "group_loaded", partition=p, group=g, state="Stable", generation=gen,
                     protocol_type="consumer", protocol=spec.protocol, leader=members[gen % spec.members],
                     members=members, offsets=NPART)
        e = self.log(nxt(), b, "coordinator_loaded", partition=p, leader_epoch=s.leader_epoch, records=0,
                     replayed=0, skipped_records=0, bytes=0, end_offset=0, groups=len(groups), duration_ms=1.5)
        self.patches.append((tick, e, p, len(groups)))
        self.loaded_epochs.setdefault(p, []).append((tick, b, s.leader_epoch))

    def _apply_on_brokers(self, nxt, changed: list[tuple[PState, int, list[int]]]) -> None:
        """LeaderAndIsr: each live replica logs what the new states mean for it."""
        for s, old_leader, old_isr in changed:
            for r in s.replicas:
                if not self.alive[r]:
                    continue
                if r == s.leader and old_leader != s.leader:
                    self.log(nxt(), r, "became_leader", **s.fields(), request_controller_epoch=self.epoch)
                elif r == s.leader:
                    self.log(nxt(), r, "isr_updated", **s.fields(), request_controller_epoch=self.epoch)
                    self.log(nxt(), r, "replica_isr_changed", topic=s.topic, partition=s.partition,
                             old_isr=list(old_isr), isr=list(s.isr), zk_version=s.zk_version,
                             leader_epoch=s.leader_epoch, settled=None)
                elif old_leader != s.leader:
                    self.log(nxt(), r, "became_follower", **s.fields(), request_controller_epoch=self.epoch)

    # -- the run's beginning
    def startup(self) -> None:
        t = 0
        i = [0]

        def nxt() -> int:   # the startup takes the second before tick 0
            i[0] += 1
            return tick_start(0) - 1_500_000_000 + i[0] * 1_000_000
        self._start_broker(1, 0, nxt, None)
        self.controller, self.epoch = 1, 1
        self.log(nxt(), 1, "controller_elected", epoch=1, epoch_zk_version=1, elect_ms=13.0)
        self.log(nxt(), 1, "controller_context_loaded", controller_epoch=1, epoch=1, live_brokers=[1], topics=0,
                 partitions=0)
        self.log(nxt(), 1, "controller_failover_done", epoch=1, load_ms=12.0, decide_ms=0.1, write_ms=0.0,
                 zk_round_trips=5, partitions=0, states_from_cache=False, states_written=0, total_ms=26.0)
        for b in BROKERS[1:]:
            self._start_broker(b, 0, nxt, None)
            self.log(nxt(), 1, "broker_change", controller_epoch=1, new=[b], dead=[], bounced=[],
                     epochs={str(b): self.broker_epoch[b]})
        for topic, n in ((OFFSETS_TOPIC, NOFF), (TOPIC, NPART)):
            first = None
            created = []
            for p in range(n):
                lead = (p + 2) % 3 + 1 if topic == OFFSETS_TOPIC else p % 3 + 1
                replicas = [lead, lead % 3 + 1, (lead + 1) % 3 + 1]
                s = PState(topic, p, replicas, lead, 0, list(replicas), 0, 1)
                self.parts[(topic, p)] = s
                self._set_leader((topic, p), 0, lead)
                ns = nxt()
                first = first or ns
                self._state_written(ns, s, "new_partition", None, None)
                created.append((s, -1, []))
            self._states_written(nxt, first, n, write_ms=30.0)
            if topic == OFFSETS_TOPIC:
                self.log(nxt(), 1, "topic_created", controller_epoch=1, topic=OFFSETS_TOPIC, partitions=NOFF,
                         replication_factor=3)
            else:
                self.log(nxt(), 1, "topics_added", controller_epoch=1, topics=[TOPIC])
            self._apply_on_brokers(nxt, created)
            if topic == OFFSETS_TOPIC:
                for p in range(NOFF):
                    self._load(nxt, t, self.parts[(topic, p)])

    # -- a kill of one broker, its detection, its restart and its return to the ISRs
    def kill(self, f: Fault, rng: random.Random) -> None:
        if f.target == "controller":
            b = self.controller
        elif f.target.startswith("coordinator:"):
            b = self.parts[(OFFSETS_TOPIC, partition_for(f.target.split(":", 1)[1], NOFF))].leader
        else:
            b = rng.choice(BROKERS)
        f.victim = b
        f.controller_before = self.controller
        plant_q: PState | None = None
        if f.plant == "unclean-election":
            led = [s for s in self.parts.values() if s.leader == b]
            led.sort(key=lambda s: (s.topic != TOPIC, s.topic, s.partition))
            plant_q = led[0]
            nxt = self._clock(f.start - 2)
            old = list(plant_q.isr)
            self.log(nxt(), b, "isr_change_proposed", topic=plant_q.topic, partition=plant_q.partition,
                     new_isr=[b], kind="shrink", changed=[r for r in old if r != b],
                     leader_epoch=plant_q.leader_epoch, zk_version=plant_q.zk_version)
            plant_q.isr, plant_q.zk_version = [b], plant_q.zk_version + 1
            plant_q.controller_epoch = self.epoch
            ns = nxt()
            self._state_written(ns, plant_q, "isr_shrink", b, old)
            self._states_written(nxt, ns, 1)
            self.log(nxt(), b, "replica_isr_changed", topic=plant_q.topic, partition=plant_q.partition,
                     old_isr=old, isr=[b], zk_version=plant_q.zk_version, leader_epoch=plant_q.leader_epoch,
                     settled="shrink")
        # the kill: b's process is gone; what it led is unavailable until the controller acts
        self.alive[b] = False
        self.proc_end[b].append(f.start)
        for key, s in self.parts.items():
            if s.leader == b:
                self._set_leader(key, f.start, -b)
        # detection, before tick f.detect
        nxt = self._clock(f.detect)
        failover = b == self.controller
        if failover:
            live = [x for x in BROKERS if self.alive[x]]
            self.controller, self.epoch = live[0], self.epoch + 1
            self.log(nxt(), self.controller, "controller_elected", epoch=self.epoch, epoch_zk_version=self.epoch,
                     elect_ms=12.0)
            won = self.ev[-1]
            for x in live[1:]:
                if f.plant == "multiple-controllers":
                    e = self.log(nxt(), x, "controller_elected", epoch=self.epoch, epoch_zk_version=self.epoch,
                                 elect_ms=11.0)
                    self.plan.plant_events(f.plant_id, [won, e])
                    self.plan.plant_details(f.plant_id, epoch=self.epoch, brokers=sorted([self.controller, x]))
                    self.log(nxt(), x, "controller_resigned", epoch=self.epoch, reason="controller znode changed")
                else:
                    self.log(nxt(), x, "controller_election_lost", controller_id=self.controller, epoch=self.epoch)
        else:
            self.log(nxt(), self.controller, "broker_change", controller_epoch=self.epoch, new=[], dead=[b],
                     bounced=[], epochs={})
        f.controller_after = self.controller
        changed: list[tuple[PState, int, list[int]]] = []
        unclean: list[PState] = []
        first = None
        for key in sorted(self.parts):
            s = self.parts[key]
            if b not in s.isr and s.leader != b:
                continue
            old_leader, old_isr = s.leader, list(s.isr)
            if s.leader == b:
                cands = [r for r in s.replicas if r in s.isr and r != b and self.alive[r]]
                if cands:
                    reason, s.leader, s.isr = "offline_election", cands[0], [r for r in s.isr if r != b]
                else:
                    cands = [r for r in s.replicas if self.alive[r]]
                    reason, s.leader, s.isr = "unclean_election", cands[0], [cands[0]]
                    unclean.append(s)
                s.leader_epoch += 1
                self._set_leader(key, f.detect, s.leader)
            else:
                reason, s.isr = "isr_shrink_dead_replica", [r for r in s.isr if r != b]
            s.zk_version += 1
            s.controller_epoch = self.epoch
            ns = nxt()
            first = first or ns
            w = self._state_written(ns, s, reason, old_leader, old_isr)
            if s in unclean:
                self.plan.plant_events(f.plant_id, [w])
                self.plan.plant_details(f.plant_id, topic=s.topic, partition=s.partition, leader=s.leader,
                                        previous_isr=[b], leader_epoch=s.leader_epoch)
            changed.append((s, old_leader, old_isr))
        if first is not None:
            self._states_written(nxt, first, len(changed), write_ms=6.5)
        for s in unclean:
            e = self.log(nxt(), self.controller, "unclean_leader_election", controller_epoch=self.epoch,
                         topic=s.topic, partition=s.partition, leader=s.leader, previous_isr=[b],
                         leader_epoch=s.leader_epoch)
            self.plan.plant_events(f.plant_id, [e])
        if failover:
            live = [x for x in BROKERS if self.alive[x]]
            self.log(nxt(), self.controller, "controller_context_loaded", controller_epoch=self.epoch,
                     epoch=self.epoch, live_brokers=live, topics=2, partitions=NOFF + NPART)
            self.log(nxt(), self.controller, "controller_failover_done", epoch=self.epoch, load_ms=4.0,
                     decide_ms=0.6, write_ms=6.5, zk_round_trips=5, partitions=NOFF + NPART,
                     states_from_cache=False, states_written=len(changed), total_ms=25.0)
            moved = {id(s) for s, _l, _i in changed}
            for x in live:
                same = sum(1 for s in self.parts.values() if x in s.replicas and id(s) not in moved)
                self.log(nxt(), x, "leader_and_isr_unchanged", partitions=same, controller_epoch=self.epoch)
        self._apply_on_brokers(nxt, changed)
        for s, old_leader, _i in changed:
            if s.topic == OFFSETS_TOPIC and s.leader != old_leader:
                self._load(nxt, f.detect, s)
        # an unclean leader takes the other live replicas back at once
        for s in unclean:
            self._expand(f.detect + 2, s, [r for r in s.replicas if self.alive[r] and r not in s.isr])
        # the restart
        nxt = self._clock(f.heal + 1)
        self._start_broker(b, f.heal + 1, nxt, self.sessions[b])
        self.log(nxt(), self.controller, "broker_change", controller_epoch=self.epoch, new=[b], dead=[], bounced=[],
                 epochs={str(b): self.broker_epoch[b]})
        for key in sorted(self.parts):
            s = self.parts[key]
            if b in s.replicas:
                self.log(nxt(), b, "became_follower", **s.fields(), request_controller_epoch=self.epoch)
        # back in every ISR
        for key in sorted(self.parts):
            s = self.parts[key]
            missing = [r for r in s.replicas if r not in s.isr]
            if missing:
                self._expand(f.expand, s, missing)

    def _expand(self, tick: int, s: PState, add: list[int]) -> None:
        if not add:
            return
        nxt = self._clock(tick, start=self._gap_used.get(tick, 0))
        old = list(s.isr)
        new = old + [r for r in s.replicas if r in add]
        self.log(nxt(), s.leader, "isr_change_proposed", topic=s.topic, partition=s.partition, new_isr=new,
                 kind="expand", changed=list(add), leader_epoch=s.leader_epoch, zk_version=s.zk_version)
        s.isr, s.zk_version, s.controller_epoch = new, s.zk_version + 1, self.epoch
        ns = nxt()
        self._state_written(ns, s, "isr_expand", s.leader, old)
        self._states_written(nxt, ns, 1, write_ms=12.0)
        self.log(nxt(), s.leader, "replica_isr_changed", topic=s.topic, partition=s.partition, old_isr=old,
                 isr=list(new), zk_version=s.zk_version, leader_epoch=s.leader_epoch, settled="expand")
        self._gap_used[tick] = self._gap_used.get(tick, 0) + 4

    # -- planted control-plane anomalies at a quiet tick
    def zombie(self, t: int, side: str, i: int, plant_id: str) -> None:
        nxt = self._clock(t, start=self._gap_used.get(t, 0) + 40)
        s = self.parts[(TOPIC, i % NPART)]
        if side == "zookeeper":
            x = next(b for b in BROKERS if b != self.controller and self.alive[b])
            stale = self.epoch - 1
            s.zk_version += 1
            ns = nxt()
            w = self._state_written(ns, s, "isr_shrink", s.leader, s.isr, controller=x, epoch=stale)
            sw = self._states_written(nxt, ns, 1, controller=x, epoch=stale, write_ms=1.5)
            self.plan.plant_events(plant_id, [w, sw])
            self.plan.plant_details(plant_id, broker=x, topic=s.topic, partition=s.partition, epoch=stale,
                                    newer_epoch=self.epoch)
        else:
            e = self.log(nxt(), s.leader, "isr_updated", **s.fields(), request_controller_epoch=self.epoch - 1)
            self.plan.plant_events(plant_id, [e])
            self.plan.plant_details(plant_id, broker=s.leader, topic=s.topic, partition=s.partition,
                                    epoch=self.epoch - 1, newer_epoch=self.epoch)

    def shutdown(self, ns0: int) -> None:
        ns = ns0
        for b in BROKERS:
            if not self.alive[b]:
                continue
            for type_, fields in (("signal_received", {"signal": "SIGTERM"}),
                                  ("broker_stopping", {"controller": b == self.controller}),
                                  *((("controller_resigned", {"epoch": self.epoch, "reason": "shutdown"}),)
                                    if b == self.controller else ()),
                                  ("zk_session_closing", {"session_id": self.sessions[b]}),
                                  ("broker_stopped", {})):
                ns += 1_000_000
                self.log(ns, b, type_, **fields)


# ---------------------------------------------------------------------- the plan

class Plan:
    """Everything about one synthetic run that the writers of its parts share (computed once, in the parent)."""

    def __init__(self, name: str, ops: int, seed: int, plant: Iterable[str] = (), instances: int = DEFAULT_INSTANCES,
                 ticks: int | None = None) -> None:
        self.name, self.seed, self.target_ops = name, seed, ops
        self.plant_kinds = list(dict.fromkeys(plant))
        for k in self.plant_kinds:
            if k not in PLANT_KINDS:
                raise SyntheticError(f"unknown plant kind {k!r}; expected one of {', '.join(PLANT_KINDS)}")
        self.instances = instances
        self.group_spec = {g.name: g for g in GROUPS}
        self.gpart = {g.name: partition_for(g.name, NOFF) for g in GROUPS}
        self.probe_part = partition_for(PROBE_GROUP, NOFF)
        self.groups_on: dict[int, list[str]] = {}
        for g in GROUPS:
            self.groups_on.setdefault(self.gpart[g.name], []).append(g.name)
        self.groups_on.setdefault(self.probe_part, []).append(PROBE_GROUP)
        self.hosting = sorted(self.groups_on)
        per_tick = self._ops_per_tick()
        self.T = ticks if ticks is not None else max(120, round(ops / per_tick))
        self._ids: dict[tuple[str, int, int], str] = {}
        self.plants: list[dict[str, Any]] = []
        self._plant_by_id: dict[str, dict[str, Any]] = {}
        self.tick_plants: dict[int, list[tuple]] = {}
        self.value_override: dict[tuple[int, int], str] = {}
        self.omit_final: dict[tuple[int, int], str] = {}     # (partition, offset) -> plant id
        self.events: list[dict[str, Any]] = []
        self._build()

    @staticmethod
    def _ops_per_tick() -> float:
        polls = NSLOTS
        commits = sum(g.members / g.commit_every for g in GROUPS)
        hbs = NSLOTS / HB_EVERY
        return NPROD + polls + commits + hbs + 2 / PROBE_EVERY

    # -- groups
    def generation(self, g: GroupSpec, t: int) -> int:
        """The generation in effect after tick t (0 before the group formed)."""
        return bisect.bisect_right(self.reb[g.name], t)

    def incarnation(self, g: GroupSpec, slot: int, t: int) -> int:
        n = self.generation(g, t) - 1          # rebalances after the first, up to t
        return max(0, (n - slot + g.members - 1) // g.members)

    def member_id(self, g: GroupSpec, slot: int, t: int, inc: int | None = None) -> str:
        j = self.incarnation(g, slot, t) if inc is None else inc
        key = (g.name, slot, j)
        mid = self._ids.get(key)
        if mid is None:
            mid = self._ids[key] = f"chaos-{slot}-{_uuid(self.seed, self.name, g.name, slot, j)}"
        return mid

    def procs(self, g: GroupSpec, slot: int, inc: int) -> tuple[int, int]:
        p = MEMBER_PROC_BASE + 2 * (g.slot_base + slot + NSLOTS * inc)
        return p, p + 1

    def poll_from(self, g: GroupSpec, t: int) -> int:
        """A poll at tick t returns the sends of ticks [poll_from, t)."""
        u = t - 1
        if u in self.reb_set[g.name]:
            return 0 if u == 0 else u - 1
        return u

    # -- building
    def _build(self) -> None:
        rng = random.Random(f"synthetic/{self.seed}/{self.name}")
        T = self.T
        # faults (ticks only), then which carry plants, then the cluster model
        self.faults: list[Fault] = []
        t = FAULT_START
        extra = max(0, T // MAX_FAULTS - 60)
        weights = [w for _t, w in FAULT_MIX]
        while True:
            d = t + rng.randint(*DETECT)
            h = d + rng.randint(*HEAL_AFTER)
            x = h + 1 + rng.randint(*EXPAND_AFTER)
            if x + 5 > T - QUIET_END:
                break
            target = rng.choices([tt for tt, _w in FAULT_MIX], weights)[0]
            self.faults.append(Fault(len(self.faults), t, d, h, x, target))
            t = x + rng.randint(*FAULT_GAP) + extra
        self.blocked = [(f.start - 4, f.expand + 4) for f in self.faults]
        for kind, target in (("unclean-election", "coordinator:g1"), ("multiple-controllers", "controller")):
            if kind in self.plant_kinds:
                free = [f for f in self.faults if f.plant is None]
                for i, f in enumerate(_spread(free, self.instances)):
                    f.plant, f.target = kind, target if kind != "unclean-election" or i % 2 == 0 else "coordinator:g2"
                    f.plant_id = self._new_plant(kind, tick=f.start, fault=f.id)["id"]
        # rebalances: the first at tick 0, then every so often in a quiet stretch
        self.reb: dict[str, list[int]] = {}
        every = max(40, min(1200, T // 6))
        taken: set[int] = set()
        for gi, g in enumerate(GROUPS):
            ticks = [0]
            c = every // 2 + gi * every // 3
            while c < T - 30:
                u = c
                while u < T - 30 and (self._blocked(u) or any(abs(u - v) <= 3 for v in taken)
                                      or u - ticks[-1] < 4):
                    u += 1
                if u >= T - 30:
                    break
                ticks.append(u)
                taken.add(u)
                c = u + every
            self.reb[g.name] = ticks
        self.reb_set = {g: set(v) for g, v in self.reb.items()}
        self.reb_index = {g: {r: n for n, r in enumerate(v)} for g, v in self.reb.items()}
        # zombie writes are placed now: the cluster model plays them in time order with the faults
        self._used: set[int] = set()
        self._zombies: list[tuple[int, str, int, str]] = []
        if "zombie-controller-write" in self.plant_kinds:
            ki = self.plant_kinds.index("zombie-controller-write")
            for i in range(self.instances):
                t = self._find(int(T * (i + 1) / (self.instances + 1)) + 7 * ki - 20, lambda u: True)
                if t is None:
                    continue
                side = "zookeeper" if i % 2 == 0 else "broker"
                self._zombies.append((t, side, i, self._new_plant("zombie-controller-write", tick=t, side=side)["id"]))
        self.cluster = Cluster(self)
        self.cluster.startup()
        steps = sorted([(f.start, 0, f) for f in self.faults] + [(z[0], 1, z) for z in self._zombies],
                       key=lambda x: (x[0], x[1]))
        for _t, what, x in steps:
            if what == 0:
                self.cluster.kill(x, rng)
            else:
                self.cluster.zombie(*x)
        self._arrays()
        self._plant()
        self._lines()
        self._finish_events()

    def _blocked(self, t: int) -> bool:
        i = bisect.bisect_right(self.blocked, (t, 1 << 62)) - 1
        return i >= 0 and self.blocked[i][0] <= t <= self.blocked[i][1]

    def _arrays(self) -> None:
        T = self.T
        ch = self.cluster.changes
        self.leader_ev = np.zeros((NPART, T + 2), dtype=np.int8)
        self.coord = np.zeros((NOFF, T + 2), dtype=np.int8)
        for (topic, p), pts in ch.items():
            arr = self.leader_ev[p] if topic == TOPIC else self.coord[p]
            for i, (t0, v) in enumerate(pts):
                t1 = pts[i + 1][0] if i + 1 < len(pts) else T + 2
                arr[max(0, t0):t1] = v
        ticks = np.arange(T, dtype=np.int64)
        cnt = np.zeros((T, NPART), dtype=np.int64)
        for k in range(NPROD):
            pk = (ticks * NPROD + k) % NPART
            ok = self.leader_ev[pk, ticks] > 0
            np.add.at(cnt, (ticks[ok], pk[ok]), 1)
        self.sent_ok = cnt
        self.sent_before = np.zeros((T + 1, NPART), dtype=np.int64)
        np.cumsum(cnt, axis=0, out=self.sent_before[1:])
        # masks
        self.reb_mask = {}
        for g in GROUPS:
            m = np.zeros(T, dtype=bool)
            m[[r for r in self.reb[g.name] if r < T]] = True
            self.reb_mask[g.name] = m
        self.commit_mask = {g.name: (ticks >= 1) & (ticks % g.commit_every == g.commit_phase) & ~self.reb_mask[g.name]
                            for g in GROUPS}
        self.probe_mask = (ticks >= 1) & (ticks % PROBE_EVERY == PROBE_PHASE)
        # records appended to the offsets partitions (their HW), per tick
        rec = np.zeros((T + 2, NOFF), dtype=np.int64)
        for g in GROUPS:
            P = self.gpart[g.name]
            avail = self.coord[P, :T] > 0
            rec[:T, P] += (self.commit_mask[g.name] & avail) * NPART
            for n, r in enumerate(self.reb[g.name]):
                rec[r, P] += 1 + (NPART if n else 0)
        rec[:T, self.probe_part] += self.probe_mask & (self.coord[self.probe_part, :T] > 0)
        self.off_before = np.zeros((T + 3, NOFF), dtype=np.int64)
        np.cumsum(rec, axis=0, out=self.off_before[1:])
        probe_ok = np.nonzero(self.probe_mask & (self.coord[self.probe_part, :T] > 0))[0]
        self.probe_last = int(probe_ok[-1]) // PROBE_EVERY + 1 if len(probe_ok) else None

    def probe_value(self, t: int) -> int:
        return t // PROBE_EVERY + 1

    # -- plants
    def _new_plant(self, kind: str, **details: Any) -> dict[str, Any]:
        n = sum(1 for p in self.plants if p["kind"] == kind)
        p = {"kind": kind, "id": f"{kind}#{n}", "ops": [], "events": [], "details": details}
        self.plants.append(p)
        self._plant_by_id[p["id"]] = p
        return p

    def plant_events(self, plant_id: str | None, events: list[dict[str, Any]]) -> None:
        if plant_id is None:
            return
        self._plant_by_id[plant_id].setdefault("_events", []).extend(events)

    def plant_details(self, plant_id: str | None, **details: Any) -> None:
        if plant_id is not None:
            self._plant_by_id[plant_id]["details"].update(details)

    def quiet(self, t: int) -> bool:
        return (20 <= t < self.T - 25 and not self._blocked(t) and t not in self._used
                and not any(abs(t - r) <= 3 for g in GROUPS for r in self._near_reb(g, t)))

    def _near_reb(self, g: GroupSpec, t: int) -> list[int]:
        v = self.reb[g.name]
        i = bisect.bisect_left(v, t - 3)
        return v[i:i + 2]

    def _find(self, start: int, ok, quiet: bool = True) -> int | None:
        """The first tick from ``start`` (wrapping around) that is quiet and satisfies ``ok``; reserved."""
        lo, hi = 20, self.T - 25
        start = min(max(lo, start), hi)
        for t in list(range(start, hi)) + list(range(lo, start)):
            if (self.quiet(t) if quiet else t not in self._used) and ok(t):
                for u in range(t - 3, t + 4):
                    self._used.add(u)
                return t
        return None

    def _alive(self, b: int, t: int) -> bool:
        """Broker b runs a process from before tick t's hw sample (and was not killed at or before t)."""
        starts, ends = self.cluster.proc_start[b], self.cluster.proc_end[b]
        return any(s0 <= t < (ends[i] if i < len(ends) else self.T + 10) for i, s0 in enumerate(starts))

    def _owner(self, g: GroupSpec, t: int, p: int) -> int:
        gen = self.generation(g, t)
        return next(m for m in range(g.members) if p in assignment(g, gen, m))

    def _send_ok(self, t: int, k: int) -> bool:
        return bool(self.leader_ev[(t * NPROD + k) % NPART, t] > 0)

    def _send_offset(self, t: int, k: int) -> int:
        p = (t * NPROD + k) % NPART
        o = int(self.sent_before[t, p])
        for k2 in range(k):
            if (t * NPROD + k2) % NPART == p and self._send_ok(t, k2):
                o += 1
        return o

    def _plant(self) -> None:
        for ki, kind in enumerate(self.plant_kinds):
            if kind in ("unclean-election", "multiple-controllers", "zombie-controller-write"):
                continue
            for i in range(self.instances):
                self._plant_one(kind, i, int(self.T * (i + 1) / (self.instances + 1)) + 7 * ki - 20)

    def _plant_one(self, kind: str, i: int, start: int) -> None:
        """Place instance i of a history or HW plant, searching from tick ``start``."""
        g = GROUPS[i % len(GROUPS)]
        P = self.gpart[g.name]
        t: int | None = None
        if kind in ("lost-write", "duplicate-value"):
            def ok(u: int) -> bool:
                return self._send_ok(u, i % NPROD) and (kind != "duplicate-value"
                                                        or self._send_ok(u - 5, (i + 1) % NPROD))
            t = self._find(start, ok)
            if t is None:
                return
            k = i % NPROD
            p, o = (t * NPROD + k) % NPART, self._send_offset(t, k)
            pl = self._new_plant(kind, tick=t, producer=k, topic=TOPIC, partition=p, offset=o)
            if kind == "lost-write":
                self.omit_final[(p, o)] = pl["id"]
                pl["_sends"] = [(t, k)]
            else:
                k2 = (i + 1) % NPROD
                v = f"p{k2}-{t - 5}"
                self.value_override[(t, k)] = v
                pl["details"]["value"] = v
                pl["_sends"] = [(t - 5, k2), (t, k)]
                self._used.update(range(t - 8, t - 1))
        elif kind in ("inconsistent-offset", "unseen-message"):
            def ok(u: int) -> bool:
                if u in self.reb_set[g.name] or self.poll_from(g, u) != u - 1:
                    return False
                if kind == "unseen-message":
                    return self._send_ok(u - 1, 0)
                return int(self.sent_before[u - 1, i % NPART]) >= 2
            t = self._find(start, ok)
            if t is None:
                return
            if kind == "unseen-message":
                p, o = (t - 1) * NPROD % NPART, self._send_offset(t - 1, 0)
                pl = self._new_plant(kind, tick=t, group=g.name, topic=TOPIC, partition=p, offset=o)
                pl["_sends"] = [(t - 1, 0)]
                self.tick_plants.setdefault(t, []).append(("unseen", g.name, p, o, pl["id"]))
            else:
                p = i % NPART
                o = int(self.sent_before[t - 1, p]) - 1
                su, sk = self._find_send(p, o, t - 1)
                bogus = f"stray-{self.seed}-{i}"
                pl = self._new_plant(kind, tick=t, group=g.name, topic=TOPIC, partition=p, offset=o,
                                     value=bogus)
                pl["_sends"] = [(su, sk)]
                self.tick_plants.setdefault(t, []).append(("stray", g.name, p, o, bogus, pl["id"]))
        elif kind in ("commit-went-backwards", "split-coordinator"):
            C = g.commit_every

            def ok(u: int) -> bool:
                if not self.commit_mask[g.name][u] or self.coord[P, u] <= 0:
                    return False
                if kind == "split-coordinator":
                    return True
                prev = u - C
                return (self.commit_mask[g.name][prev] and self.coord[P, prev] > 0
                        and self.generation(g, prev) == self.generation(g, u)
                        and int(self.sent_before[prev, i % NPART]) >= 1)
            t = self._find(start, ok)
            if t is None:
                return
            p = i % NPART
            slot = self._owner(g, t, p)
            if kind == "split-coordinator":
                node = next(b for b in BROKERS if b != int(self.coord[P, t]))
                pl = self._new_plant(kind, tick=t, group=g.name, broker=node, partition=P)
                self.tick_plants.setdefault(t, []).append(("split", g.name, slot, node, pl["id"]))
            else:
                bad = int(self.sent_before[t - C, p]) - 1
                pl = self._new_plant(kind, tick=t, group=g.name, topic=TOPIC, partition=p, offset=bad,
                                     previous=int(self.sent_before[t - C, p]))
                self.tick_plants.setdefault(t, []).append(("backwards", g.name, slot, p, bad, pl["id"]))
        elif kind == "lost-commit":
            t = self._find(start, lambda u: bool(self.probe_mask[u]) and self.coord[self.probe_part, u] > 0
                           and self.probe_value(u) >= 2)
            if t is None:
                return
            pl = self._new_plant(kind, tick=t, group=PROBE_GROUP, topic=TOPIC, partition=0,
                                 offset=self.probe_value(t), fetched=self.probe_value(t) - 1)
            self.tick_plants.setdefault(t, []).append(("lostcommit", pl["id"]))
        elif kind == "fenced-generation-commit":
            rebs = [r for r in self.reb[g.name][1:] if r not in self._used]
            if not rebs:
                return
            r = rebs[min(len(rebs) - 1, (i // len(GROUPS)) * max(1, len(rebs) // self.instances))]
            for u in range(r - 3, r + 4):
                self._used.add(u)
            n = self.reb_index[g.name][r]
            slot = n % g.members            # not the churned one, (n - 1) % members
            pl = self._new_plant(kind, tick=r, group=g.name, generation=n, synced=n + 1)
            self.tick_plants.setdefault(r, []).append(("fenced", g.name, slot, pl["id"]))
        elif kind == "hw-regression":
            # any sample tick will do, faults or not: it needs only a live broker
            p = i % NPART
            b0 = BROKERS[i % len(BROKERS)]

            def live(u: int) -> list[int]:
                return [b for b in BROKERS[b0 - 1:] + BROKERS[:b0 - 1] if self._alive(b, u)]
            t = self._find(start, lambda u: u % HW_EVERY == 0 and bool(live(u))
                           and int(self.sent_before[u - HW_EVERY, p]) >= 3, quiet=False)
            if t is None:
                return
            b = live(t)[0]
            pl = self._new_plant(kind, tick=t, broker=b, topic=TOPIC, partition=p)
            self.tick_plants.setdefault(t, []).append(("hw", b, p, pl["id"]))


    def _find_send(self, p: int, o: int, before: int) -> tuple[int, int]:
        """The (tick, producer) whose ok send got partition p's offset o, searching back from tick ``before``."""
        u = before
        while u >= 0 and int(self.sent_before[u, p]) > o:
            u -= 1
        for k in range(NPROD):
            if (u * NPROD + k) % NPART == p and self._send_ok(u, k) and self._send_offset(u, k) == o:
                return u, k
        raise SyntheticError(f"no send at {p}/{o}")

    def _lines(self) -> None:
        T = self.T
        ticks = np.arange(T, dtype=np.int64)
        lines = np.full(T, 2 * NPROD, dtype=np.int64)
        for g in GROUPS:
            notreb = ~self.reb_mask[g.name] & (ticks >= 1)
            lines += notreb * (2 * g.members)
            lines += self.commit_mask[g.name] * (2 * g.members)
            for m in range(g.members):
                lines += ((ticks % HB_EVERY) == self.hb_phase(g, m)) * notreb * 2
            for n, r in enumerate(self.reb[g.name]):
                lines[r] += 8 * g.members + (4 if n else 0)
        lines += self.probe_mask * 4
        self.nem: dict[int, list[tuple[Fault, str]]] = {}
        for f in self.faults:
            self.nem.setdefault(f.start, []).append((f, "start"))
            self.nem.setdefault(f.heal, []).append((f, "heal"))
        for t, v in self.nem.items():
            lines[t] += len(v)
        for t, specs in self.tick_plants.items():
            lines[t] += 2 * sum(1 for s in specs if s[0] == "fenced")
        if int(lines.max()) * LINE_NS >= SAMPLE_NS:
            raise SyntheticError("a tick has too many lines")
        self.lines = lines
        self.lines_before = np.zeros(T + 1, dtype=np.int64)
        np.cumsum(lines, out=self.lines_before[1:])
        self.nem_count = np.zeros(T + 1, dtype=np.int64)
        for t, v in self.nem.items():
            self.nem_count[t] = len(v)
        # the planted commits cited by index need the line layout: resolved by the writers
        self.total_lines_est = int(self.lines_before[T])

    @staticmethod
    def hb_phase(g: GroupSpec, slot: int) -> int:
        return (5 * (g.slot_base + slot) + 3) % HB_EVERY

    def send_index(self, t: int, k: int) -> int:
        """History index of the completion of producer k's send in tick t."""
        return int(self.lines_before[t]) + int(self.nem_count[t]) + NPROD + k

    def _finish_events(self) -> None:
        for pl in self.plants:
            pl["ops"] += [self.send_index(t, k) for t, k in pl.pop("_sends", [])]
        for tick, e, p, _n in self.cluster.patches:
            hw = int(self.off_before[min(tick, self.T), p])
            e["fields"].update(records=hw, replayed=min(hw, 1 + NPART * len(self.groups_on.get(p, []))),
                               bytes=hw * 120, end_offset=hw)
        # the writers need each broker's processes: [start tick, end tick)
        self.alive_spans: dict[int, list[tuple[int, int]]] = {}
        for b in BROKERS:
            starts, ends = self.cluster.proc_start[b], self.cluster.proc_end[b]
            self.alive_spans[b] = [(s, ends[i] if i < len(ends) else self.T + 10) for i, s in enumerate(starts)]
        for p in self.plants:
            for e in p.pop("_events", []):
                p["events"].append({"broker": e["broker"], "type": e["type"], "mono_ns": e["ns"]})
        self.ev_lines = sorted((e["ns"], e["broker"], event_line(e["ns"], e["broker"], e["type"], **e["fields"]))
                               for e in self.events)
        self.ev_ns = [x[0] for x in self.ev_lines]

    def controller_at_end(self) -> int:
        return self.cluster.controller

    # -- chunks
    def chunks(self, part_lines: int) -> list[tuple[int, int]]:
        T = self.T
        if self.total_lines_est <= part_lines:
            return [(0, T)]
        n = max(1, round(self.total_lines_est / part_lines))
        cuts = [int(np.searchsorted(self.lines_before, self.total_lines_est * i // n)) for i in range(1, n)]
        bounds = [0, *cuts, T]
        bounds = sorted(set(bounds))
        return list(itertools.pairwise(bounds))

    def events_between(self, ns0: int, ns1: int) -> list[tuple[int, int, str]]:
        return self.ev_lines[bisect.bisect_left(self.ev_ns, ns0):bisect.bisect_left(self.ev_ns, ns1)]


def _spread(items: list, n: int) -> list:
    if n <= 0 or not items:
        return []
    if len(items) <= n:
        return list(items)
    step = len(items) / n
    return [items[int(step * i + step / 2)] for i in range(n)]


# ---------------------------------------------------------------------- writing ticks

class _Out:
    """A writer's output: history lines, events per broker, counts, and what it learnt about plants."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.events: list[tuple[int, int, str]] = []
        self.counts: dict[str, int] = {}
        self.plants: dict[str, dict[str, list]] = {}

    def count(self, key: str, n: int = 1) -> None:
        if n:
            self.counts[key] = self.counts.get(key, 0) + n

    def cite(self, pid: str, *indexes: int) -> None:
        self.plants.setdefault(pid, {"ops": [], "events": []})["ops"].extend(indexes)

    def cite_event(self, pid: str, ns: int, broker: int, type_: str) -> None:
        self.plants.setdefault(pid, {"ops": [], "events": []})["events"].append(
            {"broker": broker, "type": type_, "mono_ns": ns})


_PLAN: Plan | None = None


def _hist(idx: int, typ: str, proc: Any, tm: int, f: str, val: str, err: str = "null", node: Any = "null",
          grp: str = "null", fin: str = "") -> str:
    return (f'{{"index":{idx},"type":"{typ}","process":{proc},"time":{tm},"f":"{f}","value":{val},'
            f'"error":{err},"node":{node},"group":{grp}{fin}}}\n')


def _hw_line(ns: int, b: int, topic: str, p: int, old: int, new: int, reason: str) -> str:
    return (f'{{"ts_ms":{ts_ms(ns)},"mono_ns":{ns},"broker":{b},"type":"hw_changed","topic":"{topic}",'
            f'"partition":{p},"old":{old},"new":{new},"reason":"{reason}","decreased":false}}\n')


class _Slot:
    """One member of a group in one generation, with its history line fragments."""
    __slots__ = (
        "commit_head",
        "commit_tail",
        "hb_fail",
        "hb_inv",
        "hb_ok",
        "hp",
        "id",
        "m",
        "parts",
        "poll_inv",
        "poll_ok_head",
        "poll_ok_tail",
        "pp",
    )

    def __init__(self, g: GroupSpec, m: int, mid: str, pp: int, hp: int, gen: int) -> None:
        self.m, self.id, self.pp, self.hp = m, mid, pp, hp
        self.parts = assignment(g, gen, m)
        grp = f'"group":"{g.name}"}}\n'
        self.poll_inv = f',"f":"poll","value":{{"member":"{mid}","generation":{gen}}},"error":null,"node":null,{grp}'
        self.poll_ok_head = f',"f":"poll","value":{{"member":"{mid}","generation":{gen},"records":['
        self.poll_ok_tail = f']}},"error":null,"node":null,{grp}'
        self.commit_head = f',"f":"commit","value":{{"member":"{mid}","generation":{gen},"offsets":{{'
        self.commit_tail = grp
        hb = f',"f":"heartbeat","value":{{"member":"{mid}","generation":{gen}}},"error":'
        self.hb_inv = f'{hb}null,"node":null,{grp}'
        self.hb_ok = f'{hb}null,"node":'
        self.hb_fail = f'{hb}"NOT_COORDINATOR","node":'


def _slots(plan: Plan, g: GroupSpec, t: int) -> tuple[int, list[_Slot]]:
    gen = plan.generation(g, t)
    out = []
    for m in range(g.members):
        inc = plan.incarnation(g, m, t)
        pp, hp = plan.procs(g, m, inc)
        out.append(_Slot(g, m, plan.member_id(g, m, t, inc), pp, hp, gen))
    return gen, out


def write_ticks(plan: Plan, t0: int, t1: int, hist_path: Path, ev_dir: Path, tag: str) -> dict[str, Any]:
    """Write ticks [t0, t1) of the plan: history lines to ``hist_path``, events to ``ev_dir/broker-<b>.<tag>``.

    The hot loop: every line is one f-string of precomputed fragments."""
    out = _Out()
    base = max(0, t0 - 3)
    hi = min(plan.T + 1, t1 + 1)
    sb = [plan.sent_before[base:hi, p].tolist() for p in range(NPART)]
    lev = [plan.leader_ev[p, base:hi].tolist() for p in range(NPART)]
    coord = {P: plan.coord[P, base:hi].tolist() for P in plan.hosting}
    offb = {P: plan.off_before[base:hi + 1, P].tolist() for P in plan.hosting}
    override = plan.value_override
    idx = int(plan.lines_before[t0])
    lines = out.lines
    ap = lines.append
    ev = out.events
    P_probe = plan.probe_part
    probe_coord = coord[P_probe]
    nem_get = plan.nem.get
    plants_get = plan.tick_plants.get
    planned = plan.lines[t0:t1].tolist()
    rebsets = [plan.reb_set[g.name] for g in GROUPS]
    gcoord = [coord[plan.gpart[g.name]] for g in GROUPS]
    hb_at = [{plan.hb_phase(g, m): m for m in range(g.members)} for g in GROUPS]
    keyq = [f'"{TOPIC}/{p}":' for p in range(NPART)]
    send_inv = [f',"f":"send","value":{{"topic":"{TOPIC}","value":"' for _k in range(NPROD)]
    probe_tail = f'"group":"{PROBE_GROUP}"}}\n'
    n_send_ok = n_send_fail = n_send_info = n_poll = n_commit_ok = n_commit_fail = n_hb_ok = n_hb_fail = 0
    n_probe_ok = n_probe_fail = 0
    spans = plan.alive_spans

    def sends_of(u: int) -> list[tuple[int, int, int, str, int]]:
        """(k, p, offset or -1, value, leader or -dead) of tick u's sends."""
        res = []
        local = {}
        for k in range(NPROD):
            p = (u * NPROD + k) % NPART
            L = lev[p][u - base]
            v = override.get((u, k)) or f"p{k}-{u}"
            if L > 0:
                o = local.get(p, sb[p][u - base])
                local[p] = o + 1
                res.append((k, p, o, v, L))
            else:
                res.append((k, p, -1, v, L))
        return res

    rec_cache: dict[int, list[str]] = {}

    def recs_of(u: int) -> list[str]:
        """Tick u's ok sends as poll records, joined per partition."""
        r = rec_cache.get(u)
        if r is None:
            per: list[list[str]] = [[] for _ in range(NPART)]
            for _k, p, o, v, _L in sends_of(u):
                if o >= 0:
                    per[p].append(f'["{TOPIC}",{p},{o},"{v}"]')
            r = rec_cache[u] = [",".join(x) for x in per]
        return r

    gstate = [_slots(plan, g, t0 - 1) for g in GROUPS]
    for t in range(t0, t1):
        ts0 = tick_start(t)
        tm = ts0
        first_idx = idx
        nem = nem_get(t)
        first_window = False
        if nem:
            for f, phase in nem:
                val = _js({"fault": f.id, "phase": phase, "kind": "kill", "target": f.target, "nodes": [f.victim]})
                ap(_hist(idx, "info", '"nemesis"', tm, "kill" if phase == "start" else "heal", val))
                idx += 1
                tm += LINE_NS
                out.count("kill:info" if phase == "start" else "heal:info")
                first_window = first_window or phase == "start"
        # sends
        sends = sends_of(t)
        for k, p, o, v, L in sends:
            ap(f'{{"index":{idx},"type":"invoke","process":{k},"time":{tm}{send_inv[k]}{v}"}},"error":null,'
               f'"node":null,"group":null}}\n')
            idx += 1
            tm += LINE_NS
        per: list[list[str]] = [[] for _ in range(NPART)]
        for k, p, o, v, L in sends:
            if o >= 0:
                ap(f'{{"index":{idx},"type":"ok","process":{k},"time":{tm},"f":"send","value":{{"topic":"{TOPIC}",'
                   f'"partition":{p},"offset":{o},"value":"{v}"}},"error":null,"node":{L},"group":null}}\n')
                per[p].append(f'["{TOPIC}",{p},{o},"{v}"]')
                n_send_ok += 1
            else:
                if first_window:
                    typ, err = "info", '"REQUEST_TIMED_OUT"'
                    n_send_info += 1
                else:
                    typ, err = "fail", '"UNAVAILABLE"'
                    n_send_fail += 1
                ap(f'{{"index":{idx},"type":"{typ}","process":{k},"time":{tm},"f":"send","value":{{"topic":"{TOPIC}",'
                   f'"partition":{p},"value":"{v}"}},"error":{err},"node":{-L},"group":null}}\n')
            idx += 1
            tm += LINE_NS
        rec_cache[t] = [",".join(x) for x in per]
        specs = plants_get(t) or ()
        row = None
        # groups
        for gi, g in enumerate(GROUPS):
            C = gcoord[gi][t - base]
            if t in rebsets[gi]:
                j = (tm - ts0) // LINE_NS
                idx, j = _rebalance(plan, out, g, t, idx, j, ts0, C, sb, base, specs)
                tm = ts0 + j * LINE_NS
                gstate[gi] = _slots(plan, g, t)
                continue
            if t == 0:
                continue
            _gen, slots = gstate[gi]
            for s in slots:
                ap(f'{{"index":{idx},"type":"invoke","process":{s.pp},"time":{tm}{s.poll_inv}')
                idx += 1
                tm += LINE_NS
            if t - 1 in rebsets[gi]:
                frm = plan.poll_from(g, t)
                prev = [",".join(x for x in (recs_of(u)[p] for u in range(frm, t)) if x) for p in range(NPART)]
            else:
                prev = recs_of(t - 1)
            if specs:
                prev = _plant_polls(plan, out, g, t, specs, prev, recs_of, idx, slots)
            for s in slots:
                parts = s.parts
                if len(parts) == 1:
                    r = prev[parts[0]]
                else:
                    r = ",".join(x for x in (prev[p] for p in parts) if x)
                ap(f'{{"index":{idx},"type":"ok","process":{s.pp},"time":{tm}{s.poll_ok_head}{r}{s.poll_ok_tail}')
                idx += 1
                tm += LINE_NS
            n_poll += len(slots)
            if t % g.commit_every == g.commit_phase:
                if row is None:
                    row = [sb[p][t - base] for p in range(NPART)]
                bodies = []
                for s in slots:
                    offs = {p: row[p] for p in s.parts}
                    node = C
                    pid = None
                    if specs:
                        for sp in specs:
                            if sp[0] == "backwards" and sp[1] == g.name and sp[2] == s.m:
                                offs[sp[3]] = sp[4]
                                pid = sp[5]
                            elif sp[0] == "split" and sp[1] == g.name and sp[2] == s.m:
                                node, pid = sp[3], sp[4]
                    body = s.commit_head + ",".join(f"{keyq[p]}{o}" for p, o in offs.items()) + '}},"error":'
                    bodies.append((s, body, node, pid))
                    ap(f'{{"index":{idx},"type":"invoke","process":{s.pp},"time":{tm}{body}null,"node":null,'
                       f'{s.commit_tail}')
                    if pid:
                        out.cite(pid, idx)
                    idx += 1
                    tm += LINE_NS
                for s, body, node, pid in bodies:
                    if C > 0:
                        ap(f'{{"index":{idx},"type":"ok","process":{s.pp},"time":{tm}{body}null,"node":{node},'
                           f'{s.commit_tail}')
                        n_commit_ok += 1
                    else:
                        ap(f'{{"index":{idx},"type":"fail","process":{s.pp},"time":{tm}{body}"NOT_COORDINATOR",'
                           f'"node":{-C % 3 + 1},{s.commit_tail}')
                        n_commit_fail += 1
                    if pid:
                        out.cite(pid, idx)
                    idx += 1
                    tm += LINE_NS
            m = hb_at[gi].get(t % HB_EVERY)
            if m is not None:
                s = slots[m]
                ap(f'{{"index":{idx},"type":"invoke","process":{s.hp},"time":{tm}{s.hb_inv}')
                idx += 1
                tm += LINE_NS
                if C > 0:
                    ap(f'{{"index":{idx},"type":"ok","process":{s.hp},"time":{tm}{s.hb_ok}{C},{s.commit_tail}')
                    n_hb_ok += 1
                else:
                    ap(f'{{"index":{idx},"type":"fail","process":{s.hp},"time":{tm}{s.hb_fail}{-C % 3 + 1},'
                       f'{s.commit_tail}')
                    n_hb_fail += 1
                idx += 1
                tm += LINE_NS
        # the probe: a commit outside any generation, read back at once
        if t % PROBE_EVERY == PROBE_PHASE and t >= 1:
            C = probe_coord[t - base]
            n = plan.probe_value(t)
            body = f',"f":"commit","value":{{"member":"","generation":-1,"offsets":{{"{TOPIC}/0":{n}}}}},"error":'
            lc = next((s[1] for s in specs if s[0] == "lostcommit"), None) if specs else None
            ap(f'{{"index":{idx},"type":"invoke","process":{NPROD},"time":{tm}{body}null,"node":null,{probe_tail}')
            if C > 0:
                ap(f'{{"index":{idx + 1},"type":"ok","process":{NPROD},"time":{tm + LINE_NS}{body}null,"node":{C},'
                   f'{probe_tail}')
                ap(f'{{"index":{idx + 2},"type":"invoke","process":{NPROD},"time":{tm + 2 * LINE_NS},'
                   f'"f":"fetch-committed","value":{{}},"error":null,"node":null,{probe_tail}')
                ap(f'{{"index":{idx + 3},"type":"ok","process":{NPROD},"time":{tm + 3 * LINE_NS},'
                   f'"f":"fetch-committed","value":{{"offsets":{{"{TOPIC}/0":{n - 1 if lc else n}}}}},"error":null,'
                   f'"node":{C},{probe_tail}')
                n_probe_ok += 1
                if lc:
                    out.cite(lc, idx + 1, idx + 2, idx + 3)
                if n == 1:
                    ns = tm + LINE_NS + 1000
                    ev.append((ns, C, event_line(ns, C, "group_created", partition=P_probe, group=PROBE_GROUP,
                                                 reason="commit")))
            else:
                alt = -C % 3 + 1
                ap(f'{{"index":{idx + 1},"type":"fail","process":{NPROD},"time":{tm + LINE_NS}{body}'
                   f'"NOT_COORDINATOR","node":{alt},{probe_tail}')
                ap(f'{{"index":{idx + 2},"type":"invoke","process":{NPROD},"time":{tm + 2 * LINE_NS},'
                   f'"f":"fetch-committed","value":{{}},"error":null,"node":null,{probe_tail}')
                ap(f'{{"index":{idx + 3},"type":"fail","process":{NPROD},"time":{tm + 3 * LINE_NS},'
                   f'"f":"fetch-committed","value":{{}},"error":"NOT_COORDINATOR","node":{alt},{probe_tail}')
                n_probe_fail += 1
            idx += 4
            tm += 4 * LINE_NS
        if idx - first_idx != planned[t - t0]:
            raise SyntheticError(f"tick {t}: wrote {idx - first_idx} lines, planned {planned[t - t0]}")
        if t % HW_EVERY == 0:
            _hw_samples(plan, out, t, base, sb, lev, coord, offb, spans, specs)
        if len(lines) > 50000:
            _flush(out, hist_path)
        rec_cache.pop(t - 3, None)
    if idx != int(plan.lines_before[t1]):
        raise SyntheticError(f"ticks {t0}..{t1}: ended at index {idx}, planned {int(plan.lines_before[t1])}")
    _flush(out, hist_path)
    for key, n in (("send:ok", n_send_ok), ("send:fail", n_send_fail), ("send:info", n_send_info),
                   ("poll:ok", n_poll), ("commit:ok", n_commit_ok + n_probe_ok),
                   ("commit:fail", n_commit_fail + n_probe_fail),
                   ("fetch-committed:ok", n_probe_ok), ("fetch-committed:fail", n_probe_fail),
                   ("heartbeat:ok", n_hb_ok), ("heartbeat:fail", n_hb_fail)):
        out.count(key, n)
    ev.extend(plan.events_between(tick_start(t0) if t0 else 0, tick_start(t1)))
    _write_events(out.events, ev_dir, tag)
    return {"counts": out.counts, "plants": out.plants, "lines": idx - int(plan.lines_before[t0])}


def _plant_polls(plan: Plan, out: _Out, g: GroupSpec, t: int, specs, prev: list[str], recs_of, idx: int,
                 slots: list[_Slot]) -> list[str]:
    """The records of g's polls at tick t with the plants of that tick applied (a stray record, a skipped one)."""
    prev = list(prev)
    for sp in specs:
        if sp[1] != g.name:
            continue
        if sp[0] == "unseen":
            _, _, p, o, _pid = sp
            recs = [r for r in _split_records(prev[p]) if int(r.split(",")[2]) != o]
            prev[p] = ",".join(recs)
        elif sp[0] == "stray":
            _, _, p, o, bogus, pid = sp
            prev[p] = ",".join(x for x in (f'["{TOPIC}",{p},{o},"{bogus}"]', prev[p]) if x)
            owner = next(i for i, s in enumerate(slots) if p in s.parts)
            out.cite(pid, idx + owner)
    return prev


def _split_records(joined: str) -> list[str]:
    if not joined:
        return []
    return ["[" + x.strip("[]") + "]" for x in joined.split("],[")]


def _hw_samples(plan: Plan, out: _Out, t: int, base: int, sb, lev, coord, offb, spans, specs) -> None:
    """Every HW_EVERY ticks, each live broker logs hw_changed for the partitions whose HW moved."""
    ev = out.events
    ns = tick_start(t) + SAMPLE_NS
    hwp = [s for s in specs if s[0] == "hw"]
    prev = t - HW_EVERY
    for b in BROKERS:
        if not any(s0 <= t < s1 for s0, s1 in spans[b]):
            continue
        for p in range(NPART):
            new = sb[p][t + 1 - base]
            old = int(plan.sent_before[prev + 1, p]) if prev >= 0 else 0
            forced = [s for s in hwp if s[1] == b and s[2] == p]
            if new != old or forced:
                ns += 10_000
                role = "leader" if lev[p][t - base] == b else "follower"
                ev.append((ns, b, _hw_line(ns, b, TOPIC, p, old, new, role)))
            for s in forced:
                ns += 10_000
                ev.append((ns, b, _hw_line(ns, b, TOPIC, p, new, new - 3, "leader")))
                out.cite_event(s[3], ns, b, "hw_changed")
        for P in plan.hosting:
            new = offb[P][t + 1 - base]
            old = int(plan.off_before[prev + 1, P]) if prev >= 0 else 0
            if new != old:
                ns += 10_000
                ev.append((ns, b, _hw_line(ns, b, OFFSETS_TOPIC, P, old, new,
                                           "leader" if coord[P][t - base] == b else "follower")))


def _flush(out: _Out, path: Path) -> None:
    if out.lines:
        with open(path, "a", encoding="utf-8") as f:
            f.write("".join(out.lines))
        out.lines.clear()


def _write_events(events: list[tuple[int, int, str]], ev_dir: Path, tag: str) -> None:
    events.sort(key=lambda e: (e[0], e[1]))
    by: dict[int, list[str]] = {b: [] for b in BROKERS}
    for _ns, b, line in events:
        by[b].append(line)
    for b, ls in by.items():
        with open(ev_dir / f"broker-{b}.{tag}", "w", encoding="utf-8") as f:
            f.write("".join(ls))


def _rebalance(plan: Plan, out: _Out, g: GroupSpec, r: int, idx: int, j: int, ts0: int, C: int,
               sb: list[list[int]], base: int, specs) -> tuple[int, int]:
    """A rebalance of g at tick r: the members commit, one leaves and is replaced, all join, sync and fetch."""
    lines, ev = out.lines, out.events
    gn, M = g.name, g.members
    gq = f'"{gn}"'
    P = plan.gpart[gn]
    n = plan.reb_index[gn][r]
    old_gen, new_gen = n, n + 1
    if C <= 0:
        raise SyntheticError(f"rebalance of {gn} at tick {r} while its coordinator is down")
    ecount = [0]

    def E(type_: str, **fields: Any) -> None:
        ns = ts0 + j * LINE_NS + 1000 + ecount[0]
        ecount[0] += 1
        ev.append((ns, C, event_line(ns, C, type_, partition=P, group=gn, **fields)))

    def H(typ: str, proc: int, f: str, val: str, err: str = "null", node: Any = "null") -> int:
        nonlocal idx, j
        lines.append(_hist(idx, typ, proc, ts0 + j * LINE_NS, f, val, err, node, gq))
        if typ != "invoke":
            out.counts[f"{f}:{typ}"] = out.counts.get(f"{f}:{typ}", 0) + 1
        idx += 1
        j += 1
        return idx - 1

    old = []
    for m in range(M):
        inc = plan.incarnation(g, m, r - 1) if n else -1
        old.append((inc, plan.member_id(g, m, r - 1, inc) if n else None, plan.procs(g, m, inc)[0] if n else None))
    churn = (n - 1) % M if n else None
    new = []
    for m in range(M):
        inc = plan.incarnation(g, m, r)
        new.append((inc, plan.member_id(g, m, r, inc), plan.procs(g, m, inc)[0]))
    pos = {p: sb[p][r - 1 - base] for p in range(NPART)} if n else {}
    if n:
        vals = []
        for m in range(M):
            offs = ",".join(f'"{TOPIC}/{p}":{pos[p]}' for p in assignment(g, old_gen, m))
            v = f'{{"member":"{old[m][1]}","generation":{old_gen},"offsets":{{{offs}}}}}'
            vals.append(v)
            H("invoke", old[m][2], "commit", v)
        for m in range(M):
            H("ok", old[m][2], "commit", vals[m], node=C)
        lv = f'{{"member":"{old[churn][1]}"}}'
        H("invoke", old[churn][2], "leave", lv)
        E("member_removed", member_id=old[churn][1], group_instance_id=None, reason="left", replaced_by=None)
        E("group_state_changed", **{"from": "Stable", "to": "PreparingRebalance", "generation": old_gen,
                                    "reason": f"removing member {old[churn][1]} on LeaveGroup"})
        H("ok", old[churn][2], "leave", lv)
        fresh = [churn]
    else:
        E("group_created", reason="join")
        fresh = list(range(M))
    for m in fresh:
        H("invoke", new[m][2], "join", '{"member":""}')
    for m in fresh:
        E("pending_member_added", member_id=new[m][1])
        H("fail", new[m][2], "join", f'{{"member":"{new[m][1]}","generation":-1,"leader":false,"protocol":""}}',
          '"MEMBER_ID_REQUIRED"', C)
    for m in range(M):
        H("invoke", new[m][2], "join", f'{{"member":"{new[m][1]}"}}')
    for m in fresh:
        E("member_added", member_id=new[m][1], group_instance_id=None, reason="join")
        if not n and m == 0:
            E("group_state_changed", **{"from": "Empty", "to": "PreparingRebalance", "generation": 0,
                                        "reason": f"adding new member {new[m][1]}"})
    members = [new[m][1] for m in range(M)]
    leader = new_gen % M
    E("group_state_changed", **{"from": "PreparingRebalance", "to": "CompletingRebalance", "generation": new_gen,
                                "reason": None})
    E("group_generation", generation=new_gen, protocol_type="consumer", protocol=g.protocol, leader=members[leader],
      members=members)
    for m in range(M):
        H("ok", new[m][2], "join", f'{{"member":"{new[m][1]}","generation":{new_gen},'
                                   f'"leader":{"true" if m == leader else "false"},"protocol":"{g.protocol}"}}', node=C)
    for m in range(M):
        H("invoke", new[m][2], "sync", f'{{"member":"{new[m][1]}","generation":{new_gen}}}')
    E("group_stored", generation=new_gen, members=members, reason="sync", error=0)
    E("group_state_changed", **{"from": "CompletingRebalance", "to": "Stable", "generation": new_gen,
                                "reason": None})
    first_sync = None
    for m in range(M):
        a = ",".join(f'"{tp(p)}"' for p in assignment(g, new_gen, m))
        i = H("ok", new[m][2], "sync", f'{{"member":"{new[m][1]}","generation":{new_gen},"assignment":[{a}]}}', node=C)
        first_sync = i if first_sync is None else first_sync
    fv = []
    for m in range(M):
        parts = assignment(g, new_gen, m)
        lst = ",".join(f'"{tp(p)}"' for p in parts)
        offs = ",".join(f'"{tp(p)}":{pos[p] if n else -1}' for p in parts)
        fv.append((lst, offs))
        H("invoke", new[m][2], "fetch-committed", f'{{"partitions":[{lst}]}}')
    for m in range(M):
        H("ok", new[m][2], "fetch-committed", f'{{"partitions":[{fv[m][0]}],"offsets":{{{fv[m][1]}}}}}', node=C)
    for sp in specs:
        if sp[0] == "fenced" and sp[1] == gn:
            m, pid = sp[2], sp[3]
            offs = ",".join(f'"{tp(p)}":{pos[p]}' for p in assignment(g, old_gen, m))
            v = f'{{"member":"{new[m][1]}","generation":{old_gen},"offsets":{{{offs}}}}}'
            a = H("invoke", new[m][2], "commit", v)
            b = H("ok", new[m][2], "commit", v, node=C)
            out.cite(pid, first_sync, a, b)
    return idx, j


# ---------------------------------------------------------------------- the end of the run

def write_tail(plan: Plan, hist_path: Path, ev_dir: Path, tag: str) -> dict[str, Any]:
    """After the last tick: final reads, the groups' drain, leaves and final fetch-committed, broker stops."""
    out = _Out()
    T = plan.T
    idx = int(plan.lines_before[T])
    ts0 = tick_start(T)
    j = 0
    lines = out.lines

    def H(typ: str, proc: int, f: str, val: str, err: str = "null", node: Any = "null", grp: str = "null",
          fin: str = "") -> int:
        nonlocal idx, j
        lines.append(_hist(idx, typ, proc, ts0 + j * LINE_NS, f, val, err, node, grp, fin))
        if typ != "invoke":
            out.counts[f"{f}:{typ}"] = out.counts.get(f"{f}:{typ}", 0) + 1
        idx += 1
        j += 1
        return idx - 1

    # every ok send, per partition, in offset order
    ticks = np.arange(T, dtype=np.int64)
    slot_t, slot_k, slot_p = [], [], []
    for k in range(NPROD):
        pk = (ticks * NPROD + k) % NPART
        ok = plan.leader_ev[pk, ticks] > 0
        slot_t.append(ticks[ok])
        slot_k.append(np.full(int(ok.sum()), k))
        slot_p.append(pk[ok])
    st, sk, sp = np.concatenate(slot_t), np.concatenate(slot_k), np.concatenate(slot_p)
    order = np.lexsort((sk, st))
    st, sk, sp = st[order], sk[order], sp[order]
    override = plan.value_override
    omit = plan.omit_final
    last_read: dict[int, int] = {}
    final_base = MEMBER_PROC_BASE + 2 * NSLOTS * (max(len(v) for v in plan.reb.values()) + 1)
    for p in range(NPART):
        sel = sp == p
        tt, kk = st[sel].tolist(), sk[sel].tolist()
        hw = len(tt)
        if hw != int(plan.sent_before[T, p]):
            raise SyntheticError(f"partition {p}: {hw} ok sends, planned {int(plan.sent_before[T, p])}")
        leader = int(plan.leader_ev[p, T])
        proc = final_base + p
        inv = f'{{"topic":"{TOPIC}","partition":{p}}}'
        for lo in range(0, max(hw, 1), FINAL_BATCH):
            recs = []
            for o in range(lo, min(hw, lo + FINAL_BATCH)):
                if (p, o) in omit:
                    continue
                u, k = tt[o], kk[o]
                recs.append(f'["{TOPIC}",{p},{o},"{override.get((u, k)) or f"p{k}-{u}"}"]')
            H("invoke", proc, "poll", inv, fin=',"final":true')
            last_read[p] = H("ok", proc, "poll", f'{{"topic":"{TOPIC}","partition":{p},"records":[{",".join(recs)}],'
                                                 f'"high_watermark":{hw}}}', node=leader, fin=',"final":true')
    for (p, o), pid in omit.items():
        out.cite(pid, last_read[p])
    # the drain: one more poll of the last sends, and a commit of everything
    totals = {p: int(plan.sent_before[T, p]) for p in range(NPART)}
    fin_specs = []
    for g in GROUPS:
        gq = f'"{g.name}"'
        gen = plan.generation(g, T)
        C = int(plan.coord[plan.gpart[g.name], T])
        slots = []
        for m in range(g.members):
            inc = plan.incarnation(g, m, T)
            slots.append((plan.member_id(g, m, T, inc), plan.procs(g, m, inc)[0], assignment(g, gen, m)))
        frm = plan.poll_from(g, T)
        for mid, pp, _parts in slots:
            H("invoke", pp, "poll", f'{{"member":"{mid}","generation":{gen}}}', grp=gq)
        for mid, pp, parts in slots:
            recs = []
            for p in parts:
                for u in range(frm, T):
                    for k in range(NPROD):
                        if (u * NPROD + k) % NPART == p and plan._send_ok(u, k):
                            v = override.get((u, k)) or f"p{k}-{u}"
                            recs.append(f'["{TOPIC}",{p},{plan._send_offset(u, k)},"{v}"]')
            H("ok", pp, "poll", f'{{"member":"{mid}","generation":{gen},"records":[{",".join(recs)}]}}', grp=gq)
        vals = []
        for mid, pp, parts in slots:
            offs = ",".join(f'"{tp(p)}":{totals[p]}' for p in parts)
            v = f'{{"member":"{mid}","generation":{gen},"offsets":{{{offs}}}}}'
            vals.append(v)
            H("invoke", pp, "commit", v, grp=gq)
        for (mid, pp, _parts), v in zip(slots, vals):
            H("ok", pp, "commit", v, node=C, grp=gq)
        fin_specs.append((g, gen, C, slots))
    # the probe's last read-back
    Cp = int(plan.coord[plan.probe_part, T])
    H("invoke", NPROD, "fetch-committed", "{}", grp=f'"{PROBE_GROUP}"', fin=',"final":true')
    pv = f'{{"offsets":{{"{TOPIC}/0":{plan.probe_last}}}}}' if plan.probe_last else '{"offsets":{}}'
    H("ok", NPROD, "fetch-committed", pv, node=Cp, grp=f'"{PROBE_GROUP}"', fin=',"final":true')
    # leaves, then each group's final fetch-committed
    for g, gen, C, slots in fin_specs:
        gq = f'"{g.name}"'
        P = plan.gpart[g.name]
        for mid, pp, _parts in slots:
            H("invoke", pp, "leave", f'{{"member":"{mid}"}}', grp=gq)
            H("ok", pp, "leave", f'{{"member":"{mid}"}}', grp=gq)
            ns = ts0 + j * LINE_NS - 1000
            out.events.append((ns, C, event_line(ns, C, "member_removed", partition=P, group=g.name, member_id=mid,
                                                 group_instance_id=None, reason="left", replaced_by=None)))
        ns = ts0 + j * LINE_NS - 500
        out.events.append((ns, C, event_line(ns, C, "group_state_changed", partition=P, group=g.name,
                                             **{"from": "PreparingRebalance", "to": "Empty", "generation": gen + 1,
                                                "reason": None})))
        out.events.append((ns + 100, C, event_line(ns + 100, C, "group_stored", partition=P, group=g.name,
                                                   generation=gen + 1, members=[], reason="empty", error=0)))
        pp = slots[0][1]
        offs = ",".join(f'"{tp(p)}":{totals[p]}' for p in range(NPART))
        H("invoke", pp, "fetch-committed", "{}", grp=gq, fin=',"final":true')
        i = H("ok", pp, "fetch-committed", f'{{"offsets":{{{offs}}}}}', node=C, grp=gq, fin=',"final":true')
        for pl in plan.plants:
            if pl["kind"] == "unseen-message" and pl["details"]["group"] == g.name:
                out.cite(pl["id"], i)
    _flush(out, hist_path)
    end_ns = ts0 + j * LINE_NS + 100_000_000
    plan.cluster.ev = []
    plan.cluster.shutdown(end_ns)
    for e in plan.cluster.ev:
        out.events.append((e["ns"], e["broker"], event_line(e["ns"], e["broker"], e["type"], **e["fields"])))
    out.events.extend(plan.events_between(ts0, 1 << 62))
    _write_events(out.events, ev_dir, tag)
    return {"counts": out.counts, "plants": out.plants, "lines": idx - int(plan.lines_before[T]), "end_ns": end_ns,
            "last_index": idx - 1}


# ---------------------------------------------------------------------- the segments

def write_segments(plan: Plan, run: Path) -> None:
    """A compacted ``__consumer_offsets`` log per hosting partition on each replica: the last record of each key."""
    from coordinator.records import GroupMetadataKey, GroupValue, OffsetKey, OffsetValue, encode_key, encode_value
    from node.storage.batch import encode_batch

    T = plan.T
    end_ms = int(ts_ms(tick_start(T + 1)))
    for P in plan.hosting:
        recs = []
        for g in plan.groups_on[P]:
            if g == PROBE_GROUP:
                if plan.probe_last:
                    recs.append((encode_key(OffsetKey(g, TOPIC, 0)),
                                 encode_value(OffsetValue(plan.probe_last, -1, "", end_ms - 500)), end_ms - 500))
                continue
            spec = plan.group_spec[g]
            for p in range(NPART):
                recs.append((encode_key(OffsetKey(g, TOPIC, p)),
                             encode_value(OffsetValue(int(plan.sent_before[T, p]), -1, "", end_ms)), end_ms))
            recs.append((encode_key(GroupMetadataKey(g)),
                         encode_value(GroupValue("consumer", plan.generation(spec, T) + 1, None, None, end_ms + 5)),
                         end_ms + 5))
        if not recs:
            continue
        end = int(plan.off_before[T, P]) + NPART * len(plan.groups_on[P]) + len(plan.groups_on[P])
        base = max(0, end - len(recs))
        s = plan.cluster.parts[(OFFSETS_TOPIC, P)]
        data = encode_batch(base, s.leader_epoch, recs)
        for b in s.replicas:
            d = run / "cluster" / "data" / f"broker-{b}" / f"{OFFSETS_TOPIC}-{P}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "00000000000000000000.log").write_bytes(data)


# ---------------------------------------------------------------------- a whole run

def _task(args: tuple) -> dict[str, Any]:
    kind, t0, t1, hist, ev_dir, tag = args
    plan = _PLAN
    assert plan is not None
    if kind == "tail":
        return write_tail(plan, Path(hist), Path(ev_dir), tag)
    return write_ticks(plan, t0, t1, Path(hist), Path(ev_dir), tag)


def _concat(parts: list[Path], dest: Path) -> None:
    with open(dest, "wb") as out:
        for p in parts:
            with open(p, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 22)
            p.unlink()


def write_run(run: Path, ops: int, seed: int, plant: Iterable[str] = (), *, jobs: int | None = None,
              instances: int = DEFAULT_INSTANCES, part_lines: int = PART_LINES,
              single_file_lines: int = SINGLE_FILE_LINES, check: bool = False) -> dict[str, Any]:
    """Write one synthetic run into directory ``run`` (created; it must be empty or absent)."""
    global _PLAN
    t_begin = time.monotonic()
    run = Path(run)
    if run.exists() and any(run.iterdir()):
        raise SyntheticError(f"{run}: exists and is not empty")
    plan = Plan(run.name, ops, seed, plant, instances)
    t_plan = time.monotonic() - t_begin
    ev_dir = run / "cluster" / "events"
    tmp = run / ".parts"
    tmp.mkdir(parents=True)
    ev_dir.mkdir(parents=True)
    split = plan.total_lines_est > single_file_lines
    chunks = plan.chunks(part_lines if split else 1 << 62)
    hist = run / "history.jsonl"
    if split:
        hist.mkdir()
        targets = [hist / f"part-{i:05d}.jsonl" for i in range(len(chunks) + 1)]
    else:
        targets = [tmp / f"history.{i:05d}" for i in range(len(chunks) + 1)]
    tasks = [("ticks", t0, t1, str(targets[i]), str(tmp), f"{i:05d}") for i, (t0, t1) in enumerate(chunks)]
    tasks.append(("tail", 0, 0, str(targets[-1]), str(tmp), f"{len(chunks):05d}"))
    for tgt in targets:
        Path(tgt).touch()
    jobs = jobs or os.cpu_count() or 1
    _PLAN = plan
    try:
        if jobs > 1 and len(tasks) > 2 and "fork" in multiprocessing.get_all_start_methods():
            ctx = multiprocessing.get_context("fork")
            order = [len(tasks) - 1] + list(range(len(tasks) - 1))   # the tail (all final reads) first
            with ctx.Pool(min(jobs, len(tasks))) as pool:
                res = pool.map(_task, [tasks[i] for i in order], chunksize=1)
            results = [None] * len(tasks)
            for i, r in zip(order, res):
                results[i] = r
        else:
            results = [_task(tk) for tk in tasks]
    finally:
        _PLAN = None
    if not split:
        _concat([Path(t) for t in targets], hist)
    for b in BROKERS:
        _concat([tmp / f"broker-{b}.{i:05d}" for i in range(len(tasks))], ev_dir / f"broker-{b}.jsonl")
    shutil.rmtree(tmp)
    write_segments(plan, run)
    counts: dict[str, int] = {}
    for r in results:
        for k, v in r["counts"].items():
            counts[k] = counts.get(k, 0) + v
        for pid, got in r["plants"].items():
            pl = plan._plant_by_id[pid]
            pl["ops"].extend(got["ops"])
            pl["events"].extend(got["events"])
    for pl in plan.plants:
        pl["ops"] = sorted(set(pl["ops"]))
    lines = sum(r["lines"] for r in results)
    tail = results[-1]
    invoked = sum(v for k, v in counts.items() if not k.startswith(("kill:", "heal:")))
    duration_s = round((tail["end_ns"] - tick_start(0)) / 1e9, 3)
    t_write = time.monotonic() - t_begin - t_plan
    planted_kinds = sorted({p["kind"] for p in plan.plants})
    expected = {k: sum(1 for p in plan.plants if p["kind"] == k) for k in planted_kinds}
    (run / "planted.json").write_text(json.dumps({
        "run": run.name, "seed": seed, "kinds": planted_kinds, "requested": plan.plant_kinds,
        "expected_anomaly_counts": expected, "how": {k: PLANT_HOW[k] for k in planted_kinds},
        "plants": plan.plants}, indent=1) + "\n")
    (run / "schedule.json").write_text(json.dumps([
        {"fault": f.id, "kind": "kill", "target": f.target, "nodes": [f.victim], "at_ms": (f.start * TICK_NS) // 10**6,
         "duration.ms": (f.heal - f.start) * TICK_NS // 10**6, "detect_ms": (f.detect - f.start) * TICK_NS // 10**6,
         "plant": f.plant} for f in plan.faults], indent=1) + "\n")
    results_doc: dict[str, Any] = {
        "scenario": "synthetic", "seed": seed, "duration_s": duration_s, "planted_bugs": [],
        "planted": planted_kinds, "verdict": "invalid" if expected else "valid", "exit_code": 1 if expected else 0,
        "expected": {"verdict": "invalid" if expected else "valid", "anomaly_counts": expected},
        "checks": None, "timeline": None,
        "ops": {"invoked": invoked, "ops_per_s": round(invoked / max(duration_s, 1e-9), 1),
                "by_outcome": dict(sorted(counts.items()))},
        "faults": len(plan.faults), "member_crashes": 0, "member_stalls": 0,
        "drained": {g.name: True for g in GROUPS}, "workload_errors": [],
        "synthetic": {"ops_requested": ops, "ticks": plan.T, "history_lines": lines, "part_files": split,
                      "parts": len(tasks) if split else 1, "rebalances": {g: len(v) - 1 for g, v in plan.reb.items()},
                      "plan_s": round(t_plan, 3), "write_s": round(t_write, 3)},
    }
    if check:
        from chaos.checkers import check as run_checks
        from chaos.history import read_history
        from chaos.timeline import failover_timeline, summarize
        from node.events import read_run_events
        ops_l = [op for f in (sorted(hist.glob("part-*.jsonl")) if split else [hist]) for op in read_history(f)]
        events = read_run_events(run / "cluster")
        res = run_checks(ops_l, events)
        rows = failover_timeline(ops_l, events)
        results_doc.update(verdict=res.verdict, exit_code=res.exit_code, checks=res.to_json(), timeline=rows,
                           timeline_summary=summarize(rows))
    (run / "results.json").write_text(json.dumps(results_doc, indent=2, default=str) + "\n")
    return results_doc


def generate(out_dir: Path | str, ops: int, runs: int = 1, plant: Iterable[str] = (), seed: int = 0, *,
             jobs: int | None = None, instances: int = DEFAULT_INSTANCES, part_lines: int = PART_LINES,
             single_file_lines: int = SINGLE_FILE_LINES, check: bool = False) -> list[Path]:
    """Write ``runs`` synthetic runs into ``out_dir`` with about ``ops`` client operations in all.

    Run i is ``out_dir/synth-<seed>-<i>``.  ``plant``: anomaly kinds to plant in every run
    (:data:`PLANT_KINDS`, or ``"all"``), ``instances`` of each.  Deterministic for a seed."""
    plant = list(plant)
    if "all" in plant:
        plant = [k for k in plant if k != "all"] + [k for k in PLANT_KINDS if k not in plant]
    for k in plant:
        if k not in PLANT_KINDS:
            raise SyntheticError(f"unknown plant kind {k!r}; expected one of {', '.join(PLANT_KINDS)}")
    if runs < 1 or ops < 1:
        raise SyntheticError("runs and ops must be positive")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(runs):
        run = out / f"synth-{seed}-{i:03d}"
        write_run(run, max(1, ops // runs), seed * 1000 + i, plant, jobs=jobs, instances=instances,
                  part_lines=part_lines, single_file_lines=single_file_lines, check=check)
        paths.append(run)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis.synthetic", description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--ops", type=int, required=True, help="client operations in all (about)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--plant", action="append", default=[], metavar="KIND",
                    help=f"plant anomalies of this kind (repeatable; 'all'): {', '.join(PLANT_KINDS)}")
    ap.add_argument("--instances", type=int, default=DEFAULT_INSTANCES, help="anomalies planted per kind")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=None, help="writer processes (default: the cores)")
    ap.add_argument("--check", action="store_true", help="run chaos.checkers on each run (small runs only)")
    a = ap.parse_args(argv)
    t = time.monotonic()
    try:
        paths = generate(a.out_dir, a.ops, a.runs, a.plant, a.seed, jobs=a.jobs, instances=a.instances,
                         check=a.check)
    except SyntheticError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    dt = time.monotonic() - t
    lines = 0
    for p in paths:
        r = json.loads((p / "results.json").read_text())
        lines += r["synthetic"]["history_lines"]
        extra = f", checked: {r['verdict']} {r['checks']['anomaly_counts']}" if r.get("checks") else ""
        print(f"{p}: {r['ops']['invoked']} ops, {r['synthetic']['history_lines']} lines, {r['faults']} faults, "
              f"planted {r['expected']['anomaly_counts'] or 'nothing'}{extra}")
    print(f"{len(paths)} run(s), {lines} history lines in {dt:.1f} s ({lines / max(dt, 1e-9):,.0f} lines/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
