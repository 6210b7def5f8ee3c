"""Faults in simulated runs: drawn from the seed, aimed by role, started and healed on virtual time.

A fault is chaos/schedule.py's ``Fault`` (the same fields, so a schedule
prints and reads the same), with the simulator's kinds:

========================  ====================================================  =============================
kind                      start                                                heal
========================  ====================================================  =============================
``kill``                  crash the broker (SIGKILL: the page cache survives)  restart it
``power-loss``            crash, losing what was not fsynced                    restart it
``truncate``              crash, and tear ``truncate_bytes`` off the log tail   restart (recovery cuts it)
``pause``                 stop the node (timers and messages wait)              resume it
``partition``             block target <-> peer (``direction`` both/to/from)    unblock
``expire-session``        expire the broker's ZooKeeper session                 (nothing)
``slow-disk``             the broker's appends take ``latency_ms`` longer        back to normal
``clock-jump``            the broker's clock leaps ``latency_ms`` ahead         back
``disk-full``             fill the log directory (a ``SimDisk``) holding the    free it, restart the broker
                          target's partition (every one, for other targets)     (offline until a restart)
``disk-error``            fail its writes (EROFS), as ``disk-full`` chooses     repair it, restart the broker
========================  ====================================================  =============================

Targets resolve when the fault starts, against ZooKeeper's view then
(chaos/targets.py's ``resolve``, unchanged): ``controller``,
``coordinator:<group>``, ``txn-coordinator:<transactional id>``, ``leader:<topic>/<p>``, ``followers:...``, ``broker:<id>``,
``random``.  Each fault's own choices come from ``random.Random(fault.seed)``, so a
schedule with a fault removed still resolves the others the same way when the
cluster looks the same (what ``sim shrink`` relies on).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from chaos.schedule import Fault
from chaos.targets import View, nemesis_value, resolve, target_partition

KINDS = ("kill", "power-loss", "truncate", "pause", "partition", "expire-session", "slow-disk", "clock-jump",
         "disk-full", "disk-error")
DISK_KINDS = ("disk-full", "disk-error")
#: kinds ``kafkasim chaos run`` has too (a shrunk schedule of only these runs there as well)
CHAOS_KINDS = frozenset({"kill", "truncate", "pause", "partition", "expire-session", "disk-full", "disk-error"})
DEFAULT_KINDS = ("kill", "pause", "partition", "expire-session")
TARGETS = {
    "kill": ("coordinator:{g}", "controller", "leader:{t}/0", "random"),
    "power-loss": ("coordinator:{g}", "leader:{t}/0", "random"),
    "truncate": ("coordinator:{g}", "leader:{t}/0", "random"),
    "pause": ("coordinator:{g}", "controller", "leader:{t}/0", "followers:{t}/0", "random"),
    "partition": ("coordinator:{g}", "controller", "leader:{t}/0", "random"),
    "expire-session": ("coordinator:{g}", "controller", "random"),
    "slow-disk": ("coordinator:{g}", "leader:{t}/0", "random"),
    "clock-jump": ("coordinator:{g}", "controller", "random"),
    "disk-full": ("coordinator:{g}", "leader:{t}/0", "random"),
    "disk-error": ("coordinator:{g}", "leader:{t}/0", "random"),
}
PEERS = ("brokers", "zookeeper", "clients", "rest")


class FaultError(ValueError):
    pass


def check_kinds(kinds: tuple[str, ...]) -> tuple[str, ...]:
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise FaultError(f"unknown fault kind {bad[0]!r} (known: {', '.join(KINDS)})")
    return kinds


def make_schedule(rng: random.Random, kinds: tuple[str, ...], duration_ms: int, groups: list[str], topic: str,
                  *, start_ms: int = 3000, gap_ms: tuple[int, int] = (1000, 4000),
                  length_ms: tuple[int, int] = (500, 6000), quiet_end_ms: int = 2000,
                  overlap: float = 0.35, txn_ids: list[str] = ()) -> list[Fault]:
    """Faults one after another; with probability ``overlap`` the next one starts before this one heals
    (chaos schedules never overlap: the interleavings that need two faults at once are the simulator's).
    With ``txn_ids`` (a transactional workload) every kind may also aim at ``txn-coordinator:<id>``."""
    out: list[Fault] = []
    if not kinds:
        return out
    t = start_ms
    while t < duration_ms - quiet_end_ms:
        kind = rng.choice(kinds)
        targets = TARGETS[kind] + (("txn-coordinator:{x}",) * 2 if txn_ids else ())
        target = rng.choice(targets).format(g=rng.choice(groups) if groups else "g0", t=topic,
                                            x=rng.choice(txn_ids) if txn_ids else "")
        heal = min(t + rng.randint(*length_ms), duration_ms)
        peer = rng.choice(PEERS) if kind == "partition" else None
        direction = rng.choice(("both", "both", "to", "from")) if kind == "partition" else None
        latency = rng.choice((50, 200, 1000)) if kind == "slow-disk" else (
            rng.choice((2000, 5000, 20000)) if kind == "clock-jump" else None)
        out.append(Fault(id=len(out), at_ms=t, heal_at_ms=heal, kind=kind, target=target,
                         seed=rng.getrandbits(32), peer=peer, direction=direction, latency_ms=latency,
                         truncate_bytes=rng.randint(1, 200) if kind == "truncate" else None))
        if rng.random() < overlap:
            t = rng.randint(t + 1, max(t + 1, heal - 1))
        else:
            t = heal + rng.randint(*gap_ms)
    return out


@dataclass
class Active:
    fault: Fault
    nodes: list[str]
    peers: list[str] = field(default_factory=list)
    skipped: str | None = None
    links: list[tuple[str, str]] = field(default_factory=list)
    disks: list[tuple[int, int]] = field(default_factory=list)   # (broker, log directory) a disk fault failed


class Nemesis:
    """Starts and heals faults on a simulated cluster, recording each in the history as chaos runs do."""

    def __init__(self, run) -> None:
        self.run = run
        self.world = run.world
        self.cluster = run.cluster

    def view(self) -> View:
        c = self.cluster
        live, controller, parts = c.zk_view()
        return View(sorted(c.brokers), set(live), [1], controller, parts, c.cfg.offsets_partitions,
                    txn_partitions=c.cfg.txn_partitions)

    def _record(self, act: Active, phase: str) -> None:
        value = nemesis_value(act.fault, phase, act.nodes, act.peers, act.skipped)
        self.run.history.nemesis(act.fault.kind if phase == "start" else "heal", value)

    def start(self, f: Fault) -> Active:
        rng = random.Random(f.seed)
        view = self.view()
        nodes = [n for n in resolve(f.target, view, rng) if n.startswith("b")]
        act = Active(f, nodes)
        if not nodes:
            act.skipped = f"{f.target} resolved to nobody"
            self._record(act, "start")
            return act
        if f.kind in ("kill", "power-loss", "truncate"):
            self._record(act, "start")
            for n in nodes:
                self.cluster.brokers[int(n[1:])].crash(lose_unsynced=f.kind == "power-loss",
                                                        torn_bytes=f.truncate_bytes or 0)
            return act
        if f.kind == "pause":
            for n in nodes:
                self.world.pause(n)
        elif f.kind == "partition":
            act.peers = [p if p != "zk1" else "zk1" for p in resolve(f.peer or "rest", view, rng,
                                                                   exclude=frozenset(nodes))]
            act.peers = [("zk1" if p.startswith("zk") else p) for p in act.peers]
            for a in nodes:
                for b in act.peers:
                    if f.direction in ("both", "to", None):
                        act.links.append((a, b))
                    if f.direction in ("both", "from", None):
                        act.links.append((b, a))
            for a, b in act.links:
                self.world.net.block(a, b)
        elif f.kind == "expire-session":
            for n in nodes:
                self.cluster.expire_session(int(n[1:]))
        elif f.kind == "slow-disk":
            for n in nodes:
                self.cluster.brokers[int(n[1:])].disk.files.slow(extra_ms=float(f.latency_ms or 0))
        elif f.kind == "clock-jump":
            for n in nodes:
                self.world.node(n).clock_skew_ms += float(f.latency_ms or 0)
        elif f.kind in DISK_KINDS:
            act.disks = self._fail_disks(f, nodes)
        self._record(act, "start")
        return act

    def _fail_disks(self, f: Fault, nodes: list[str]) -> list[tuple[int, int]]:
        """(broker, directory index) failed: the directory holding the target's partition, or every one."""
        tp = target_partition(f.target, self.cluster.cfg.offsets_partitions)
        out = []
        for n in nodes:
            b = self.cluster.brokers[int(n[1:])]
            log = b.disk.logs.get(tp) if tp is not None else None
            idx = [b.disk.dirs.index(log.disk)] if log is not None else list(range(len(b.disk.dirs)))
            for i in idx:
                (b.disk.dirs[i].fill if f.kind == "disk-full" else b.disk.dirs[i].fail_writes)()
                out.append((b.id, i))
        return out

    def heal(self, act: Active) -> None:
        f = act.fault
        if not act.skipped:
            if f.kind in ("kill", "power-loss", "truncate"):
                for n in act.nodes:
                    b = self.cluster.brokers[int(n[1:])]
                    if not b.running:
                        b.start()
            elif f.kind == "pause":
                for n in act.nodes:
                    self.world.resume(n)
            elif f.kind == "partition":
                for a, b in act.links:
                    self.world.net.unblock(a, b)
            elif f.kind == "slow-disk":
                for n in act.nodes:
                    self.cluster.brokers[int(n[1:])].disk.files.heal()
            elif f.kind == "clock-jump":
                pass   # a clock that leapt ahead does not come back (monotonic time)
            elif f.kind in DISK_KINDS:   # in 2.8 an offline log directory stays offline until the broker restarts
                for bid in sorted({b for b, _ in act.disks}):
                    b = self.cluster.brokers[bid]
                    for i in (i for x, i in act.disks if x == bid):
                        b.disk.dirs[i].repair()
                    if b.running:
                        b.crash()
                    b.start()
        self._record(act, "heal")


def shorter(f: Fault, factor: float = 0.5) -> Fault:
    return replace(f, heal_at_ms=f.at_ms + max(100, int((f.heal_at_ms - f.at_ms) * factor)))
