"""A simulated run as a file: the options and an explicit fault schedule (what ``sim shrink`` prints).

Two forms.  When every fault is of a kind chaos runs have, ``sim shrink`` prints a **chaos scenario**
(docs/chaos.md) with ``faults.schedule``, which both ``kafkasim chaos run FILE`` and ``kafkasim sim run
--scenario FILE`` accept (the simulator takes its topic ``events``, groups ``g1``..``gN`` and a schedule,
and refuses what it would not honour, naming the key).  Otherwise, the simulator's own form:

    seed: 12
    brokers: 3
    groups: 1
    duration.s: 30
    planted_bugs: [hw-ignores-lagging-isr]
    faults:
      - {at_ms: 3000, heal_at_ms: 5200, kind: kill, target: "coordinator:g1", seed: 3141}

``kafkasim sim run --scenario FILE`` runs it.  Every key is checked; an unknown one is an error
naming it.  A fault's ``id`` defaults to its position, its ``seed`` to 0.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from chaos.schedule import Fault
from chaos.targets import TargetError, parse_target
from sim import bugs
from sim.faults import KINDS
from sim.run import SimOptions

KEYS = {"seed", "brokers", "groups", "members", "duration.s", "planted_bugs", "partitions", "producers", "rate",
        "faults", "offsets_partitions", "log_dirs"}
# the transactional workload's options (SimOptions' fields of the same names), in the simulator's own form only
TXN_KEYS = ("transactions", "txn_max_records", "txn_timeout_ms", "txn_readers", "zombie_every_ms", "zombie_ms",
            "txn_crash_every_ms")
KEYS |= set(TXN_KEYS)
FAULT_KEYS = {"id", "at_ms", "heal_at_ms", "kind", "target", "seed", "peer", "direction", "latency_ms",
              "truncate_bytes"}


# the chaos scenario's cluster.config keys the simulator honours: cluster.yaml key -> (SimConfig field, type)
CLUSTER_SETTINGS = {
    "zookeeper.session.timeout.ms": ("session_timeout_ms", int),
    "zookeeper.embedded.tick.time.ms": ("zk_tick_ms", int),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", int),
    "min.insync.replicas": ("min_insync_replicas", int),
    "unclean.leader.election.enable": ("unclean_leader_election", bool),
    "offsets.topic.replication.factor": ("offsets_replication_factor", int),
    "group.initial.rebalance.delay.ms": ("initial_rebalance_delay_ms", int),   # (0 allowed)
    "group.min.session.timeout.ms": ("min_session_timeout_ms", int),
}


class SimScenarioError(ValueError):
    pass


def _fault(i: int, d: Any) -> Fault:
    where = f"faults[{i}]"
    if not isinstance(d, dict):
        raise SimScenarioError(f"{where}: a mapping, got {d!r}")
    unknown = sorted(set(d) - FAULT_KEYS)
    if unknown:
        raise SimScenarioError(f"{where}.{unknown[0]}: unknown key (known: {', '.join(sorted(FAULT_KEYS))})")
    for k in ("at_ms", "heal_at_ms", "kind", "target"):
        if k not in d:
            raise SimScenarioError(f"{where}.{k}: missing")
    if d["kind"] not in KINDS:
        raise SimScenarioError(f"{where}.kind: {d['kind']!r} is not one of {', '.join(KINDS)}")
    try:
        parse_target(str(d["target"]))
        if d.get("peer") is not None:
            parse_target(str(d["peer"]), allow_sets=True)
    except TargetError as e:
        raise SimScenarioError(f"{where}: {e}") from None
    if not (isinstance(d["at_ms"], int) and isinstance(d["heal_at_ms"], int) and 0 <= d["at_ms"] <= d["heal_at_ms"]):
        raise SimScenarioError(f"{where}: at_ms and heal_at_ms are ints with 0 <= at_ms <= heal_at_ms")
    return Fault(id=d.get("id", i), at_ms=d["at_ms"], heal_at_ms=d["heal_at_ms"], kind=d["kind"],
                 target=str(d["target"]), seed=int(d.get("seed", 0)), peer=d.get("peer"),
                 direction=d.get("direction"), latency_ms=d.get("latency_ms"), truncate_bytes=d.get("truncate_bytes"))


def _member_settings(g: Any) -> tuple:
    return (g.members, g.commit_interval_ms, g.stall_interval_ms, g.stall_ms, g.session_timeout_ms,
            g.heartbeat_interval_ms)


def from_chaos(doc: dict, seed: int | None, source: str) -> SimOptions:
    """A chaos scenario with ``faults.schedule``, as a simulated run."""
    from chaos.scenario import ScenarioError, parse_scenario
    from sim.run import OFFSETS, TOPIC
    try:
        sc = parse_scenario(doc, source)
    except ScenarioError as e:
        raise SimScenarioError(str(e)) from None

    def refuse(key: str, why: str) -> None:
        raise SimScenarioError(f"{source}: {key}: {why} (the simulator runs its own cluster settings)")
    offsets = next((t for t in sc.topics if t.name == OFFSETS), None)
    derived = {"offsets.topic.num.partitions"} | ({"kafkasim.offsets.topic.eager.create"} if offsets else set())
    other = sorted(set(sc.cluster_config) - set(CLUSTER_SETTINGS) - derived)
    if other:
        refuse(f"cluster.config.{other[0]}", f"not taken by the simulator (it takes "
               f"{', '.join(sorted(CLUSTER_SETTINGS))}, offsets.topic.num.partitions)")
    config = {}
    for key, (fld, kind) in CLUSTER_SETTINGS.items():
        if key in sc.cluster_config:
            v = sc.cluster_config[key]
            lo = 0 if fld == "initial_rebalance_delay_ms" else 1
            if isinstance(v, bool) != (kind is bool) or not isinstance(v, kind) or (kind is int and v < lo):
                refuse(f"cluster.config.{key}", f"expected {'true or false' if kind is bool else f'an int >= {lo}'}, "
                       f"got {v!r}")
            config[fld] = v
    if sc.zookeeper_servers != 1 or sc.network != "proxy" or sc.client != "kafkasim" or sc.probes.groups:
        refuse("cluster.zookeeper.servers / network / workload.client / workload.probes",
               "the simulator has one ZooKeeper server, its own network, kafkasim members and no probes")
    topics = [t for t in sc.topics if t.name != OFFSETS]
    if len(topics) != 1 or topics[0].name != TOPIC:
        refuse("topics", f"the simulator's workload has one topic, {TOPIC!r} (and {OFFSETS} with replicas)")
    assignments = {t.name: t.replicas for t in sc.topics if t.replicas}
    for i, g in enumerate(sc.groups):
        if g.id != f"g{i + 1}" or g.topic != TOPIC:
            refuse(f"workload.groups[{i}].id", f"the simulator's groups are g1..gN on {TOPIC!r}")
        if g.crash_interval_ms is not None or g.assignor != "range":
            refuse(f"workload.groups[{i}]", "the simulator's members use range and do not crash")
        if i and _member_settings(g) != _member_settings(sc.groups[0]):
            refuse(f"workload.groups[{i}]", "the simulator's groups share one set of member settings "
                   "(members, commit, stall, session and heartbeat), as workload.groups[0] gives them")
    if sc.schedule is None:
        refuse("faults.mix", "the simulator takes faults.schedule (or its own --faults)")
    g0 = sc.groups[0] if sc.groups else None
    return SimOptions(
        seed=0 if seed is None else seed, brokers=sc.brokers, groups=len(sc.groups),
        members=g0.members if g0 else 2, duration_s=sc.duration_s, partitions=topics[0].partitions,
        producers=sc.producers.count, rate=sc.producers.rate,
        commit_interval_ms=g0.commit_interval_ms if g0 else 250,
        session_timeout_ms=g0.session_timeout_ms if g0 else 6000,
        heartbeat_interval_ms=g0.heartbeat_interval_ms if g0 else 1000,
        stall_every_ms=(g0.stall_interval_ms.lo, g0.stall_interval_ms.hi) if g0 and g0.stall_interval_ms else None,
        stall_ms=g0.stall_ms if g0 else 0, schedule=[Fault(**d) for d in sc.schedule],
        offsets_partitions=offsets.partitions if offsets else int(sc.cluster_config.get("offsets.topic.num.partitions", 10)),
        config={**config, **({"log_dirs": sc.log_dirs} if sc.log_dirs != 1 else {})}, assignments=assignments,
        controller=sc.controller)


def parse(doc: Any, seed: int | None = None, source: str = "<scenario>") -> SimOptions:
    if not isinstance(doc, dict):
        raise SimScenarioError("a simulation scenario is a mapping")
    if "name" in doc:
        return from_chaos(doc, seed, source)
    unknown = sorted(set(doc) - KEYS)
    if unknown:
        raise SimScenarioError(f"{unknown[0]}: unknown key (known: {', '.join(sorted(KEYS))})")
    try:
        planted = bugs.check(tuple(doc.get("planted_bugs") or ()))
    except ValueError as e:
        raise SimScenarioError(f"planted_bugs: {e}") from None
    faults = [_fault(i, d) for i, d in enumerate(doc.get("faults") or [])]
    opts = SimOptions(seed=int(doc.get("seed", 0) if seed is None else seed), brokers=int(doc.get("brokers", 3)),
                      groups=int(doc.get("groups", 1)), members=int(doc.get("members", 2)),
                      duration_s=float(doc.get("duration.s", 30)), bugs=planted,
                      partitions=int(doc.get("partitions", 3)), producers=int(doc.get("producers", 1)),
                      rate=float(doc.get("rate", 20.0)), schedule=faults,
                      offsets_partitions=int(doc.get("offsets_partitions", 10)))
    log_dirs = doc.get("log_dirs", 1)
    if isinstance(log_dirs, bool) or not isinstance(log_dirs, int) or log_dirs < 1:
        raise SimScenarioError(f"log_dirs: an int >= 1, got {log_dirs!r}")
    if log_dirs != 1:
        opts.config["log_dirs"] = log_dirs
    txn = {k: doc[k] for k in TXN_KEYS if k in doc}
    for k in ("zombie_every_ms", "txn_crash_every_ms"):
        if txn.get(k) is not None:
            if not (isinstance(txn[k], list) and len(txn[k]) == 2 and all(isinstance(x, int) for x in txn[k])):
                raise SimScenarioError(f"{k}: [lo, hi] in ms, or null")
            txn[k] = tuple(txn[k])
    for k in ("transactions", "txn_max_records", "txn_timeout_ms", "txn_readers", "zombie_ms"):
        if k in txn and (not isinstance(txn[k], int) or txn[k] < 0):
            raise SimScenarioError(f"{k}: an int >= 0")
    opts = replace(opts, **txn)
    if opts.brokers < 1 or opts.groups < 0 or opts.duration_s <= 0:
        raise SimScenarioError("brokers >= 1, groups >= 0 and duration.s > 0")
    return opts


def load(path: Path | str, seed: int | None = None) -> SimOptions:
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise SimScenarioError(f"{path}: {e}") from None
    return parse(doc, seed, str(path))


def dump(opts: SimOptions, faults: list[Fault], comment: str = "") -> str:
    """The chaos scenario form when every fault's kind is a chaos run's (and there is no transactional
    workload), else the simulator's own."""
    from sim.faults import CHAOS_KINDS
    from sim.run import TOPIC
    head = "".join(f"# {line}\n" for line in comment.splitlines()) if comment else ""
    if all(f.kind in CHAOS_KINDS for f in faults) and not opts.transactions:
        group: dict[str, Any] = {"topic": TOPIC, "members": opts.members, "commit.interval.ms": opts.commit_interval_ms,
                                 "session.timeout.ms": opts.session_timeout_ms,
                                 "heartbeat.interval.ms": opts.heartbeat_interval_ms}
        if opts.stall_every_ms is not None and opts.stall_ms:
            group.update({"stall.interval.ms": list(opts.stall_every_ms), "stall.ms": opts.stall_ms})
        sched = []
        for f in faults:
            d: dict[str, Any] = {"at.ms": f.at_ms, "heal.at.ms": f.heal_at_ms, "kind": f.kind, "target": f.target,
                                 "seed": f.seed}
            if f.peer is not None:
                d.update({"peer": f.peer, "direction": f.direction or "both"})
            if f.truncate_bytes is not None:
                d["truncate.bytes"] = f.truncate_bytes
            sched.append(d)
        doc: dict[str, Any] = {
            "name": f"sim-{opts.seed}", "description": f"simulated seed {opts.seed}, shrunk",
            "duration.s": opts.duration_s,
            "cluster": {"brokers": opts.brokers, **({"config": {"offsets.topic.num.partitions": opts.offsets_partitions}}
                                                   if opts.offsets_partitions != 10 else {}),
                        **({"log.dirs": opts.config["log_dirs"]} if opts.config.get("log_dirs", 1) != 1 else {})},
            "topics": [{"name": TOPIC, "partitions": opts.partitions, "replication.factor": min(3, opts.brokers)}],
            "workload": {"producers": {"count": opts.producers, "topic": TOPIC, "rate": opts.rate},
                         "groups": [{"id": f"g{i}", **group} for i in range(1, opts.groups + 1)]},
            "faults": {"schedule": sched}}
        bugs = "".join(f" --plant-bug {b}" for b in opts.bugs)
        from node.server.bugs import BUGS as CHAOS_BUGS
        head += f"# kafkasim sim run --scenario FILE --seed {opts.seed}{bugs}\n"
        if all(b in CHAOS_BUGS for b in opts.bugs):
            head += f"# kafkasim chaos run FILE --seed {opts.seed}{bugs}\n"
        else:
            head += ("# kafkasim chaos run FILE (its planted bugs exist only in the simulator: a chaos run "
                     "runs the schedule without them)\n")
        return head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)
    doc = {"seed": opts.seed, "brokers": opts.brokers, "groups": opts.groups,
           "members": opts.members, "duration.s": opts.duration_s,
           "planted_bugs": list(opts.bugs), "partitions": opts.partitions,
           "producers": opts.producers, "rate": opts.rate, "offsets_partitions": opts.offsets_partitions,
           **({"log_dirs": opts.config["log_dirs"]} if opts.config.get("log_dirs", 1) != 1 else {})}
    if opts.transactions:
        for k in TXN_KEYS:
            v = getattr(opts, k)
            doc[k] = list(v) if isinstance(v, tuple) else v
    doc["faults"] = [f.to_json() for f in faults]
    return head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)
