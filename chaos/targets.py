"""Fault targets, named by role and resolved when the fault fires.

Nodes are strings: ``b<id>`` for brokers, ``zk<n>`` for ZooKeeper servers and
``client`` for the workload's clients.  A target names a role
(``coordinator:g1``, ``txn-coordinator:eos-0``, ``controller``, ``leader:events/0``...) and resolves,
against what the cluster looks like at that moment (:class:`View`), to a set
of nodes.  Randomness (``random``, ``minority``, ``majority``) comes from the
``rng`` passed in, seeded per fault by the schedule, so a run's choices can be
replayed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, TypeVar

from kafkacommon.hashing import partition_for

OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"

_T = TypeVar("_T")


class Rng(Protocol):
    """The seeded generator a fault's choices come from (a ``random.Random``, made by the shell)."""

    def choice(self, seq: Sequence[_T]) -> _T: ...

    def sample(self, population: Sequence[_T], k: int) -> list[_T]: ...

_ROLE = re.compile(r"^(controller|random|minority|majority|zookeeper|app|rest|brokers|servers|clients)$"
                   r"|^(coordinator):(.+)$|^(txn-coordinator):(.+)$|^(leader|followers):([^/]+)/(\d+)$"
                   r"|^(broker):(\d+)$|^(zookeeper):(\d+)$"
                   r"|^(app):(\d+)$")
SETS = ("rest", "brokers", "servers", "clients")  # only as the other side of a network fault


class TargetError(ValueError):
    pass


@dataclass(frozen=True)
class Target:
    kind: str
    arg: str = ""

    def __str__(self) -> str:
        return f"{self.kind}:{self.arg}" if self.arg else self.kind


def parse_target(text: str, allow_sets: bool = False) -> Target:
    m = _ROLE.match(text.strip())
    if not m:
        raise TargetError(f"unknown target {text!r}: expected controller, coordinator:<group>, "
                          f"txn-coordinator:<transactional id>, leader:<topic>/<p>, "
                          f"followers:<topic>/<p>, broker:<id>, zookeeper[:<n>], app[:<n>], random, minority or majority")
    g = [x for x in m.groups() if x is not None]
    if g[0] in SETS and not allow_sets:
        raise TargetError(f"{text!r} can only be the peer of a network fault")
    if len(g) == 1:
        return Target(g[0])
    if g[0] in ("leader", "followers"):
        return Target(g[0], f"{g[1]}/{g[2]}")
    return Target(g[0], g[1])


@dataclass
class View:
    """What the cluster looks like when a fault fires."""
    brokers: list[int]                                   # configured broker ids
    live: set[int]                                       # registered in ZooKeeper now
    zookeeper: list[int]                                 # ZooKeeper server numbers (1-based)
    controller: int | None = None
    partitions: dict[tuple[str, int], dict] = field(default_factory=dict)  # leader, isr, replicas
    offsets_partitions: int = 50
    apps: list[int] = field(default_factory=list)        # the user's application processes (1-based), if any
    txn_partitions: int = 50                             # __transaction_state's partitions


def broker_node(b: int) -> str:
    return f"b{b}"


def app_node(n: int) -> str:
    """The node of the user's application process ``n`` (1-based: ``app:<n>``)."""
    return f"app{n}"


def is_app_node(node: str) -> bool:
    return node.startswith("app") and node[3:].isdigit()


def resolve(target: Target | str, view: View, rng: Rng, exclude: frozenset[str] = frozenset()) -> list[str]:
    """The nodes ``target`` names now; [] when the role is vacant (no controller, an offline partition)."""
    t = parse_target(target, allow_sets=True) if isinstance(target, str) else target
    live = sorted(view.live)
    if t.kind == "controller":
        return [broker_node(view.controller)] if view.controller is not None else []
    if t.kind == "coordinator":
        st = view.partitions.get((OFFSETS_TOPIC, partition_for(t.arg, view.offsets_partitions)))
        return [broker_node(st["leader"])] if st and st["leader"] >= 0 else []
    if t.kind == "txn-coordinator":
        st = view.partitions.get((TXN_TOPIC, partition_for(t.arg, view.txn_partitions)))
        return [broker_node(st["leader"])] if st and st["leader"] >= 0 else []
    if t.kind in ("leader", "followers"):
        topic, p = t.arg.split("/")
        st = view.partitions.get((topic, int(p)))
        if not st:
            return []
        if t.kind == "leader":
            return [broker_node(st["leader"])] if st["leader"] >= 0 else []
        return [broker_node(b) for b in st["replicas"] if b != st["leader"]]
    if t.kind == "broker":
        return [broker_node(int(t.arg))]
    if t.kind == "zookeeper":
        return [f"zk{int(t.arg)}"] if t.arg else [f"zk{n}" for n in view.zookeeper]
    if t.kind == "app":
        if t.arg:
            return [app_node(int(t.arg))] if int(t.arg) in view.apps else []
        return [app_node(n) for n in view.apps]
    if t.kind == "random":
        return [broker_node(rng.choice(live))] if live else []
    if t.kind in ("minority", "majority"):
        n = len(view.brokers)
        k = (n - 1) // 2 if t.kind == "minority" else n // 2 + 1
        return sorted(broker_node(b) for b in rng.sample(sorted(view.brokers), max(k, 1)))
    everyone = [broker_node(b) for b in view.brokers] + [f"zk{n}" for n in view.zookeeper] + ["client"]
    if t.kind == "rest":
        return [n for n in everyone if n not in exclude]
    if t.kind == "brokers":
        return [broker_node(b) for b in view.brokers if broker_node(b) not in exclude]
    if t.kind == "servers":  # the other brokers and every ZooKeeper server: everything but the clients
        return [n for n in everyone if n not in exclude and n != "client"]
    if t.kind == "clients":
        return ["client"]
    raise TargetError(f"cannot resolve {t}")


def target_partition(target: Target | str, offsets_partitions: int) -> tuple[str, int] | None:
    """The partition a role target is about (a disk fault fails the log directory holding it): the group's
    offsets partition for ``coordinator:<g>``, the partition of ``leader:``/``followers:``; None otherwise."""
    t = parse_target(target, allow_sets=True) if isinstance(target, str) else target
    if t.kind == "coordinator":
        return OFFSETS_TOPIC, partition_for(t.arg, offsets_partitions)
    if t.kind in ("leader", "followers"):
        topic, p = t.arg.split("/")
        return topic, int(p)
    return None


def node_json(node: str) -> int | str:
    """History form: broker ids as ints, other nodes as their names."""
    return int(node[1:]) if node.startswith("b") else node


def nemesis_value(fault: Any, phase: str, nodes: list[str], peers: list[str], skipped: str | None,
                  detail: dict[str, Any] | None = None) -> dict[str, Any]:
    """A nemesis history line's value for ``fault`` at ``phase`` (start or heal), as the checkers read it."""
    value: dict[str, Any] = {"fault": fault.id, "phase": phase, "kind": fault.kind, "target": fault.target,
                             "nodes": [node_json(n) for n in nodes]}
    if peers:
        value["peers"] = [node_json(n) for n in peers]
        value["direction"] = fault.direction
    if skipped:
        value["skipped"] = skipped
    value.update(detail or {})
    return value
