"""The cluster model of a synthetic run (``analysis.synthetic``): leaders, ISRs, epochs and broker processes,
moved fault by fault, and the events each move logs."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Protocol

from kafkacommon.hashing import partition_for

from analysis.synth_shape import BROKERS, gap_ns, NOFF, NPART, OFFSETS_TOPIC, tick_start, TOPIC



class PlanView(Protocol):
    """What the model uses of its ``analysis.synth_plan.Plan`` (which builds the model: it is not imported)."""

    seed: int
    events: list[dict[str, Any]]
    groups_on: dict[int, list[str]]
    group_spec: dict[str, Any]

    def generation(self, spec: Any, tick: int) -> int: ...

    def member_id(self, spec: Any, m: int, tick: int) -> str: ...

    def plant_events(self, plant_id: str | None, events: list[dict[str, Any]]) -> None: ...

    def plant_details(self, plant_id: str | None, **details: Any) -> None: ...


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

    def __init__(self, plan: PlanView) -> None:
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
