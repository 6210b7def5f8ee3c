"""``kafkasim.Cluster``: a local kafkasim cluster for a test suite, with faults aimed by role.

Everything here stands on the launcher (launcher/cluster.py: ZooKeeper and the brokers as real
processes), the chaos machinery (chaos/fabric.py: the fault proxy in front of every link;
chaos/nemesis.py and chaos/targets.py: faults aimed by role and resolved when they fire) and the judge
(the history, the observed-commit checker, the failover timeline).  Reference: docs/testing-your-app.md.
"""
from __future__ import annotations

import difflib
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import yaml

from chaos.apps import CommitObserver
from chaos.fabric import FAST_DEFAULTS, Fabric, broker_entries, cluster_view, start_proxied
from chaos.nemesis import Active, Nemesis
from chaos.schedule import Fault as ScheduledFault
from chaos.targets import OFFSETS_TOPIC, TargetError, View, parse_target
from chaos.workload import Processes, read_partition
from client.admin import GroupAdmin
from client.metadata import ClusterClient
from judge.check_model import CheckResult
from judge.history import HistoryWriter, read_history
from judge.timeline import failover_timeline
from kafkacommon.hashing import partition_for
from launcher.cluster import Cluster as Launcher
from node.config import SCHEMA, ConfigError, load_config
from node.events import EventTail, read_run_events
from util.waiting import wait_for
from zk.admin import create_topic

__all__ = ["Cluster", "Fault", "Record", "KafkasimError", "ConfigError", "CheckResult"]

#: Keys ``Cluster.start`` sets itself: giving one is an error naming it.
OWN_KEYS = ("brokers", "run.dir", "zookeeper.connect")


class KafkasimError(RuntimeError):
    """A request the cluster cannot carry out (a vacant role, a network fault without the fault proxy, ...)."""


@dataclass(frozen=True)
class Record:
    """One record read back from a topic."""
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass
class Fault:
    """A fault in force (or healed): what it was aimed at, what that resolved to when it fired."""
    id: int
    kind: str                       # kill, terminate, pause, partition (isolate), expire-session
    target: str                     # as given: "coordinator:billing", "broker:2", ...
    nodes: list[int | str]          # broker ids; "zk<n>" for ZooKeeper servers
    started_ns: int                 # CLOCK_MONOTONIC, the clock of events() and the history
    healed: bool = False
    skipped: str | None = None      # why it did nothing (the role was vacant)
    _cluster: "Cluster | None" = field(default=None, repr=False, compare=False)
    _active: Active | None = field(default=None, repr=False, compare=False)

    def heal(self) -> None:
        """Undo it: start killed or terminated brokers again, resume paused ones, unblock links."""
        if self._cluster is not None:
            self._cluster.heal(self)


def cluster_settings(brokers: int, given: dict[str, Any]) -> dict[str, Any]:
    """cluster.yaml keys from ``Cluster.start``'s keywords: dotted, or with underscores for dots."""
    out: dict[str, Any] = {}
    for key, value in given.items():
        dotted = key if key in SCHEMA else key.replace("_", ".")
        if dotted in OWN_KEYS:
            raise ConfigError(f"Cluster.start: {key}: set by Cluster.start itself (use brokers=, run_dir=)",
                              problems=[(key, "set by Cluster.start")])
        if dotted not in SCHEMA:
            close = difflib.get_close_matches(dotted, list(SCHEMA), n=1)
            hint = f" (did you mean {close[0]}?)" if close else " (docs/config.md lists every key)"
            raise ConfigError(f"Cluster.start: {key}: unknown cluster setting{hint}",
                              problems=[(key, "unknown cluster setting")])
        out[dotted] = value
    return {**FAST_DEFAULTS, "offsets.topic.replication.factor": min(3, brokers), **out}


class _NemesisLines:
    """The history as the nemesis writes to it, keeping the last fault line (its time is the fault's start)."""

    def __init__(self, history: HistoryWriter) -> None:
        self.history = history
        self.last: dict[str, Any] | None = None

    def nemesis(self, f: str, value: Any) -> dict[str, Any]:
        self.last = self.history.nemesis(f, value)
        return self.last


class Cluster:
    """A running cluster: ZooKeeper, ``brokers`` broker processes and (with ``network``) the fault proxy.

    Use :meth:`start`, as a context manager::

        with Cluster.start(brokers=3, offsets_topic_num_partitions=10) as kafka:
            kafka.create_topic("orders", partitions=6)
            kafka.kill("coordinator:billing")
    """

    def __init__(self, launcher: Launcher, run_dir: Path, fabric: Fabric | None, *, keep: bool) -> None:
        self._launcher = launcher
        self.run_dir = run_dir
        self._fabric = fabric
        self._keep = keep
        self._lock = threading.RLock()
        self._history = HistoryWriter(run_dir / "history.jsonl")
        self._procs = Processes()
        self._last_view: View | None = None
        self._faults: list[Fault] = []
        self._observers: dict[str, CommitObserver] = {}
        self._observer_stop = threading.Event()
        self._stopped = False
        cfg = launcher.cfg
        if fabric is not None:
            self._client = ClusterClient(list(fabric.client_links.values()), request_timeout_s=5.0, dial=fabric.dial)
            self._bootstrap = fabric.kafka_bootstrap
        else:
            self._client = ClusterClient([f"{b.host}:{b.port}" for b in cfg.brokers], request_timeout_s=5.0)
            self._bootstrap = ",".join("%s:%d" % b.kafka_advertised for b in cfg.brokers)
        self._lines = _NemesisLines(self._history)
        self._nemesis = Nemesis(launcher, fabric.net if fabric else None, self._lines, self._view,
                                cfg.session_timeout_ms)

    # ------------------------------------------------------------------ start and stop

    @classmethod
    def start(cls, brokers: int = 3, *, network: bool = True, run_dir: str | Path | None = None,
              keep: bool = False, timeout: float = 90.0, **settings: Any) -> "Cluster":
        """Start ZooKeeper (embedded), the fault proxy (``network=True``) and ``brokers`` brokers; return once a
        controller is elected and every offsets partition has a leader.

        ``settings`` are cluster.yaml keys (docs/config.md), dotted (``**{"offsets.topic.num.partitions": 10}``)
        or with underscores for dots (``offsets_topic_num_partitions=10``); an unknown key is a
        :class:`ConfigError` naming it.  Defaults differ from a lab's to keep failovers short:
        ``zookeeper.session.timeout.ms`` 3000, ``offsets.topic.num.partitions`` 10 (chaos/fabric.py's
        ``FAST_DEFAULTS``).  ``network=False`` connects clients straight to the brokers (no :meth:`isolate`).
        ``run_dir``: where logs, data and the history go (default: a temporary directory, removed by
        :meth:`stop` unless ``keep``)."""
        if isinstance(brokers, bool) or not isinstance(brokers, int) or not 1 <= brokers <= 9:
            raise ConfigError(f"Cluster.start: brokers: 1..9, got {brokers!r}", problems=[("brokers", "1..9")])
        doc = cluster_settings(brokers, settings)
        temp = run_dir is None
        root = Path(tempfile.mkdtemp(prefix="kafkasim-")) if temp else Path(run_dir).resolve()
        root.mkdir(parents=True, exist_ok=True)
        doc = {"run.dir": str(root / "cluster"), **doc, "brokers": broker_entries(brokers, kafka=True)}
        path = root / "cluster.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        launcher = Launcher(load_config(path), path)
        fabric = None
        try:
            if network:
                fabric = start_proxied(launcher, path, root, seed=0, kafka=True,
                                       up=lambda c: c.up(timeout=timeout))
            else:
                launcher.up(timeout=timeout)
            return cls(launcher, root, fabric, keep=keep or not temp)
        except BaseException:
            launcher.down()
            if fabric is not None:
                fabric.stop()
            if temp and not keep:
                shutil.rmtree(root, ignore_errors=True)
            raise

    def stop(self) -> None:
        """Stop the brokers (each with a controlled shutdown), ZooKeeper and the proxy, and remove a temporary run
        directory.  Paused processes are resumed and cut links restored first; killed brokers stay down."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._observer_stop.set()
        for o in self._observers.values():
            o.join(timeout=10)
            o.close()
        for f in self._in_force(None):   # a stopped process cannot take its SIGTERM, a cut one cannot shut
            if f.kind in ("pause", "partition"):   # down in order; killed brokers are not started again
                try:
                    self.heal(f)
                except Exception:   # one that will not heal must not keep the rest running
                    pass
        self._client.close()
        self._launcher.down()
        if self._fabric is not None:
            self._fabric.stop()
        self._history.close()
        if not self._keep:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ what it is

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of the brokers' Kafka listeners, for any Kafka client (through the proxy when
        ``network=True``: the brokers advertise those addresses too)."""
        return self._bootstrap

    @property
    def brokers(self) -> list[int]:
        """The configured broker ids (1..n)."""
        return [b.id for b in self._launcher.cfg.brokers]

    def _view(self) -> View:
        self._last_view = cluster_view(self._launcher, self._last_view)
        return self._last_view

    def controller(self) -> int | None:
        """The active controller's broker id (None while there is none)."""
        return self._launcher.view().controller_id

    def leader_of(self, topic: str, partition: int) -> int | None:
        """The partition's leader (None when it has none), as ZooKeeper says now."""
        st = self._launcher.view().topics.get(topic, {}).get("partitions", {}).get(partition)
        if st is None:
            raise KafkasimError(f"no partition {topic}/{partition}")
        return st["leader"] if st["leader"] >= 0 else None

    def coordinator_of(self, group: str) -> int | None:
        """The broker coordinating ``group``: the leader of its ``__consumer_offsets`` partition."""
        n = len(self._launcher.view().topics.get(OFFSETS_TOPIC, {}).get("partitions", {})) or \
            self._launcher.cfg.get("offsets.topic.num.partitions")
        return self.leader_of(OFFSETS_TOPIC, partition_for(group, n))

    # ------------------------------------------------------------------ topics and groups

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     config: dict[str, Any] | None = None, timeout: float = 30.0) -> None:
        """Create a topic (``config``: topic-level keys such as ``cleanup.policy``) and wait until every partition
        has a leader that the brokers know of."""
        rf = min(3, len(self.brokers)) if replication_factor is None else replication_factor
        create_topic(self._launcher.zk(), name, partitions, rf, dict(config or {}))
        wait_for(lambda: len(self._client.refresh().topic_partitions(name)) == partitions and all(
            self.leader_of(name, p) is not None for p in range(partitions)), timeout,
            f"every partition of {name} to have a leader")

    def log_end_offsets(self, topic: str, timeout: float = 30.0) -> dict[int, int]:
        """Each partition's end as a consumer sees it (ListOffsets latest: its leader's high watermark), once it has
        settled: a leader elected a moment ago has a lower high watermark than its followers' log ends until they
        fetch again, so this waits (up to ``timeout``) until each leader's high watermark reaches the log end of
        every in-sync replica that answers."""
        from client.consumer import LATEST, PartitionFetcher
        from launcher.cluster import replica_offsets

        def settled() -> bool:
            v = self._launcher.view()
            offsets = replica_offsets(v, timeout_s=1.0)
            for p, st in v.topics.get(topic, {}).get("partitions", {}).items():
                o = offsets.get((topic, p))
                if o is None or o["high_watermark"] is None:
                    return False
                if o["high_watermark"] < max((o["leo"].get(b, -1) for b in st["isr"]), default=-1):
                    return False
            return True
        try:
            wait_for(settled, timeout, f"the high watermarks of {topic} to reach their log ends")
        except TimeoutError:
            pass   # under a fault that keeps them apart: what consumers see now
        parts = self._client.partitions_for(topic)
        ends = PartitionFetcher(self._client).list_offsets([(topic, p) for p in parts], LATEST)
        return {p: o for (_t, p), o in sorted(ends.items())}

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets, ``{(topic, partition): offset}`` (the offset of the next record to read)."""
        return {tp: o for tp, o in GroupAdmin(self._client, timeout_s=15.0).committed(group).items() if o >= 0}

    def records(self, topic: str) -> list[Record]:
        """Every record of ``topic`` up to each partition's high watermark, partition by partition."""
        out: list[Record] = []
        for p in self._client.partitions_for(topic):
            recs, _hw = read_partition(self._client, topic, p)
            out += [Record(r.topic, r.partition, r.offset, r.key, r.value) for r in recs]
        return out

    def wait_for_stable(self, group: str, members: int | None = None, timeout: float = 30.0) -> dict[str, Any]:
        """Wait until ``group`` is Stable (with ``members`` members, if given) and return its description
        (state, generation, members, coordinator, ...).  Also starts :meth:`watch` on it."""
        self.watch(group)
        admin = GroupAdmin(self._client, timeout_s=5.0)

        def stable() -> dict[str, Any] | None:
            try:
                d = admin.describe(group, with_offsets=False).to_json()
            except Exception:
                return None
            ok = d["state"] == "Stable" and (members is None or len(d["members"]) == members)
            return d if ok else None
        return wait_for(stable, timeout, f"group {group} to be Stable")

    def watch(self, group: str, interval_ms: int = 100) -> None:
        """Poll the group's committed offsets (OffsetFetch, from outside the group) every ``interval_ms``, into
        the history: what :meth:`timeline` and :meth:`check` judge the group by.  Faults aimed at
        ``coordinator:<group>`` start it too."""
        with self._lock:
            if group in self._observers or self._stopped:
                return
            o = CommitObserver(self._history, self._procs, self._client, group, None, 0, interval_ms,
                               self._observer_stop)
            self._observers[group] = o
            o.start()

    # ------------------------------------------------------------------ faults

    def _fire(self, kind: str, target: str, **extra: Any) -> Fault:
        try:
            t = parse_target(target)
        except TargetError as e:
            raise KafkasimError(str(e)) from None
        if t.kind == "app":
            raise KafkasimError(f"{target}: app targets exist only in chaos runs (workload.command)")
        if t.kind == "coordinator":
            self.watch(t.arg)
        with self._lock:
            if self._stopped:
                raise KafkasimError("the cluster is stopped")
            f = ScheduledFault(id=len(self._faults), at_ms=0, heal_at_ms=0, kind=kind, target=target,
                               seed=len(self._faults), **extra)
            act = self._nemesis.start(f)
            start = self._lines.last
            fault = Fault(f.id, kind, target, list(start["value"]["nodes"]), start["time"], skipped=act.skipped,
                          _cluster=self, _active=act)
            self._faults.append(fault)
            return fault

    def kill(self, target: str) -> Fault:
        """SIGKILL the target's broker(s) (or ZooKeeper server): ``"coordinator:<group>"``, ``"controller"``,
        ``"leader:<topic>/<p>"``, ``"followers:<topic>/<p>"``, ``"broker:<id>"``, ``"zookeeper[:<n>]"``,
        ``"random"``, ``"minority"``, ``"majority"``.  They stay down until :meth:`heal`."""
        return self._fire("kill", target)

    def terminate(self, target: str) -> Fault:
        """SIGTERM: the broker's controlled shutdown (returns once it has exited); down until :meth:`heal`."""
        return self._fire("terminate", target)

    def pause(self, target: str) -> Fault:
        """SIGSTOP the target until :meth:`resume` (or :meth:`heal`)."""
        return self._fire("pause", target)

    def resume(self, fault: Fault | None = None) -> None:
        """SIGCONT what ``fault`` paused (None: every pause in force)."""
        for f in self._in_force(fault):
            if f.kind == "pause":
                self.heal(f)

    def isolate(self, target: str, peer: str = "rest", direction: str = "both") -> Fault:
        """A network partition: block every byte between the target and ``peer`` (``rest``: every other node,
        clients included; ``brokers``, ``servers``, ``clients``, ``zookeeper``, or a role) through the fault
        proxy; ``direction`` ``both``, ``to`` (target -> peer only) or ``from``.  Needs ``network=True``."""
        if self._fabric is None:
            raise KafkasimError("isolate needs the fault proxy: start the cluster with network=True")
        if direction not in ("both", "to", "from"):
            raise KafkasimError(f"direction: both, to or from, not {direction!r}")
        try:
            parse_target(peer, allow_sets=True)
        except TargetError as e:
            raise KafkasimError(f"peer: {e}") from None
        return self._fire("partition", target, peer=peer, direction=direction)

    def expire_session(self, target: str) -> Fault:
        """Expire the target broker's ZooKeeper session (it resigns if controller, and registers again)."""
        return self._fire("expire-session", target)

    def restart(self, target: str) -> Fault:
        """SIGTERM the target's broker(s), then start them again at once: a rolling restart (one fault)."""
        f = self.terminate(target)
        self.heal(f)
        return f

    def _in_force(self, fault: Fault | None) -> list[Fault]:
        with self._lock:
            return [f for f in ([fault] if fault is not None else list(self._faults)) if not f.healed]

    def heal(self, fault: Fault | None = None) -> None:
        """Heal ``fault`` (None: every fault in force): start killed or terminated brokers, resume paused ones,
        unblock links.  An expired session needs no healing."""
        for f in self._in_force(fault):
            with self._lock:
                if f.healed:
                    continue
                self._nemesis.heal(f._active)
                f.healed = True

    def faults(self) -> list[Fault]:
        """Every fault so far, in order."""
        with self._lock:
            return list(self._faults)

    # ------------------------------------------------------------------ what happened

    def events(self, follow: bool = False, timeout: float | None = None) -> Iterator[dict[str, Any]]:
        """The brokers' events (docs/events.md) as dicts, in time order.  With ``follow``, keep yielding new ones
        as the brokers log them, until ``timeout`` seconds pass (None: until the cluster stops)."""
        run = self._launcher.run_dir
        if not follow:
            yield from read_run_events(run)
            return
        tail = EventTail(run)
        end = None if timeout is None else time.monotonic() + timeout
        while not self._stopped and (end is None or time.monotonic() < end):
            got = tail.poll()
            yield from got
            if not got:
                time.sleep(0.05)

    def history(self) -> list[dict[str, Any]]:
        """The history so far: every fault (nemesis lines) and every observed fetch of a watched group."""
        return read_history(self._history.path)

    def timeline(self, group: str | None = None) -> list[dict[str, Any]]:
        """The failover timeline (judge/timeline.py; docs/chaos.md, "Failover timeline") of the faults so far,
        per fault and watched group: detect, elect, load, first commit (as the watch saw it), unavailability.
        ``group``: only its rows."""
        with self._lock:
            groups = list(self._observers)
        n = self._launcher.cfg.get("offsets.topic.num.partitions")
        rows = failover_timeline(self.history(), read_run_events(self._launcher.run_dir), offsets_partitions=n,
                                 observed_groups=groups)
        return [r for r in rows if group is None or r["group"] == group]

    def check(self, group: str) -> CheckResult:
        """The observed-commit checker over ``group``'s watched commits: its committed offsets never went down,
        and no commit acknowledged (seen by the watch) was lost across a coordinator failover."""
        from judge.checks_app import check_observed_commits
        if group not in self._observers:
            raise KafkasimError(f"group {group} is not watched: call watch({group!r}) before the faults")
        return check_observed_commits(self.history(), read_run_events(self._launcher.run_dir), app={"group": group},
                                      offsets_partitions=self._launcher.cfg.get("offsets.topic.num.partitions"))

