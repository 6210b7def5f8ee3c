"""A chaos scenario: one YAML file giving the cluster, the workload and the fault mix.

Every key is checked: an unknown or misspelt key, a wrong type or a value out
of range is a :class:`ScenarioError` naming the key (``workload.groups[0].members``),
never ignored.  The cluster's own settings (``cluster.config``) are cluster.yaml
keys and go through :func:`node.config.parse_config`, which checks them the same
way.  docs/chaos.md documents every key.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from chaos.targets import OFFSETS_TOPIC, TargetError, parse_target
from chaos.txn_scenario import TxnSpec, parse_transactions

FAULT_KINDS = ("kill", "terminate", "pause", "expire-session", "partition", "latency", "loss", "truncate",
               "disk-full", "disk-error", "reassign", "reassign-failover")
NETWORK_KINDS = ("partition", "latency", "loss")
DISK_KINDS = ("disk-full", "disk-error")   # each broker's log directories are filesystems of their own (chaos/disks.py)
CLIENTS = ("kafkasim", "confluent-kafka", "kafka-python", "java")   # workload.client: who the producers and members are
DIRECTIONS = ("both", "to", "from")  # to: target -> peer blocked; from: peer -> target blocked


class ScenarioError(ValueError):
    pass


@dataclass(frozen=True)
class Range:
    """A closed range of milliseconds; the schedule draws uniformly from it."""
    lo: int
    hi: int

    def to_json(self) -> list[int]:
        return [self.lo, self.hi]


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int = 3
    replication_factor: int = 3
    # an explicit assignment (replicas[p] = partition p's replicas, the first its preferred leader), as
    # kafka-topics.sh --replica-assignment gives; None = drawn from the run's seed
    replicas: tuple[tuple[int, ...], ...] | None = None


@dataclass(frozen=True)
class ProducerSpec:
    count: int = 1
    topic: str = ""
    rate: float = 20.0            # sends per second, per producer


@dataclass(frozen=True)
class GroupSpec:
    id: str
    topic: str
    members: int = 2
    assignor: str = "range"
    commit_interval_ms: int = 250
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 1000
    crash_interval_ms: Range | None = None   # a member crashes (no LeaveGroup) every so often...
    restart_after_ms: int = 1000               # ...and a new one starts this much later
    stall_interval_ms: Range | None = None   # a member stalls (no heartbeats) every so often...
    stall_ms: int = 0                         # ...for this long, then commits its old positions


@dataclass(frozen=True)
class ProbeSpec:
    groups: int = 0               # probe groups: explicit commit + fetch-committed, no members
    interval_ms: int = 500


DELIVERIES = ("at-least-once", "exactly-once")   # workload.command.delivery: what the app promises


@dataclass(frozen=True)
class CommandSpec:
    """``workload.command``: the user's own application, as processes the run starts, restarts and judges
    from outside (chaos/apps.py)."""
    run: tuple[tuple[str, ...], ...]         # the command lines, one process each (instances copies of each)
    group: str                               # the app's consumer group
    input: str                               # the topic our producers write and the app reads
    output_topic: str | None = None          # where the app writes what it processed (a topic, or a file)
    output_file: str | None = None
    delivery: str = "at-least-once"
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None                   # the processes' working directory (default: where the run starts)
    restart_after_ms: int = 500              # an app that a fault stopped, or that exited, starts again this much later
    observe_interval_ms: int = 100           # the observer's OffsetFetch of the group
    stop_timeout_ms: int = 10000             # SIGTERM, then SIGKILL after this long

    @property
    def instances(self) -> int:
        return len(self.run)


@dataclass(frozen=True)
class FaultSpec:
    kind: str
    target: str
    weight: int = 1
    duration_ms: Range = Range(2000, 4000)
    peer: str = "rest"            # network faults: the other side
    direction: str = "both"
    latency_ms: int = 0
    jitter_ms: int = 0
    loss: float = 0.0
    truncate_bytes: Range = Range(1, 64)


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    source: str
    duration_s: float
    brokers: int
    zookeeper_servers: int
    cluster_config: Mapping[str, Any]
    topics: tuple[TopicSpec, ...]
    producers: ProducerSpec
    groups: tuple[GroupSpec, ...]
    probes: ProbeSpec
    faults: tuple[FaultSpec, ...]
    fault_start_ms: int = 3000
    fault_interval_ms: Range = Range(2000, 4000)
    quiet_end_ms: int = 3000      # no fault starts this close to the end
    network: str = "proxy"
    client: str = "kafkasim"      # kafkasim (gRPC), or a real Kafka client on the Kafka listeners
    raw: Mapping[str, Any] = field(default_factory=dict)
    # faults.schedule: explicit faults (chaos/schedule.py's Fault fields, as dicts) instead of a drawn mix;
    # what `kafkasim sim shrink` prints
    schedule: tuple[Mapping[str, Any], ...] | None = None
    # cluster.controller: this broker starts alone and wins the first controller election, then the others start
    controller: int | None = None
    # workload.command: the user's application (None: only our own workloads)
    command: CommandSpec | None = None
    # workload.transactions: exactly-once consume-transform-produce pipelines (chaos/txn_scenario.py)
    transactions: TxnSpec | None = None
    log_dirs: int = 1          # cluster.log.dirs: data directories per broker
    disk_size_mb: int = 64     # cluster.disk.size.mb: with disk faults, each directory's filesystem

    def disk_fault_kinds(self) -> set[str]:
        """The disk fault kinds the scenario may start (its mix's or its schedule's)."""
        return ({m.kind for m in self.faults} | {d["kind"] for d in self.schedule or ()}) & set(DISK_KINDS)

    def with_duration(self, duration_s: float) -> "Scenario":
        from dataclasses import replace
        return replace(self, duration_s=duration_s)


# ---------------------------------------------------------------------------- checking


class _Reader:
    """Pops keys off one mapping, checking types; leftovers are unknown keys."""

    def __init__(self, data: Any, where: str, source: str):
        if not isinstance(data, Mapping):
            raise ScenarioError(f"{source}: {where or 'scenario'}: expected a mapping, got {type(data).__name__}")
        self.data = dict(data)
        self.where = where
        self.source = source

    def key(self, k: str) -> str:
        return f"{self.where}.{k}" if self.where else k

    def fail(self, k: str, msg: str) -> None:
        raise ScenarioError(f"{self.source}: {self.key(k)}: {msg}")

    def get(self, k: str, kind: type | tuple, default: Any = ..., *, lo: float | None = None,
            hi: float | None = None, choices: tuple | None = None) -> Any:
        if k not in self.data:
            if default is ...:
                self.fail(k, "required")
            return default
        v = self.data.pop(k)
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if isinstance(v, bool) and bool not in kinds or not isinstance(v, kinds):
            self.fail(k, f"expected {' or '.join(t.__name__ for t in kinds)}, got {v!r}")
        if choices is not None and v not in choices:
            self.fail(k, f"{v!r} is not one of {', '.join(map(str, choices))}")
        if lo is not None and v < lo:
            self.fail(k, f"{v} is below {lo}")
        if hi is not None and v > hi:
            self.fail(k, f"{v} is above {hi}")
        return v

    def range(self, k: str, default: Any = ...) -> Range | None:
        if k not in self.data:
            if default is ...:
                self.fail(k, "required")
            return default
        v = self.data.pop(k)
        if isinstance(v, int) and not isinstance(v, bool):
            v = [v, v]
        if (not isinstance(v, list) or len(v) != 2 or any(isinstance(x, bool) or not isinstance(x, int) for x in v)
                or v[0] < 0 or v[0] > v[1]):
            self.fail(k, f"expected milliseconds or [min, max] with 0 <= min <= max, got {v!r}")
        return Range(v[0], v[1])

    def done(self, known: tuple[str, ...]) -> None:
        for k in self.data:
            close = difflib.get_close_matches(str(k), known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else f" (known: {', '.join(known)})"
            self.fail(str(k), f"unknown key{hint}")


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    r = _Reader(data, "", source)
    name = r.get("name", str)
    description = r.get("description", str, "")
    duration_s = r.get("duration.s", (int, float), 60.0, lo=1)
    network = r.get("network", str, "proxy", choices=("proxy", "netns"))

    c = _Reader(r.get("cluster", dict, {}), "cluster", source)
    brokers = c.get("brokers", int, 3, lo=1, hi=9)
    zk_servers = c.get("zookeeper.servers", int, 1, choices=(1, 3))
    config = c.get("config", dict, {})
    controller = c.get("controller", int, None, lo=1, hi=brokers)
    log_dirs = c.get("log.dirs", int, 1, lo=1, hi=4)
    disk_size_mb = c.get("disk.size.mb", int, 64, lo=4, hi=4096)
    c.done(("brokers", "zookeeper.servers", "config", "controller", "log.dirs", "disk.size.mb"))
    for k in ("brokers", "run.dir", "zookeeper.connect", "zookeeper.embedded.servers"):
        if k in config:
            raise ScenarioError(f"{source}: cluster.config.{k}: set by the chaos runner "
                                f"(use cluster.brokers / cluster.zookeeper.servers)")

    topics = []
    raw_topics = r.get("topics", list, [])
    for i, t in enumerate(raw_topics):
        topics.append(_topic(_Reader(t, f"topics[{i}]", source), brokers))
    if len({t.name for t in topics}) != len(topics):
        raise ScenarioError(f"{source}: topics: a topic is listed twice")
    topic_names = {t.name for t in topics}
    offsets = next((t for t in topics if t.name == OFFSETS_TOPIC), None)
    if offsets is not None:
        for key, want in (("offsets.topic.num.partitions", offsets.partitions),
                          ("offsets.topic.replication.factor", offsets.replication_factor)):
            if key in config and config[key] != want:
                raise ScenarioError(f"{source}: cluster.config.{key}: {config[key]!r}, but topics lists "
                                    f"{OFFSETS_TOPIC} with {want}")
        if config.get("kafkasim.offsets.topic.eager.create"):
            raise ScenarioError(f"{source}: cluster.config.kafkasim.offsets.topic.eager.create: must be false "
                                f"when topics lists {OFFSETS_TOPIC} (the run creates it)")

    w = _Reader(r.get("workload", dict, {}), "workload", source)
    pr = _Reader(w.get("producers", dict, {}), "workload.producers", source)
    producers = ProducerSpec(pr.get("count", int, 1, lo=0, hi=64), pr.get("topic", str, ""),
                             pr.get("rate", (int, float), 20.0, lo=0.1, hi=10000))
    pr.done(("count", "topic", "rate"))
    if producers.count and producers.topic not in topic_names:
        raise ScenarioError(f"{source}: workload.producers.topic: {producers.topic!r} is not in topics")
    groups = []
    for i, g in enumerate(w.get("groups", list, [])):
        gr = _Reader(g, f"workload.groups[{i}]", source)
        spec = GroupSpec(
            id=gr.get("id", str), topic=gr.get("topic", str), members=gr.get("members", int, 2, lo=1, hi=100),
            assignor=gr.get("assignor", str, "range", choices=("range", "roundrobin", "sticky", "cooperative-sticky")),
            commit_interval_ms=gr.get("commit.interval.ms", int, 250, lo=10),
            session_timeout_ms=gr.get("session.timeout.ms", int, 6000, lo=100),
            heartbeat_interval_ms=gr.get("heartbeat.interval.ms", int, 1000, lo=10),
            crash_interval_ms=gr.range("crash.interval.ms", None),
            restart_after_ms=gr.get("restart.after.ms", int, 1000, lo=0),
            stall_interval_ms=gr.range("stall.interval.ms", None),
            stall_ms=gr.get("stall.ms", int, 0, lo=0))
        gr.done(("id", "topic", "members", "assignor", "commit.interval.ms", "session.timeout.ms",
                 "heartbeat.interval.ms", "crash.interval.ms", "restart.after.ms", "stall.interval.ms", "stall.ms"))
        if spec.topic not in topic_names:
            raise ScenarioError(f"{source}: workload.groups[{i}].topic: {spec.topic!r} is not in topics")
        if spec.heartbeat_interval_ms >= spec.session_timeout_ms:
            raise ScenarioError(f"{source}: workload.groups[{i}].heartbeat.interval.ms: must be below "
                                f"session.timeout.ms ({spec.session_timeout_ms})")
        if spec.stall_interval_ms is not None and spec.stall_ms <= 0:
            raise ScenarioError(f"{source}: workload.groups[{i}].stall.ms: required with stall.interval.ms")
        if any(g2.id == spec.id for g2 in groups):
            raise ScenarioError(f"{source}: workload.groups[{i}].id: duplicate group id {spec.id!r}")
        groups.append(spec)
    pb = _Reader(w.get("probes", dict, {}), "workload.probes", source)
    probes = ProbeSpec(pb.get("groups", int, 0, lo=0, hi=16), pb.get("interval.ms", int, 500, lo=10))
    pb.done(("groups", "interval.ms"))
    client = w.get("client", str, "kafkasim", choices=CLIENTS)
    command = _command(w.get("command", dict, None), source, topic_names)
    raw_txn = w.get("transactions", dict, None)
    transactions = None if raw_txn is None else parse_transactions(
        _Reader(raw_txn, "workload.transactions", source), source, topic_names,
        {g.id for g in groups} | ({command.group} if command else set()), lambda rd, k: rd.range(k, None))
    w.done(("producers", "groups", "probes", "client", "command", "transactions"))
    if transactions is not None and producers.count and producers.topic != transactions.input:
        raise ScenarioError(f"{source}: workload.producers.topic: {producers.topic!r}, but the pipelines read "
                            f"{transactions.input!r} (our producers write their input)")
    if command is not None:
        if network != "proxy":
            raise ScenarioError(f"{source}: workload.command: needs network: proxy")
        if producers.count and producers.topic != command.input:
            raise ScenarioError(f"{source}: workload.producers.topic: {producers.topic!r}, but the command reads "
                                f"{command.input!r} (our producers write the app's input)")
        if any(g.id == command.group for g in groups):
            raise ScenarioError(f"{source}: workload.command.group: {command.group!r} is also a workload group")
    if client != "kafkasim":
        for i, g in enumerate(groups):
            if g.crash_interval_ms is not None or g.stall_interval_ms is not None:
                raise ScenarioError(f"{source}: workload.groups[{i}]: crash.interval.ms and stall.interval.ms "
                                    f"need the kafkasim client (workload.client is {client})")
            if g.assignor not in ("range", "roundrobin"):
                raise ScenarioError(f"{source}: workload.groups[{i}].assignor: {client} members take "
                                    f"range or roundrobin")
        if network != "proxy":
            raise ScenarioError(f"{source}: workload.client: {client} needs network: proxy")

    f = _Reader(r.get("faults", dict, {}), "faults", source)
    start = f.get("start.after.ms", int, 3000, lo=0)
    interval = f.range("interval.ms", Range(2000, 4000))
    quiet = f.get("quiet.end.ms", int, 3000, lo=0)
    faults = []
    group_ids = {g.id for g in groups} | ({command.group} if command else set())
    txn_ids = set(transactions.transactional_ids()) if transactions else set()
    apps = command.instances if command else 0
    for i, m in enumerate(f.get("mix", list, [])):
        where = f"faults.mix[{i}]"
        fr = _Reader(m, where, source)
        kind = fr.get("kind", str, choices=FAULT_KINDS)
        target = fr.get("target", str)
        spec = FaultSpec(
            kind=kind, target=target, weight=fr.get("weight", int, 1, lo=1),
            duration_ms=fr.range("duration.ms", Range(2000, 4000)),
            peer=fr.get("peer", str, "rest"), direction=fr.get("direction", str, "both", choices=DIRECTIONS),
            latency_ms=fr.get("latency.ms", int, 0, lo=0), jitter_ms=fr.get("jitter.ms", int, 0, lo=0),
            loss=fr.get("loss", (int, float), 0.0, lo=0, hi=1),
            truncate_bytes=fr.range("truncate.bytes", Range(1, 64)))
        fr.done(("kind", "target", "weight", "duration.ms", "peer", "direction", "latency.ms", "jitter.ms", "loss",
                 "truncate.bytes"))
        for key, value in (("target", spec.target), ("peer", spec.peer)):
            try:
                t = parse_target(value, allow_sets=key == "peer" or kind in NETWORK_KINDS)
            except TargetError as e:
                raise ScenarioError(f"{source}: {where}.{key}: {e}") from None
            if t.kind == "coordinator" and t.arg not in group_ids:
                raise ScenarioError(f"{source}: {where}.{key}: group {t.arg!r} is not a workload group")
            if t.kind in ("leader", "followers") and t.arg.split("/")[0] not in topic_names | {"__consumer_offsets"}:
                raise ScenarioError(f"{source}: {where}.{key}: topic {t.arg.split('/')[0]!r} is not in topics")
            _check_txn_target(t, txn_ids, f"{source}: {where}.{key}")
            _check_app_target(t, kind, apps, f"{source}: {where}.{key}")
            _check_reassign_target(t, kind, key, f"{source}: {where}.{key}")
        if kind not in NETWORK_KINDS and (spec.peer != "rest" or spec.direction != "both"):
            raise ScenarioError(f"{source}: {where}: peer/direction only apply to network faults")
        if kind == "latency" and spec.latency_ms == 0 and spec.jitter_ms == 0:
            raise ScenarioError(f"{source}: {where}.latency.ms: a latency fault needs latency.ms or jitter.ms")
        if kind == "loss" and spec.loss <= 0:
            raise ScenarioError(f"{source}: {where}.loss: a loss fault needs loss > 0")
        faults.append(spec)
    schedule = None
    raw_schedule = f.get("schedule", list, None)
    if raw_schedule is not None:
        if faults:
            raise ScenarioError(f"{source}: faults.schedule: give either a mix or a schedule, not both")
        schedule = tuple(_scheduled(i, d, source, group_ids, topic_names, apps, txn_ids)
                         for i, d in enumerate(raw_schedule))
    f.done(("start.after.ms", "interval.ms", "quiet.end.ms", "mix", "schedule"))
    r.done(("name", "description", "duration.s", "network", "cluster", "topics", "workload", "faults"))
    kinds = {m.kind for m in faults} | {d["kind"] for d in schedule or ()}
    if kinds & set(DISK_KINDS) and network != "proxy":
        raise ScenarioError(f"{source}: faults: disk faults need network: proxy (the brokers' directories are "
                            f"mounted on this machine)")
    return Scenario(name, description, source, float(duration_s), brokers, zk_servers, dict(config), tuple(topics),
                    producers, tuple(groups), probes, tuple(faults), start, interval, quiet, network, client,
                    dict(data) if isinstance(data, Mapping) else {}, schedule, controller, command, transactions,
                    log_dirs, disk_size_mb)


def _topic(tr: _Reader, brokers: int) -> TopicSpec:
    """One entry of ``topics``: a name and a partition count and replication factor, or an explicit
    ``replicas`` assignment (then the count and factor, if given, must agree with it).  Only
    ``__consumer_offsets`` with ``replicas`` may name the offsets topic: the run then creates it itself."""
    name = tr.get("name", str)
    raw = tr.get("replicas", list, None)
    partitions = tr.get("partitions", int, None, lo=1, hi=1000)
    rf = tr.get("replication.factor", int, None, lo=1, hi=brokers)
    tr.done(("name", "partitions", "replication.factor", "replicas"))
    if raw is None:
        if name == OFFSETS_TOPIC:
            tr.fail("name", f"{OFFSETS_TOPIC} is listed only with an explicit replicas assignment")
        return TopicSpec(name, 3 if partitions is None else partitions, min(3, brokers) if rf is None else rf)
    if not raw or any(not isinstance(r, list) or not r for r in raw):
        tr.fail("replicas", f"expected a non-empty list of non-empty lists of broker ids, got {raw!r}")
    for p, r in enumerate(raw):
        if any(isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= brokers for b in r):
            tr.fail("replicas", f"partition {p}: {r!r}: broker ids are 1..{brokers}")
        if len(set(r)) != len(r):
            tr.fail("replicas", f"partition {p}: {r!r} lists a broker twice")
        if len(r) != len(raw[0]):
            tr.fail("replicas", f"partition {p}: {r!r}: every partition has the same number of replicas")
    if partitions is not None and partitions != len(raw):
        tr.fail("partitions", f"{partitions}, but replicas lists {len(raw)} partitions")
    if rf is not None and rf != len(raw[0]):
        tr.fail("replication.factor", f"{rf}, but replicas lists {len(raw[0])} per partition")
    return TopicSpec(name, len(raw), len(raw[0]), tuple(tuple(r) for r in raw))


def _scheduled(i: int, d: Any, source: str, group_ids: set[str], topic_names: set[str],
               apps: int = 0, txn_ids: set[str] = frozenset()) -> dict[str, Any]:
    """One fault of ``faults.schedule``: {at.ms, heal.at.ms, kind, target, seed, peer, direction, latency.ms,
    jitter.ms, loss, truncate.bytes} -> chaos/schedule.py's Fault fields."""
    where = f"faults.schedule[{i}]"
    fr = _Reader(d, where, source)
    kind = fr.get("kind", str, choices=FAULT_KINDS)
    net = kind in NETWORK_KINDS
    out: dict[str, Any] = {
        "id": i, "at_ms": fr.get("at.ms", int, lo=0), "heal_at_ms": fr.get("heal.at.ms", int, lo=0), "kind": kind,
        "target": fr.get("target", str), "seed": fr.get("seed", int, 0, lo=0)}
    if net:
        out["peer"] = fr.get("peer", str, "rest")
        out["direction"] = fr.get("direction", str, "both", choices=DIRECTIONS)
    if kind == "latency":
        out["latency_ms"] = fr.get("latency.ms", int, 0, lo=0)
        out["jitter_ms"] = fr.get("jitter.ms", int, 0, lo=0)
    if kind == "loss":
        out["loss"] = fr.get("loss", (int, float), 0.1, lo=0, hi=1)
    if kind == "truncate":
        out["truncate_bytes"] = fr.get("truncate.bytes", int, 1, lo=1)
    fr.done(("at.ms", "heal.at.ms", "kind", "target", "seed", "peer", "direction", "latency.ms", "jitter.ms", "loss",
             "truncate.bytes"))
    if out["heal_at_ms"] < out["at_ms"]:
        raise ScenarioError(f"{source}: {where}.heal.at.ms: before at.ms")
    for key in ("target", "peer"):
        if key not in out:
            continue
        try:
            t = parse_target(out[key], allow_sets=key == "peer" or net)
        except TargetError as e:
            raise ScenarioError(f"{source}: {where}.{key}: {e}") from None
        if t.kind == "coordinator" and t.arg not in group_ids:
            raise ScenarioError(f"{source}: {where}.{key}: group {t.arg!r} is not a workload group")
        if t.kind in ("leader", "followers") and t.arg.split("/")[0] not in topic_names | {"__consumer_offsets"}:
            raise ScenarioError(f"{source}: {where}.{key}: topic {t.arg.split('/')[0]!r} is not in topics")
        _check_txn_target(t, txn_ids, f"{source}: {where}.{key}")
        _check_app_target(t, kind, apps, f"{source}: {where}.{key}")
        _check_reassign_target(t, kind, key, f"{source}: {where}.{key}")
    return out


def _check_txn_target(t: Any, txn_ids: set[str], where: str) -> None:
    if t.kind == "txn-coordinator" and t.arg not in txn_ids:
        known = ", ".join(sorted(txn_ids)) or "none: the workload has no transactions"
        raise ScenarioError(f"{where}: {t.arg!r} is not a pipeline's transactional id ({known})")


APP_KINDS = ("kill", "terminate", "pause")   # what a fault can do to the user's application processes


def _check_reassign_target(t: Any, kind: str, key: str, where: str) -> None:
    """A ``reassign`` fault names its partition by its leader: ``leader:<topic>/<p>``."""
    if kind in ("reassign", "reassign-failover") and key == "target" and t.kind != "leader":
        raise ScenarioError(f"{where}: a reassign fault's target is leader:<topic>/<partition>")


def _check_app_target(t: Any, kind: str, apps: int, where: str) -> None:
    if t.kind != "app":
        return
    if not apps:
        raise ScenarioError(f"{where}: {t} names the application, but the workload has no command")
    if t.arg and not 1 <= int(t.arg) <= apps:
        raise ScenarioError(f"{where}: {t}: the command runs app:1..app:{apps}")
    if kind not in APP_KINDS:
        raise ScenarioError(f"{where}: {kind} cannot be aimed at the application (only {', '.join(APP_KINDS)})")


def _command(data: Any, source: str, topic_names: set[str]) -> CommandSpec | None:
    """``workload.command``: ``run`` (a command line, split as a shell would but run without one, or a list of
    them: one process each), ``instances`` (copies of each), ``group``, ``input``, ``output.topic`` or
    ``output.file``, ``delivery``, ``env``, ``cwd``, ``restart.after.ms``, ``observe.interval.ms``,
    ``stop.timeout.ms``."""
    import shlex
    if data is None:
        return None
    r = _Reader(data, "workload.command", source)
    raw = r.get("run", (str, list))
    lines = [raw] if isinstance(raw, str) else raw
    if not lines or any(not isinstance(x, str) or not x.strip() for x in lines):
        r.fail("run", f"expected a command line or a non-empty list of them, got {raw!r}")
    try:
        argvs = [tuple(shlex.split(x)) for x in lines]
    except ValueError as e:
        r.fail("run", f"cannot split {raw!r}: {e}")
    instances = r.get("instances", int, 1, lo=1, hi=16)
    group = r.get("group", str)
    input_topic = r.get("input", str)
    out_topic = r.get("output.topic", str, None)
    out_file = r.get("output.file", str, None)
    delivery = r.get("delivery", str, "at-least-once", choices=DELIVERIES)
    env = r.get("env", dict, {})
    cwd = r.get("cwd", str, None)
    spec = CommandSpec(
        run=tuple(a for a in argvs for _ in range(instances)), group=group, input=input_topic,
        output_topic=out_topic, output_file=out_file, delivery=delivery,
        env=tuple((str(k), str(v)) for k, v in sorted(env.items())), cwd=cwd,
        restart_after_ms=r.get("restart.after.ms", int, 500, lo=0),
        observe_interval_ms=r.get("observe.interval.ms", int, 100, lo=10),
        stop_timeout_ms=r.get("stop.timeout.ms", int, 10000, lo=100))
    r.done(("run", "instances", "group", "input", "output.topic", "output.file", "delivery", "env", "cwd",
            "restart.after.ms", "observe.interval.ms", "stop.timeout.ms"))
    if input_topic not in topic_names:
        r.fail("input", f"{input_topic!r} is not in topics")
    if out_topic is not None and out_file is not None:
        r.fail("output.topic", "give output.topic or output.file, not both")
    if out_topic is not None and out_topic not in topic_names:
        r.fail("output.topic", f"{out_topic!r} is not in topics")
    if out_topic == input_topic:
        r.fail("output.topic", "must differ from input")
    if instances * len(argvs) > 16:
        r.fail("instances", f"{instances * len(argvs)} processes in all; at most 16")
    return spec


def read_yaml(path: Path) -> Any:
    """A scenario file's YAML; ScenarioError naming the file when it cannot be read or parsed."""
    try:
        return yaml.safe_load(path.read_text())
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ScenarioError(f"{path}: not valid YAML: {e}") from None


def load_scenario(path: Path | str) -> Scenario:
    path = Path(path)
    return parse_scenario(read_yaml(path), str(path))


SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios"


def find_in(directory: Path, name_or_path: str, what: str = "scenario") -> Path:
    """A path, or the name of a file in ``directory`` (with or without .yaml)."""
    p = Path(name_or_path)
    if p.exists():
        return p
    for cand in (directory / name_or_path, directory / f"{name_or_path}.yaml"):
        if cand.exists():
            return cand
    known = ", ".join(sorted(q.stem for q in directory.glob("*.yaml")))
    raise ScenarioError(f"no {what} {name_or_path!r} (a file, or one of: {known})")


def find_scenario(name_or_path: str) -> Path:
    """A path, or the name of a file in scenarios/ (with or without .yaml)."""
    return find_in(SCENARIO_DIR, name_or_path)


def list_scenarios() -> list[Scenario]:
    return [load_scenario(p) for p in sorted(SCENARIO_DIR.glob("*.yaml"))]
