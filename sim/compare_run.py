"""A ``kafkasim compare`` scenario (compare/scenario.py) run in the simulator, recorded as compare records a side.

    obs = SimCompareRun(load_compare(find_compare("controller-kill")), seed=1).run()
    entries(obs)        # compare/normalize.py reads it as it reads a real side's observations.json

The run does what compare/runner.py's ``SideRun`` does on real processes, on virtual time: the cluster starts
(the pinned controller first, alone, until it wins), the scenario's topics are created with their pinned
replicas (``__consumer_offsets`` first, with the configs Kafka's GroupMetadataManager gives it), then each step
happens and the simulated clock runs until the cluster has **settled**: no ZooKeeper write for the scenario's
``settle.ms`` and every group with members stable (cut at 60 simulated seconds, as the real runner's).

The record is the simulated ZooKeeper's transaction log: every committed write (zxid, simulated ms, path, data
or None for a delete), from ``ZkModel.on_write``, with each step's start and end in the same simulated ms.  Only
ZooKeeper is observed: the probes, the members' views and the steps' outcomes are client-side and stay between
the two real sides (a step's outcome is kept in the record, for reading, and not compared).

The cluster runs with compare's settings (compare/sides.py's ``DEFAULTS`` under the scenario's own), each as
the simulator's setting of the same meaning (sim/scenario.py's ``CLUSTER_SETTINGS``); a setting the simulator
does not honour is an error naming it, and so is a step it cannot do (:data:`UNSUPPORTED`, with the reason).
"""
from __future__ import annotations

import random
from typing import Any, Callable

from chaos.scenario import OFFSETS_TOPIC
from chaos.targets import View, resolve
from judge.history import HistoryWriter
from kafkacommon import errors
from sim import rpc
from sim.broker import SimConfig
from sim.clients import SimMember
from sim.cluster import SimCluster
from sim.scenario import CLUSTER_SETTINGS
from sim.world import World

SETTLE_TIMEOUT_MS = 60_000.0
ADVERTISED_PORT_BASE = 19_000     # broker N advertises PLAINTEXT://127.0.0.1:19000+N (labelled <kafka:N>)
GRPC_PORT_BASE = 9_000            # and registers sim:9000+N as its gRPC address (as SimBroker always does)
HEARTBEAT_MS = 3000               # librdkafka's and the Java consumer's heartbeat.interval.ms
NEVER_MS = 1e15                   # the simulated members commit only when a step says so
OFFSETS_CONFIG = {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"}

#: the step kinds the simulator cannot do, and why (a scenario with one is refused, naming the step)
UNSUPPORTED: dict[str, str] = {
    "terminate": "the simulated broker has no controlled shutdown (SIGTERM's ControlledShutdown); only kill",
    "create": "CreateTopics is a Kafka-protocol request; the simulated brokers have no Kafka listener",
    "delete": "DeleteTopics: the simulated controller has no topic deletion",
    "partitions": "CreatePartitions is a Kafka-protocol request; the simulated brokers have no Kafka listener",
    "config": "IncrementalAlterConfigs is a Kafka-protocol request; the simulated brokers have no Kafka listener",
    "metadata": "a Metadata request (and its auto-creation) needs a Kafka listener, which the simulator has not",
    "add": "the simulated group members are fixed at the join (no member added later)",
    "leave": "the simulated members do not leave a group (LeaveGroup)",
    "restart": "the simulated members are not restarted",
}
#: settings compare's DEFAULTS give that do not apply to the simulator (it keeps them as they are), and why
NOT_APPLICABLE: dict[str, str] = {
    "controlled.shutdown.retry.backoff.ms": "no controlled shutdown in the simulator (terminate is refused)",
    "controller.socket.timeout.ms": "the simulated controller's requests to brokers wait on the simulated network",
}
#: settings honoured beyond CLUSTER_SETTINGS (offsets.topic.* from the pinned topic), each with its only value
FIXED = {"auto.leader.rebalance.enable": False}


class SimCompareError(ValueError):
    """A compare scenario the simulator cannot run: the step or setting named, and why."""


def _settings(scenario: Any) -> dict[str, Any]:
    from compare.sides import DEFAULTS
    return {**DEFAULTS, **scenario.base.cluster_config}


def check(scenario: Any) -> None:
    """SimCompareError for the first step or setting of ``scenario`` the simulator cannot run."""
    for step in scenario.steps:
        if step.kind in UNSUPPORTED:
            raise SimCompareError(f"{scenario.name}: step {step.index} {step.text!r}: not in the simulator: "
                                  f"{UNSUPPORTED[step.kind]}")
        if step.kind == "join" and step.args.get("java"):
            raise SimCompareError(f"{scenario.name}: step {step.index} {step.text!r}: not in the simulator: its "
                                  f"members are kafkasim's own, not Kafka's Java consumer")
        if step.kind == "join" and step.args.get("static"):
            raise SimCompareError(f"{scenario.name}: step {step.index} {step.text!r}: not in the simulator: its "
                                  f"members have no group.instance.id (static membership)")
    sim_config(scenario)


def sim_config(scenario: Any) -> SimConfig:
    """compare's settings for the scenario as a SimConfig; SimCompareError names one it would not honour."""
    settings = _settings(scenario)
    base = scenario.base
    offsets = next((t for t in base.topics if t.name == OFFSETS_TOPIC), None)
    fields: dict[str, Any] = {}
    for key, value in sorted(settings.items()):
        if key in CLUSTER_SETTINGS:
            fields[CLUSTER_SETTINGS[key][0]] = value
        elif key == "offsets.topic.num.partitions":
            fields["offsets_partitions"] = offsets.partitions if offsets is not None else int(value)
        elif key == "kafkasim.offsets.topic.eager.create":
            fields["offsets_eager_create"] = bool(value) and offsets is None
        elif key in FIXED and value == FIXED[key]:
            pass
        elif key in NOT_APPLICABLE and key not in base.cluster_config:
            pass
        else:
            raise SimCompareError(f"{scenario.name}: cluster.config.{key}: {value!r} is not honoured by the simulator")
    if offsets is None:
        raise SimCompareError(f"{scenario.name}: topics: the simulator needs {OFFSETS_TOPIC} among them, pinned, as "
                              f"every compare scenario has it")
    unpinned = [t.name for t in base.topics if t.replicas is None]
    if unpinned:
        raise SimCompareError(f"{scenario.name}: topics: {unpinned[0]} has no replicas given: the simulator's "
                              f"placement, drawn from its seed, would not be Kafka's")
    fields["offsets_replication_factor"] = offsets.replication_factor
    return SimConfig(brokers=base.brokers, advertised_port_base=ADVERTISED_PORT_BASE, kafka_paths=True, **fields)


class _History(HistoryWriter):
    """The members' history, kept in memory (SimMember reads ``lines``)."""

    def __init__(self, clock: Callable[[], int]) -> None:
        super().__init__(None, clock=clock)
        self.lines: list[dict[str, Any]] = []

    def invoke(self, *a: Any, **kw: Any) -> dict[str, Any]:
        line = super().invoke(*a, **kw)
        self.lines.append(line)
        return line

    def complete(self, *a: Any, **kw: Any) -> dict[str, Any]:
        line = super().complete(*a, **kw)
        self.lines.append(line)
        return line


class SimCompareRun:
    def __init__(self, scenario: Any, seed: int = 1, say: Callable[[str], None] = lambda _t: None) -> None:
        check(scenario)
        self.scenario = scenario
        self.seed = seed
        self.say = say
        self.cfg = sim_config(scenario)
        self.world = World(seed)
        self.partitions = {t.name: t.partitions for t in scenario.base.topics}
        self.zk_writes: list[dict[str, Any]] = []
        self.last_write_ms = 0.0
        self.steps: list[dict[str, Any]] = []
        self.members: dict[str, list[SimMember]] = {}
        self.phase = 0
        self._next_process = 0

    def procs(self) -> int:
        p, self._next_process = self._next_process, self._next_process + 1
        return p

    # ------------------------------------------------------------------ the run

    def run(self) -> dict[str, Any]:
        w = self.world
        self.cluster = SimCluster(w, self.cfg)
        self.cluster.zk.model.on_write = self._written
        self.history = _History(self.cluster.clock)
        error = None
        try:
            start = w.now_ms
            self._setup()
            self._finish(0, "set-up", start, {})
            for step in self.scenario.steps:
                self.phase = step.index
                start = w.now_ms
                self.say(f"  [sim] step {step.index}: {step.text}")
                outcome = self.do(step)
                self._finish(step.index, step.text, start, outcome)
        except Exception as e:   # recorded, as the real runner records an aborted side
            import traceback
            error = f"{type(e).__name__}: {e}"
            self.say(f"  [sim] aborted at step {self.phase}: {error}")
            self.steps.append({"index": self.phase, "text": "aborted", "error": error,
                               "traceback": traceback.format_exc()})
        return {"version": 1, "side": "sim", "scenario": self.scenario.name, "seed": self.seed, "error": error,
                "end_ms": w.now_ms, "steps": self.steps, "zk": self.zk_writes, "clients": [], "members": [],
                "random_topics": [],
                "ports": {str(b): {"kafka": ADVERTISED_PORT_BASE + b, "grpc": GRPC_PORT_BASE + b}
                          for b in sorted(self.cluster.brokers)}}

    def _written(self, zxid: int, path: str, data: bytes | None, created: bool) -> None:
        now = self.world.now_ms
        self.last_write_ms = now
        self.zk_writes.append({"zxid": zxid, "time_ms": now, "path": path, "created": created,
                               "data": None if data is None else data.decode("utf-8", errors="replace")})

    def _setup(self) -> None:
        c = self.cluster
        first = self.scenario.base.controller
        if first is not None:
            c.start(only=first)
            self._until(lambda: c.zk_view()[1] == first, 60_000, f"broker {first} to become the controller")
        c.start()
        ids = sorted(c.brokers)
        self._until(lambda: c.zk_view()[0] == ids and c.zk_view()[1] is not None, 120_000, "every broker to register")
        for t in sorted(self.scenario.base.topics, key=lambda t: t.name != OFFSETS_TOPIC):
            c.create_topic(t.name, t.partitions, t.replication_factor, t.replicas,
                           config=dict(OFFSETS_CONFIG) if t.name == OFFSETS_TOPIC else None)
            self._until(lambda t=t: self._led(t.name), 60_000, f"every partition of {t.name} to have a leader")

    def _finish(self, index: int, text: str, start_ms: float, outcome: Any) -> None:
        settled = self.settle()
        self.steps.append({"index": index, "text": text, "start_ms": start_ms, "end_ms": self.world.now_ms,
                           "settled": settled, "outcome": outcome})

    # ------------------------------------------------------------------ time

    def _until(self, cond: Callable[[], bool], timeout_ms: float, what: str = "", step_ms: float = 50.0,
              required: bool = True) -> bool:
        """Run the clock until ``cond()`` (checked every ``step_ms``); RuntimeError (or False) after ``timeout_ms``."""
        end = self.world.now_ms + timeout_ms
        while not cond():
            if self.world.now_ms >= end:
                if required:
                    raise RuntimeError(f"timed out after {timeout_ms / 1000:.0f} simulated s waiting for {what}")
                return False
            self.world.run_until(self.world.now_ms + step_ms)
        return True

    def settle(self) -> bool:
        quiet = float(self.scenario.settle_ms)
        self.last_write_ms = max(self.last_write_ms, self.world.now_ms)   # the quiet counts from the step's end
        ok = self._until(lambda: self.world.now_ms - self.last_write_ms >= quiet and self._groups_stable(),
                        SETTLE_TIMEOUT_MS, "the cluster to settle", 10.0, required=False)
        if not ok:
            self.say(f"  [sim] did not settle within {SETTLE_TIMEOUT_MS / 1000:.0f} simulated s after step {self.phase}")
        return ok

    # ------------------------------------------------------------------ looking

    def view(self) -> View:
        live, controller, parts = self.cluster.zk_view()
        return View(sorted(self.cluster.brokers), set(live), [1], controller, parts, self.cfg.offsets_partitions,
                    txn_partitions=self.cfg.txn_partitions)

    def targets(self, target: str) -> list[int]:
        return [int(n[1:]) for n in resolve(target, self.view(), random.Random(0)) if n.startswith("b")]

    def _led(self, topic: str) -> bool:
        states = self.cluster.topic_states(topic)
        return len(states) == self.partitions[topic] and all(s["leader"] >= 0 for s in states.values())

    def _registered(self, b: int) -> bool:
        return b in self.cluster.zk_view()[0]

    def _groups_stable(self) -> bool:
        return all(self._group_stable(g) for g in self.members)

    def _group_stable(self, group: str) -> bool:
        ms = self.members[group]
        gens = {m.state.generation for m in ms}
        return all(m.coordinator is not None and not m.rejoin and m.state.generation >= 0 for m in ms) \
            and len(gens) == 1

    # ------------------------------------------------------------------ doing

    def do(self, step: Any) -> Any:
        a, kind = step.args, step.kind
        if kind in ("kill", "pause", "resume", "expire"):
            brokers = self.targets(a["target"])
            if not brokers:
                return {"skipped": f"{a['target']} resolves to no broker"}
            for b in brokers:
                getattr(self, f"_{kind}")(b, a)
            return {"brokers": ["hit"] * len(brokers)}
        if kind == "start":
            b = self.cluster.brokers[a["broker"]]
            if not b.running:
                b.start()
            self._until(lambda: self._registered(b.id), 90_000, f"broker {b.id} to register")
            return {"rejoined": self._rejoined(b.id)}
        handler = getattr(self, "_wait_step" if kind == "wait" else f"_{kind}", None)
        if handler is None:
            raise SimCompareError(f"step {step.index} {step.text!r}: not in the simulator")
        return handler(a)

    def _kill(self, b: int, a: dict) -> None:
        self.cluster.brokers[b].crash()
        self._wait_unregistered(b)

    def _pause(self, b: int, a: dict) -> None:
        self.world.pause(f"b{b}")
        if a.get("secs"):
            self.world.run_until(self.world.now_ms + a["secs"] * 1000)
            self.world.resume(f"b{b}")

    def _resume(self, b: int, a: dict) -> None:
        self.world.resume(f"b{b}")

    def _expire(self, b: int, a: dict) -> None:
        """As compare cuts a broker's link to ZooKeeper: blocked both ways until its session expires and its
        registration goes, then healed; then it registers again."""
        net, node = self.world.net, f"b{b}"
        net.block(node, "zk1")
        net.block("zk1", node)
        try:
            self._wait_unregistered(b)
        finally:
            net.unblock(node, "zk1")
            net.unblock("zk1", node)
        self._until(lambda: self._registered(b), 90_000, f"broker {b} to register again")

    def _wait_unregistered(self, b: int) -> None:
        timeout = self.cfg.session_timeout_ms * 3 + 15_000
        self._until(lambda: not self._registered(b), timeout, f"broker {b} to leave /brokers/ids")

    def _rejoined(self, b: int) -> bool:
        """Back in the ISR of every partition it replicates that has a live leader (compare's _wait_rejoined)."""
        def back() -> bool:
            live, _c, parts = self.cluster.zk_view()
            return all(b in p["isr"] for p in parts.values()
                       if b in p["replicas"] and p["leader"] in live and p["leader"] != b)
        return self._until(back, 60_000, f"broker {b} to rejoin the ISRs", required=False)

    def _wait_step(self, a: dict) -> Any:
        if "secs" in a:
            self.world.run_until(self.world.now_ms + a["secs"] * 1000)
            return {}
        cond = a["cond"]

        def isr_full() -> bool:
            return all(set(p["isr"]) == set(p["replicas"]) for p in self.cluster.zk_view()[2].values())

        def leaders() -> bool:
            return all(p["leader"] >= 0 for p in self.cluster.zk_view()[2].values())
        check_ = {"isr full": isr_full, "leaders": leaders, "controller": lambda: self.cluster.zk_view()[1] is not None,
                  "stable": self._groups_stable}[cond]
        return {} if self._until(check_, 120_000, cond, required=False) else {"timed_out": cond}

    def _produce(self, a: dict) -> Any:
        topic = a["topic"]
        _live, _c, parts = self.cluster.zk_view()
        ps = [a["partition"]] if "partition" in a else sorted(p for t, p in parts if t == topic)
        acks = {"all": -1, "1": 1, "0": 0}[a["acks"]]
        out: dict[str, Any] = {}
        for p in ps:
            leader = parts.get((topic, p), {}).get("leader", -1)
            b = self.cluster.brokers.get(leader)
            if b is None or not b.running:
                out[f"{topic}/{p}"] = "no leader answering"
                continue
            got: list[Any] = []
            records = [(None, b"v%d" % i) for i in range(a["count"])]
            rpc.call(self.world, "client", b.node, b.handle_produce, ((topic, p), records, acks, 30_000),
                     got.append, 20_000.0)
            self._until(lambda: bool(got), 25_000, f"the produce to {topic}/{p}")
            ans = got[0]
            out[f"{topic}/{p}"] = "timed out" if ans is None else {
                "error": errors.name(ans[0]) if ans[0] else None, "base_offset": ans[1]}
        return out

    def _join(self, a: dict) -> Any:
        group = a["group"]
        ms = self.members.setdefault(group, [])
        for slot in range(1, a["members"] + 1):
            m = SimMember(self, group, a["topic"], slot, assignor=a["assignor"], session_timeout_ms=a["session_ms"],
                          heartbeat_interval_ms=HEARTBEAT_MS, commit_interval_ms=int(NEVER_MS))
            ms.append(m)
            m.start()
            # one member at a time, each Stable before the next (compare's _new_member)
            self._until(lambda: self._group_stable(group), 60_000, f"group {group} to be stable", required=False)
        return {}

    def _commit(self, a: dict) -> Any:
        """Each member commits its positions once (its next step), as compare's members do on the command."""
        group = a["group"]
        before = len(self.history.lines)
        for m in self.members.get(group, []):
            m.next_commit_ms = 0.0
        n = len(self.members.get(group, []))

        def done() -> list[dict[str, Any]]:
            return [x for x in self.history.lines[before:] if x.get("f") == "commit" and x["type"] != "invoke"
                    and x.get("group") == group]
        self._until(lambda: len(done()) >= n, 30_000, f"group {group}'s commits", required=False)
        return {f"{group}/{i}": (x["type"], x.get("error")) for i, x in enumerate(done(), 1)}

    def _elect(self, a: dict) -> Any:
        """ElectLeaders (preferred) at the controller, for the partitions named or every one."""
        tps = a["partitions"] or sorted(self.cluster.zk_view()[2])
        result = self.cluster.elect_leaders(tps, 0)
        return {f"{t}/{p}": (errors.name(r[0]) if r[0] else None) for (t, p), r in sorted(result.items())}

    def _reassign(self, a: dict) -> Any:
        """AlterPartitionReassignments at the controller, or (``via zookeeper``) /admin/reassign_partitions;
        then the partition's replicas become the target's."""
        tp, target = (a["topic"], a["partition"]), tuple(a["replicas"])
        out: dict[str, Any] = {}
        if a["zookeeper"]:
            self.cluster.request_zk_reassignment({tp: target})
        else:
            code, parts = self.cluster.alter_reassignments({tp: target})
            out = {"error": errors.name(code) if code else None,
                   "partitions": {f"{t}/{p}": (errors.name(r[0]) if r[0] else None) for (t, p), r in parts.items()}}
        done = self._until(lambda: tuple(self.cluster.zk_view()[2].get(tp, {}).get("replicas", ())) == target,
                           90_000, f"{tp[0]}/{tp[1]} to be reassigned", required=False)
        if not done:
            out["timed_out"] = True
        return out
