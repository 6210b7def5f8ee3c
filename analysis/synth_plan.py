"""The plan of a synthetic run (``analysis.synthetic``): everything the writers of its parts share, computed once
in the parent as closed forms of the tick number and small per-tick arrays."""
from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Iterable
from typing import Any

import numpy as np

from kafkacommon.hashing import partition_for

from analysis.synth_shape import (
    assignment, BROKERS, DEFAULT_INSTANCES, DETECT, event_line, EXPAND_AFTER, FAULT_GAP, FAULT_MIX, FAULT_START,
    GROUPS, GroupSpec, HB_EVERY, HEAL_AFTER, HW_EVERY, LINE_NS, MAX_FAULTS, MEMBER_PROC_BASE, NOFF, NPART, NPROD,
    NSLOTS, PLANT_KINDS, PROBE_EVERY, PROBE_GROUP, PROBE_PHASE, QUIET_END, SAMPLE_NS, SyntheticError, TOPIC, stable_uuid,
)
from analysis.synth_model import Cluster, Fault

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
            mid = self._ids[key] = f"chaos-{slot}-{stable_uuid(self.seed, self.name, g.name, slot, j)}"
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
