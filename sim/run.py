"""One simulated run: the cluster, the workload, the faults, then judge/'s checkers and timeline.

    result = SimRun(SimOptions(seed=7, faults=("kill", "pause")), out=Path("runs/sim-7")).run()

Phases, as chaos/runner.py's: brokers start, the workload topic is created,
producers and group members start; the schedule's faults fire one after
another on virtual time; at ``duration`` the run marks ``end``, stops the
producers, heals everything, lets the cluster settle, reads every partition
in full (the final reads), lets the groups drain, fetches each group's
committed offsets a last time (``final``), marks ``stop``.  The run directory
then holds what a chaos run's does (history.jsonl, events/broker-*.jsonl,
schedule.json, results.json), judged by ``judge.checkers.check`` and
``judge.timeline.failover_timeline``, unchanged.
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge.check_model import Anomaly, CheckResult
from judge.checkers import check
from judge.history import HistoryWriter
from chaos.schedule import Fault
from judge.timeline import END_PHASE, STOP_PHASE, failover_timeline
from judge.timeline_summary import summarize
from judge.txn_timeline import txn_failover_timeline, txn_summary
from kafkacommon import errors
from sim import rpc
from sim.broker import SimConfig
from sim.clients import SimMember, SimProducer
from sim.cluster import SimCluster
from sim.faults import DEFAULT_KINDS, Active, Nemesis, check_kinds, make_schedule
from sim.invariants import InvariantViolation, Monitor
from sim.txn_workload import OUTPUT, TRANSACTIONAL_ID, SimTxnWorkload
from transactions.config import TRANSACTION_STATE_TOPIC
from sim.world import World

TOPIC = "events"
OFFSETS = "__consumer_offsets"
SETTLE_MS = 8000.0
DRAIN_MS = 15000.0


@dataclass
class SimOptions:
    seed: int
    brokers: int = 3
    groups: int = 1
    members: int = 2
    duration_s: float = 30.0
    faults: tuple[str, ...] = DEFAULT_KINDS
    bugs: tuple[str, ...] = ()
    partitions: int = 3
    producers: int = 1
    rate: float = 20.0
    stall_every_ms: tuple[int, int] | None = (6000, 15000)   # members stall (chaos's consumer stalls)...
    stall_ms: int = 9000                                       # ...for longer than their 6 s session
    offsets_partitions: int = 10
    commit_interval_ms: int = 250        # the members' (chaos's default)
    session_timeout_ms: int = 6000       # the members' group session...
    heartbeat_interval_ms: int = 1000    # ...and heartbeat interval (chaos's defaults)
    poll_interval_ms: float = 100.0
    schedule: list[Fault] | None = None       # explicit faults (a scenario file, a shrink attempt)
    # a chaos scenario's pins and settings (sim/scenario.py's from_chaos): SimConfig fields by name, explicit
    # assignments ({topic: replicas per partition}; __consumer_offsets there is created by the run), and the
    # broker started first, alone until it is the controller
    config: dict[str, Any] = field(default_factory=dict)
    assignments: dict[str, tuple[tuple[int, ...], ...]] = field(default_factory=dict)
    controller: int | None = None
    # judge/invariants.py's invariants checked while the run goes (sim/invariants.py): after every ``every``-th
    # simulated event; the first violation stops the run.  ``invariants_full``: every partition at each check.
    invariants: bool = True
    invariants_every: int = 1
    invariants_full: bool = False
    # topics beyond the workload's, with no traffic ({name: partitions}, replication factor 3): the control
    # plane's load (sim/scale.py's clusters); and whether judge/'s checkers read the run at its end
    extra_topics: dict[str, int] = field(default_factory=dict)
    judge: bool = True
    # the transactional workload (sim/txn_workload.py): this many exactly-once pipelines (0: none) reading the
    # producers' topic and writing txn-out, faults aimed at their transaction coordinators too
    transactions: int = 0
    txn_max_records: int = 10
    txn_timeout_ms: int = 10_000
    txn_readers: int = 1
    zombie_every_ms: tuple[int, int] | None = None
    zombie_ms: int = 2000
    txn_crash_every_ms: tuple[int, int] | None = None

    def group_ids(self) -> list[str]:
        return [f"g{i}" for i in range(1, self.groups + 1)]


@dataclass
class SimResult:
    seed: int
    verdict: str
    exit_code: int
    results: dict[str, Any]
    faults: list[Fault]
    history: list[dict[str, Any]] = field(repr=False, default_factory=list)
    events: list[dict[str, Any]] = field(repr=False, default_factory=list)
    digest: str = ""

    @property
    def kinds(self) -> list[str]:
        return sorted(self.results["checks"]["anomaly_counts"])


class _History:
    """judge/history.py's writer (the same lines, the same rules) on the run's virtual clock, keeping
    the lines it wrote for the checkers."""

    def __init__(self, path: Path | None, clock) -> None:
        self.w = HistoryWriter(path, clock=clock)
        self.lines: list[dict[str, Any]] = []

    def invoke(self, *a: Any, **kw: Any) -> dict[str, Any]:
        line = self.w.invoke(*a, **kw)
        self.lines.append(line)
        return line

    def complete(self, *a: Any, **kw: Any) -> dict[str, Any]:
        line = self.w.complete(*a, **kw)
        self.lines.append(line)
        return line

    def nemesis(self, *a: Any, **kw: Any) -> dict[str, Any]:
        line = self.w.nemesis(*a, **kw)
        self.lines.append(line)
        return line

    def close(self) -> None:
        self.w.close()


class SimRun:
    def __init__(self, opts: SimOptions, out: Path | None = None) -> None:
        self.opts = opts
        self.out = out
        self.world = World(opts.seed)
        self.cfg = SimConfig(brokers=opts.brokers, offsets_replication_factor=min(3, opts.brokers),
                             offsets_partitions=opts.offsets_partitions, bugs=frozenset(opts.bugs),
                             offsets_eager_create=OFFSETS not in opts.assignments, **opts.config)
        self.partitions = {TOPIC: opts.partitions}
        txn_ids = [f"{TRANSACTIONAL_ID}-{i}" for i in range(opts.transactions)]
        if opts.schedule is not None:
            self.faults = list(opts.schedule)
        else:
            self.faults = make_schedule(random.Random(f"kafkasim-sim-schedule:{opts.seed}"),
                                        check_kinds(tuple(opts.faults)), int(opts.duration_s * 1000),
                                        opts.group_ids(), TOPIC, txn_ids=txn_ids)
        self.txns: SimTxnWorkload | None = None
        self._next_process = 0
        self.active: list[Active] = []
        self.end_errors: list[str] = []
        self.drained: dict[str, bool] = {}

    def procs(self) -> int:
        p, self._next_process = self._next_process, self._next_process + 1
        return p

    # ------------------------------------------------------------------ the run

    def run(self) -> SimResult:
        w = self.world
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
        self.cluster = SimCluster(w, self.cfg)
        # a sweep's run (no --out): the history is kept in memory only
        self.history = _History(self.out / "history.jsonl" if self.out is not None else None, self.cluster.clock)
        self.monitor = Monitor(self, self.opts.invariants_every, self.opts.invariants_full) \
            if self.opts.invariants else None
        try:
            self._run()
            if self.monitor is not None:
                self.monitor.check()    # what the last steps logged
        except InvariantViolation as stop:
            return self._analyse(stop)
        return self._analyse()

    def _run(self) -> None:
        w = self.world
        if self.opts.controller is not None:   # pinned: it starts alone and wins the first election
            self.cluster.start(only=self.opts.controller)
            self._wait(lambda: self.cluster.zk_view()[1] == self.opts.controller, 20_000)
        self.cluster.start()
        pinned = self.opts.assignments
        if OFFSETS in pinned:   # as chaos runs do: once every broker is registered, the run creates it
            self._wait(lambda: len(self.cluster.zk_view()[0]) == self.opts.brokers
                       and self.cluster.zk_view()[1] is not None, 20_000)
            self.cluster.create_topic(OFFSETS, 0, 0, pinned[OFFSETS], config={"cleanup.policy": "compact"})
        self._wait(lambda: self.cluster.zk_view()[1] is not None and self._offsets_led(), 20_000)
        self.cluster.create_topic(TOPIC, self.opts.partitions, 3, pinned.get(TOPIC))
        self._wait(lambda: self._led(TOPIC), 10_000)
        if self.opts.transactions:
            # as a broker creates __transaction_state on the first FindCoordinator of a transactional id
            self.cluster.create_topic(TRANSACTION_STATE_TOPIC, self.cfg.txn_partitions, 3, config={
                "cleanup.policy": "compact", "min.insync.replicas": str(min(2, self.opts.brokers))})
            self.cluster.create_topic(OUTPUT, self.opts.partitions, 3)
            self._wait(lambda: self._led(TRANSACTION_STATE_TOPIC) and self._led(OUTPUT), 10_000)
            self.txns = SimTxnWorkload(self, TOPIC, self.opts.partitions, self.opts.transactions,
                                       max_records=self.opts.txn_max_records, timeout_ms=self.opts.txn_timeout_ms,
                                       readers=self.opts.txn_readers, zombie_every_ms=self.opts.zombie_every_ms,
                                       zombie_ms=self.opts.zombie_ms, crash_every_ms=self.opts.txn_crash_every_ms)
        for name, n in sorted(self.opts.extra_topics.items()):
            self.partitions[name] = n
            self.cluster.create_topic(name, n, 3)
            self._wait(lambda name=name: self._led(name), 120_000, 500.0)
        t0 = w.now_ms
        self.producers = [SimProducer(self, i, TOPIC, self.opts.rate) for i in range(self.opts.producers)]
        self.members = [SimMember(self, g, TOPIC, slot, stall_every_ms=self.opts.stall_every_ms,
                                  stall_ms=self.opts.stall_ms, commit_interval_ms=self.opts.commit_interval_ms,
                                  poll_interval_ms=self.opts.poll_interval_ms,
                                  session_timeout_ms=self.opts.session_timeout_ms,
                                  heartbeat_interval_ms=self.opts.heartbeat_interval_ms)
                        for g in self.opts.group_ids() for slot in range(self.opts.members)]
        for c in self.producers + self.members:
            c.start()
        if self.txns is not None:
            self.txns.start()
        nemesis = Nemesis(self)
        for f in self.faults:
            w.at(t0 + f.at_ms, self._start_fault, nemesis, f, t0)
        w.run_until(t0 + self.opts.duration_s * 1000)
        self._end_phase(nemesis)

    def _start_fault(self, nemesis: Nemesis, f: Fault, t0: float) -> None:
        act = nemesis.start(f)
        self.active.append(act)
        self.world.at(t0 + f.heal_at_ms, self._heal, nemesis, act)

    def _heal(self, nemesis: Nemesis, act: Active) -> None:
        if act in self.active:
            self.active.remove(act)
            nemesis.heal(act)

    def _wait(self, cond, timeout_ms: float, step_ms: float = 50.0) -> bool:
        end = self.world.now_ms + timeout_ms
        while self.world.now_ms < end:
            if cond():
                return True
            self.world.run_until(self.world.now_ms + step_ms)
        return cond()

    def _led(self, topic: str) -> bool:
        mine = self.cluster.topic_states(topic)
        return len(mine) == self.partitions.get(topic, len(mine) or 1) and all(st["leader"] >= 0
                                                                              for st in mine.values())

    def _settled(self) -> bool:
        for p, st in self.cluster.topic_states(TOPIC).items():
            t = TOPIC
            b = self.cluster.brokers.get(st["leader"])
            h = b.replicas.hosted.get((t, p)) if b is not None and b.running else None
            if set(st["isr"]) != set(st["replicas"]) or h is None or \
                    h.repl.high_watermark < h.log.log_end_offset:
                return False
        return True

    def _offsets_led(self) -> bool:
        mine = self.cluster.topic_states(OFFSETS)
        return bool(mine) and all(st["leader"] >= 0 for st in mine.values())

    def _end_phase(self, nemesis: Nemesis) -> None:
        h = self.history
        h.nemesis(END_PHASE, {"phase": END_PHASE})
        for p in self.producers:
            p.stopped = True
        for mbr in self.members:
            mbr.stall_every_ms = None
        if self.txns is not None:
            self.txns.quiesce()
        for act in list(self.active):
            self._heal(nemesis, act)
        for b in self.cluster.brokers.values():
            if not b.running:
                b.start()
        if not self._wait(lambda: self._led(TOPIC), SETTLE_MS):
            self.end_errors.append("the cluster did not recover after every fault was healed")
        else:   # as the chaos runner: ISRs full and HWs at the LEOs (a partition that does not settle is read as it is)
            self._wait(self._settled, 30_000)
        self.world.run_until(self.world.now_ms + 1000)
        # as the chaos runner joins its producers: every send in flight completes before the final reads
        self._wait(lambda: not any(p.busy for p in self.producers), 15_000)
        ends = self._final_reads()
        self.drained = {g: self._wait(lambda g=g: self._drained(g, ends), DRAIN_MS, 200.0)
                        for g in self.opts.group_ids()}
        if self.txns is not None:
            self.txns.end(ends, self._wait)
        for mbr in self.members:
            mbr.stopped = True
            mbr.stalled = False
        # in-flight operations complete or time out
        self._wait(lambda: not self.history.w.open_ops(), 16_000, 100.0)
        done: list[str] = []     # every group's final fetch at once (each its own process), as many clients
        for g in self.opts.group_ids():
            mbr = next(x for x in self.members if x.group == g)
            mbr.process = self.procs()
            mbr.stopped = False
            mbr.committed_at_end(lambda g=g: done.append(g))
            mbr.stopped = True
        self._wait(lambda: len(done) == len(self.opts.group_ids()), 10_000)
        h.nemesis(STOP_PHASE, {"phase": STOP_PHASE})

    def _drained(self, group: str, ends: dict[int, int]) -> bool:
        """Whether the group's committed offsets (as its coordinator holds them) reached the log ends."""
        committed: dict[int, int] = {}
        for b in self.cluster.brokers.values():
            if not b.running:
                continue
            for slot in b.coordinators.slots.values():
                for (g, t, p), v in slot.core.durable_view()["offsets"].items():
                    if g == group and t == TOPIC:
                        committed[p] = max(committed.get(p, -1), v.offset)
        return all(committed.get(p, -1) >= end for p, end in ends.items())

    def _final_reads(self) -> dict[int, int]:
        """Read every partition from 0 to its HW, as one ``final`` poll each (chaos's final_read)."""
        ends: dict[int, int] = {}
        for p in range(self.opts.partitions):
            process = self.procs()
            op = self.history.invoke(process, "poll", {"topic": TOPIC, "partition": p}, final=True)
            got: list[list[Any]] = []
            state = {"offset": 0, "hw": None, "done": False, "error": None}

            def ask(p=p, state=state, got=got) -> None:
                leader = self.cluster.topic_states(TOPIC).get(p, {}).get("leader", -1)
                b = self.cluster.brokers.get(leader)
                if b is None or not b.running:
                    return
                def answer(ans: Any) -> None:
                    if ans is None or ans[0] != errors.NONE:
                        return
                    _code, hw, recs = ans
                    state["hw"] = hw
                    for o, _k, v in recs:
                        if o == state["offset"]:
                            got.append([TOPIC, p, o, (v or b"").decode()])
                            state["offset"] = o + 1
                    if state["offset"] >= hw:
                        state["done"] = True
                rpc.call(self.world, "client", b.node, b.handle_consume, ((TOPIC, p), state["offset"]), answer, 1000)

            def step(state=state) -> bool:
                if not state["done"]:
                    ask()
                return state["done"]
            ok = self._wait(step, 10_000, 100.0)
            if ok:
                self.history.complete(op, "ok", {"topic": TOPIC, "partition": p, "records": got,
                                                 "high_watermark": state["hw"]}, final=True)
                ends[p] = state["hw"]
            else:
                self.history.complete(op, "fail", error="did not reach the high watermark", final=True)
                self.end_errors.append(f"final read of {TOPIC}/{p} failed")
        self.final_reads_ok = len(ends) == self.opts.partitions
        return ends

    # ------------------------------------------------------------------ judging

    def _analyse(self, stop: InvariantViolation | None = None) -> SimResult:
        self.history.close()
        ops = self.history.lines
        events = self.cluster.merged_events()
        txn = self.txns.txn() if self.txns is not None else None
        if stop is None and not self.opts.judge:
            result = CheckResult(unknowns=["the end-of-run checkers were not run (judge off); the invariants were"
                                           if self.monitor is not None else "nothing was checked (judge off)"])
        elif stop is None:
            result = check(ops, events, unclean_election=self.cfg.unclean_leader_election,
                           offsets_partitions=self.cfg.offsets_partitions, txn=txn)
        else:   # the run stopped at the step that broke an invariant: that is the verdict
            v = stop.violation
            result = CheckResult(anomalies=[Anomaly(v.kind, v.message, [], stop.step["events"],
                                                    {**v.details, "stopped_at": stop.step})])
        rows = failover_timeline(ops, events, offsets_partitions=self.cfg.offsets_partitions)
        verdict, code = result.verdict, result.exit_code
        notes = list(self.end_errors)
        formed = {op.get("group") for op in ops if op["f"] == "sync" and op["type"] == "ok"}
        for g in self.opts.group_ids():
            if g not in formed:
                notes.append(f"group {g} never completed a rebalance")
        if notes and verdict == "valid":
            verdict, code = "unknown", 2
        counts: dict[str, int] = {}
        for op in ops:
            if op["type"] != "invoke" and op["process"] != "nemesis":
                k = f"{op['f']}:{op['type']}"
                counts[k] = counts.get(k, 0) + 1
        client_ops = sum(1 for op in ops if op["type"] == "invoke")
        results = {
            "scenario": "sim", "seed": self.opts.seed, "duration_s": self.opts.duration_s,
            "planted_bugs": list(self.opts.bugs), "verdict": verdict, "exit_code": code,
            "checks": result.to_json(), "timeline": rows, "timeline_summary": summarize(rows),
            "ops": {"invoked": client_ops, "ops_per_s": round(client_ops / self.opts.duration_s, 1),
                    "by_outcome": counts},
            "faults": len(self.faults), "drained": self.drained, "workload_errors": notes,
            "simulated_ms": round(self.world.now_ms, 3), "steps": self.world.steps,
            "invariants": None if self.monitor is None else {
                "every": self.monitor.every, "full": self.monitor.full, "checks": self.monitor.checks,
                "fenced_leaders": self.monitor.inv.fenced_leaders,
                "stopped_at": None if stop is None else stop.step},
        }
        if txn is not None:
            txn_rows = txn_failover_timeline(ops, events, self.cfg.txn_partitions)
            results["transactions"] = {k: txn.get(k) for k in ("drained", "commits", "zombies", "crashes",
                                                               "instances", "final_committed")}
            results["txn_timeline"], results["txn_timeline_summary"] = txn_rows, txn_summary(txn_rows)
            if not txn.get("final_reads_ok", True) and verdict == "valid":
                verdict, code = "unknown", 2
                results["verdict"], results["exit_code"] = verdict, code
        digest = hashlib.sha256(json.dumps(ops, separators=(",", ":")).encode()
                                + json.dumps(events, separators=(",", ":"), default=str).encode()).hexdigest()
        results["digest"] = digest
        if self.out is not None:
            self.cluster.write_events(self.out / "cluster")
            (self.out / "schedule.json").write_text(json.dumps(
                {"scenario": "sim", "seed": self.opts.seed, "duration_s": self.opts.duration_s,
                 "faults": [f.to_json() for f in self.faults]}, indent=2, sort_keys=True) + "\n")
            (self.out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
        return SimResult(self.opts.seed, verdict, code, results, self.faults, ops, events, digest)
