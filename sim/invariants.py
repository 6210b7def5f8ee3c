"""Invariants at every step: judge/invariants.py's checks, run while a simulated run goes.

After each simulated event (a timer or a message delivered: one ``World`` step) the monitor feeds
``judge.invariants.Invariants`` the broker events and history lines the step produced; each event checks
the invariants it can break against the cluster's live state (``SimView``: the brokers' replicas and logs),
so every invariant is checked after every step that could change what it reads, and only then.  The first
violation stops the run (``InvariantViolation``), naming the step: its virtual time, its node and what it
delivered or ran, and the events it logged.  ``every`` > 1 checks after every that-many steps instead (the
violation still names the step whose events broke it); ``full`` checks every partition's high watermark
after each check, not only those the step's events named (slower; the tests compare the two).
"""
from __future__ import annotations

from typing import Any, Iterable

from judge.invariants import Invariants, Violation

TP = tuple[str, int]


class InvariantViolation(Exception):
    def __init__(self, violation: Violation, step: dict[str, Any]) -> None:
        super().__init__(f"{violation.kind}: {violation.message} (at {step.get('time_ms')} ms, {step.get('step')})")
        self.violation = violation
        self.step = step


class SimView:
    """``judge.invariants.ClusterView`` over a simulated cluster, read live."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.hosts: dict[TP, set[int]] = {}     # the brokers that have been given a role for each partition

    def leaders(self, tp: TP) -> Iterable[tuple[int, int, tuple[int, ...]]]:
        for bid in sorted(self.hosts.get(tp, ())):
            b = self.cluster.brokers[bid]
            if not b.running:
                continue
            h = b.replicas.hosted.get(tp)
            if h is not None and h.repl.is_leader:
                yield bid, h.repl.high_watermark, h.repl.isr

    def log_end(self, broker: int, tp: TP) -> int | None:
        log = self.cluster.brokers[broker].disk.logs.get(tp)
        return None if log is None else log.log_end_offset

    def record(self, broker: int, tp: TP, offset: int) -> Any:
        log = self.cluster.brokers[broker].disk.logs.get(tp)
        if log is None or offset >= log.log_end_offset:
            return None
        value = log.records[offset][2]
        return value.decode() if isinstance(value, bytes) else value


def describe(world, fn, args: tuple) -> str:
    """A world step in words: a message delivered (``src -> dst: handler``) or a node's timer (``node: fn``)."""
    name = getattr(fn, "__qualname__", repr(fn))
    if name == "Network._arrive":
        (src, dst), _node, _inc, deliver, _a = args
        return f"{src} -> {dst}: {getattr(deliver, '__qualname__', repr(deliver))}"
    if name == "World._node_call":
        node, _inc, inner, _a = args
        return f"{node.name}: {getattr(inner, '__qualname__', repr(inner))}"
    return name


class Monitor:
    """Installed on a run's world: checks the invariants after every ``every`` steps."""

    def __init__(self, run, every: int = 1, full: bool = False) -> None:
        self.run = run
        self.world = run.world
        self.cluster = run.cluster
        self.view = SimView(run.cluster)
        self.inv = Invariants(self.view, unclean_election=run.cfg.unclean_leader_election)
        self.every = max(1, every)
        self.full = full
        self._history_at = 0
        self._steps = 0
        self.checks = 0
        self.pending: list[tuple[dict, int, Any]] = []    # (event, step number, step) not yet checked
        run.cluster.on_emit = self._emitted
        self.world.after_step = self.after_step

    def _emitted(self, e: dict) -> None:
        w = self.world
        self.pending.append((e, w.steps, w.current))

    def after_step(self) -> None:
        self._steps += 1
        if self._steps % self.every:
            return
        lines = self.run.history.lines
        if not self.pending and self._history_at == len(lines) and not self.full:
            return
        self.check()

    def check(self) -> None:
        self.checks += 1
        inv = self.inv
        lines = self.run.history.lines
        for line in lines[self._history_at:]:
            inv.history(line)
        self._history_at = len(lines)
        pending, self.pending = self.pending, []
        hosts = self.view.hosts
        for e, step_no, step in pending:
            if e.get("type") in ("became_leader", "became_follower"):
                hosts.setdefault((e["topic"], e["partition"]), set()).add(e["broker"])
            v = inv.event(e)
            if v is not None:
                raise InvariantViolation(v, self._step(step_no, step, [x for x, n, _s in pending if n == step_no]))
        if self.full:
            v = inv.all_partitions(sorted(hosts))
            if v is not None:
                raise InvariantViolation(v, self._step(self.world.steps, self.world.current, []))

    def _step(self, step_no: int, step: Any, events: list[dict]) -> dict[str, Any]:
        t, _seq, fn, args = step if step is not None else (self.world.now_ms, 0, None, ())
        return {"step_index": step_no, "time_ms": round(t, 6),
                "step": describe(self.world, fn, args) if fn is not None else "(between steps)",
                "events": [{k: v for k, v in e.items() if k != "ts_ms"} for e in events][:20]}
