"""One chaos run: cluster, fault proxy, workloads, nemesis, then the checkers and the timeline.

The run directory holds everything needed to understand the run afterwards::

    runs/<name>/
      scenario.yaml    the scenario as given        schedule.json  the faults, from the seed
      cluster.yaml     the generated cluster config  history.jsonl  client ops and faults
      history.edn      the same, in Jepsen's format  results.json   verdict, anomalies, timeline
      cluster/events/broker-<id>.jsonl               the brokers' event logs
      cluster/logs/, cluster/data/, proxy/           process logs, partition logs, proxy log

With disk faults, each broker's log directories (``cluster.log.dirs`` of them) are filesystems of their
own, mounted before the brokers start and unmounted at the end, whatever happened (chaos/disks.py).

Order of a run: ZooKeeper, the proxy with one link per (source, destination),
the brokers (each dialling its peers and ZooKeeper through its links), the
topics, the workloads; then the schedule's faults, one after another.  At the
end (marked ``end`` in the history): producers stop, every fault is healed,
every partition is read in full (the final reads), the groups drain until they
have committed everything, and each group's committed offsets are fetched a
last time; then the brokers are stopped (marked ``stop``), each with a
controlled shutdown.  The failover timeline gives no fault the leader moves
that follow these marks.
"""
from __future__ import annotations

import json
import logging
import random
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from judge.checkers import check
from judge.edn import write_edn
from judge.history import HistoryWriter, read_history
from chaos.nemesis import Active, Links, Nemesis, NetnsNet, ProxyNet
from chaos.progress import Progress
from chaos.realclients import RealMemberWorker, RealProducerWorker
from chaos.realjava import JavaMemberWorker, JavaProducerWorker
from chaos.disks import RunDisks
from chaos.apps import app_results, format_app, load_app
from chaos.fabric import FAST_DEFAULTS, Fabric, broker_entries, cluster_view, start_first, start_proxied
from chaos.proxy import ProxyProcess
from chaos.scenario import Scenario
from chaos.schedule import (Fault, format_schedule, make_schedule, schedule_document, schedule_rng_seed,
                            write_schedule)
from chaos.targets import OFFSETS_TOPIC, View
from judge.timeline import END_PHASE, STOP_PHASE, failover_timeline
from judge.timeline_summary import format_table, summarize
from chaos.workload import MemberWorker, ProbeWorker, Processes, ProducerWorker, final_read
from client.admin import GroupAdmin
from client.metadata import ClusterClient
from node.server import bugs
from launcher.cluster import Cluster, replica_offsets
from node.config import load_config
from node.events import read_run_events
from zk.admin import create_topic
from util.waiting import wait_for
from zk.server import EmbeddedZooKeeper

log = logging.getLogger(__name__)

PLANTABLE_BUGS = bugs.BUGS
TARGETS = ("processes", "compose")
CLIENTS_READY_S = 120.0   # at most this long for every client to be built before the workload starts anyway


@dataclass
class RunResult:
    out: Path
    verdict: str
    exit_code: int
    results: dict[str, Any]


class ChaosRun:
    def __init__(self, scenario: Scenario, seed: int, out: Path, *, duration_s: float | None = None,
                 planted_bugs: tuple[str, ...] = (), stream: TextIO = sys.stdout, progress: bool = True,
                 target: str = "processes"):
        if target not in TARGETS:
            raise ValueError(f"unknown target {target!r} (known: {', '.join(TARGETS)})")
        for b in planted_bugs:
            if b not in PLANTABLE_BUGS:
                raise ValueError(f"unknown planted bug {b!r} (known: {', '.join(PLANTABLE_BUGS)})")
        self.scenario = scenario
        self.seed = seed
        self.out = Path(out)
        self.duration_s = duration_s if duration_s is not None else scenario.duration_s
        self.planted_bugs = planted_bugs
        self.target = target         # processes: local OS processes; compose: the docker-compose lab (chaos/compose.py)
        self.stream = stream
        self.show_progress = progress
        self.faults: list[Fault] = make_schedule(scenario, random.Random(schedule_rng_seed(seed)),
                                                   self.duration_s)
        self.cluster: Cluster | None = None
        self.proxy: ProxyProcess | None = None
        self.fabric: Fabric | None = None
        self.apps = None             # chaos.apps.AppRun with a command: workload (the user's application)
        self.txns = None             # chaos.txn_run.TxnRun with a transactions: workload
        self.links = Links()
        self.net: ProxyNet | NetnsNet | None = None
        self.netns = None            # chaos.netns.NetnsNetwork in network: netns mode
        self.history: HistoryWriter | None = None
        self.disks: RunDisks | None = None     # with disk faults: a filesystem per log directory
        self._last_view: View | None = None
        self._marked: set[str] = set()
        self.end_errors: list[str] = []

    def say(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    # ------------------------------------------------------------------ set-up

    def _prepare_dir(self) -> Path:
        if self.out.exists() and any(self.out.iterdir()):
            raise FileExistsError(f"{self.out} already exists and is not empty; choose another --out")
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "scenario.yaml").write_text(yaml.safe_dump(dict(self.scenario.raw), sort_keys=False))
        write_schedule(self.out / "schedule.json",
                       schedule_document(self.scenario, self.seed, self.duration_s, self.faults))
        s = self.scenario
        doc: dict[str, Any] = {
            "run.dir": str(self.out / "cluster"),
            **FAST_DEFAULTS,
            "zookeeper.embedded.servers": s.zookeeper_servers,
            "offsets.topic.replication.factor": min(3, s.brokers),
            "transaction.state.log.replication.factor": min(3, s.brokers),
            "transaction.state.log.min.isr": min(2, s.brokers),
        }
        offsets = next((t for t in s.topics if t.name == OFFSETS_TOPIC), None)
        if offsets is not None:   # the scenario pins its assignment: the run creates it (_create_topics)
            doc.update({"kafkasim.offsets.topic.eager.create": False, "offsets.topic.num.partitions": offsets.partitions,
                        "offsets.topic.replication.factor": offsets.replication_factor})
        doc.update(s.cluster_config)
        doc["brokers"] = broker_entries(s.brokers, self._kafka_clients())
        if s.log_dirs > 1 or s.disk_fault_kinds():
            for entry in doc["brokers"]:
                entry["log.dirs"] = ",".join(str(d) for d in self._log_dirs(entry["id"]))
        path = self.out / "cluster.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    def _log_dirs(self, broker: int) -> list[Path]:
        base = (self.out / "cluster" / "data" / f"broker-{broker}").resolve()
        return [base / f"d{i}" for i in range(self.scenario.log_dirs)]

    def _mount_disks(self) -> None:
        """With disk faults: a filesystem per log directory (ext4 when one may fail its writes, else tmpfs)."""
        s = self.scenario
        kinds = s.disk_fault_kinds()
        if not kinds:
            return
        self.disks = RunDisks({b: self._log_dirs(b) for b in range(1, s.brokers + 1)}, s.disk_size_mb << 20,
                              "disk-error" in kinds, self.out / "disks")
        self.disks.mount()

    def _start_cluster(self, config_path: Path) -> None:
        if self.target == "compose":
            if self.scenario.disk_fault_kinds():
                raise RuntimeError("disk faults: not with --target compose (they mount filesystems on this machine)")
            self._start_cluster_compose(config_path)
            return
        self._mount_disks()
        if self.scenario.network == "netns":
            self._start_cluster_netns(config_path)
            return
        cfg = load_config(config_path)
        self.cluster = c = Cluster(cfg, config_path)
        if self.planted_bugs:
            c.extra_env[bugs.ENV] = ",".join(self.planted_bugs)
        self.fabric = start_proxied(c, config_path, self.out, self.seed, kafka=self._kafka_clients(),
                                    up=self._up)
        self.proxy, self.links, self.net = self.fabric.proxy, self.fabric.links, self.fabric.net
        self.client_links = self.fabric.client_links
        self.kafka_bootstrap = self.fabric.kafka_bootstrap

    def _kafka_clients(self) -> bool:
        """Real Kafka clients (the user's application, the transactional pipelines) reach the brokers' Kafka
        listeners."""
        s = self.scenario
        return s.client != "kafkasim" or s.command is not None or s.transactions is not None

    def _up(self, c: Cluster) -> None:
        """Start the brokers; with ``cluster.controller`` that broker first, alone until it is the controller."""
        start_first(c, self.scenario.controller)

    def _start_cluster_netns(self, config_path: Path) -> None:
        """Each broker and ZooKeeper server in its own network namespace, on a bridge; faults are
        iptables rules (chaos/netns.py).  Needs root."""
        from chaos.netns import NetnsNetwork, netns_available
        why = netns_available()
        if why is not None:
            raise RuntimeError(f"network: netns needs root and iproute2/iptables: {why}")
        s = self.scenario
        nodes = [f"b{i}" for i in range(1, s.brokers + 1)] + [f"zk{n}" for n in range(1, s.zookeeper_servers + 1)]
        self.netns = net = NetnsNetwork(f"{self.seed}:{self.out.resolve()}", nodes)
        net.up()
        self.net = NetnsNet(net)
        doc = yaml.safe_load(config_path.read_text())
        doc["brokers"] = [{"id": i, "host": net.ip(f"b{i}"), "port": 9092} for i in range(1, s.brokers + 1)]
        config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
        cfg = load_config(config_path)
        self.cluster = c = Cluster(cfg, config_path)
        if self.planted_bugs:
            c.extra_env[bugs.ENV] = ",".join(self.planted_bugs)
        zks = [f"zk{n}" for n in range(1, s.zookeeper_servers + 1)]
        c.zk_embedded = EmbeddedZooKeeper(c.run_dir / "zookeeper", servers=s.zookeeper_servers,
                                          tick_ms=cfg.get("zookeeper.embedded.tick.time.ms"),
                                          hosts=[net.ip(z) for z in zks], prefixes=[net.exec_prefix(z) for z in zks])
        c.zk_embedded.start(timeout=60)
        c.connect = c.zk_embedded.connect_string
        for b in cfg.brokers:
            c.prefixes[b.id] = net.exec_prefix(f"b{b.id}")
        self.client_links = {b.id: f"{b.host}:{b.port}" for b in cfg.brokers}
        self._up(c)

    def _start_cluster_compose(self, config_path: Path) -> None:
        """The lab's containers (chaos/compose.py); clients dial the brokers directly, as in netns mode."""
        from chaos.compose import NoNet, check_lab_possible, start_compose_cluster
        from chaos.scenario import NETWORK_KINDS
        s = self.scenario
        if s.controller is not None:
            raise RuntimeError("cluster.controller: not with --target compose (the lab starts every broker at once)")
        check_lab_possible(s.brokers, s.zookeeper_servers, [f.kind for f in self.faults], NETWORK_KINDS)
        extra = {bugs.ENV: ",".join(self.planted_bugs)} if self.planted_bugs else {}
        self.net = NoNet()  # type: ignore[assignment]
        self.cluster = c = start_compose_cluster(config_path, extra)
        self.client_links = {b.id: f"{b.host}:{b.port}" for b in c.cfg.brokers}
        self.kafka_bootstrap = ",".join("%s:%d" % b.kafka_advertised for b in c.cfg.brokers)

    def _create_topics(self) -> None:
        for t in sorted(self.scenario.topics, key=lambda t: t.name != OFFSETS_TOPIC):   # the offsets topic first
            create_topic(self.cluster.zk(), t.name, t.partitions, t.replication_factor,
                         {"cleanup.policy": "compact"} if t.name == OFFSETS_TOPIC else {},
                         rng=random.Random(f"{self.seed}:{t.name}"),
                         assignment=dict(enumerate(t.replicas)) if t.replicas else None)

    def view(self) -> View:
        """The cluster now, as ZooKeeper says (read directly, not through the proxy)."""
        self._last_view = cluster_view(self.cluster, self._last_view,
                                       self.apps.processes.numbers() if self.apps is not None else None)
        return self._last_view

    def client(self) -> ClusterClient:
        return ClusterClient(list(self.client_links.values()), request_timeout_s=5.0,
                             dial=lambda b, advertised: self.client_links.get(b, advertised))

    # ------------------------------------------------------------------ the run

    def run(self) -> RunResult:
        config_path = self._prepare_dir()
        self.say(f"chaos run {self.scenario.name!r}  seed {self.seed}  {self.duration_s:g}s  -> {self.out}")
        if self.planted_bugs:
            self.say(f"PLANTED BUGS: {', '.join(self.planted_bugs)}")
        self.say("schedule:\n" + format_schedule(self.faults))
        self.history = HistoryWriter(self.out / "history.jsonl")
        setup_error = None
        try:
            self._start_cluster(config_path)
            self._create_topics()
            self._run_workload()
        except BaseException as e:
            setup_error = e
            raise
        finally:
            self._teardown(failed=setup_error is not None)
        return self._analyse()

    def _run_workload(self) -> None:
        s = self.scenario
        procs = Processes()
        stop_producers, stop_members = threading.Event(), threading.Event()
        cluster = self.client()
        # the brokers' metadata caches can lag the topics' creation in ZooKeeper by an UpdateMetadata
        wait_for(lambda: all(cluster.refresh().topic_partitions(t.name) for t in s.topics) or not s.topics,
                 30, "the brokers' metadata to list the workload topics")
        if s.client == "kafkasim":
            producers = [ProducerWorker(self.history, procs, cluster, s.producers, i, stop_producers)
                         for i in range(s.producers.count)]
            members = [MemberWorker(self.history, procs, cluster, g, slot, stop_members,
                                    random.Random(f"{self.seed}:{g.id}:{slot}"))
                       for g in s.groups for slot in range(g.members)]
        else:
            parts = {t.name: t.partitions for t in s.topics}
            producer_kind, member_kind = ((JavaProducerWorker, JavaMemberWorker) if s.client == "java"
                                          else (RealProducerWorker, RealMemberWorker))
            producers = [producer_kind(self.history, procs, s.client, self.kafka_bootstrap, s.producers,
                                       parts.get(s.producers.topic, 1), i, stop_producers)
                         for i in range(s.producers.count)]
            members = [member_kind(self.history, procs, s.client, self.kafka_bootstrap, g, parts[g.topic],
                                   slot, stop_members)
                       for g in s.groups for slot in range(g.members)]
        probe_topic = next((t.name for t in s.topics if t.name != OFFSETS_TOPIC), OFFSETS_TOPIC)
        probes = [ProbeWorker(self.history, procs, cluster, s.probes, i, probe_topic, stop_members)
                  for i in range(s.probes.groups)]
        workers = producers + members + probes
        if s.command is not None:   # the user's application: started before our producers write its input
            from chaos.apps import AppRun
            self.apps = AppRun(s.command, self.out, self.kafka_bootstrap, self.history, procs, cluster,
                               next(t.partitions for t in s.topics if t.name == s.command.input))
            self.apps.start()
        if s.transactions is not None:   # the pipelines: started before our producers write their input
            from chaos.txn_run import TxnRun
            parts = {t.name: t.partitions for t in s.topics}
            self.txns = TxnRun(s.transactions, self.out, self.kafka_bootstrap, self.history, procs,
                               parts[s.transactions.input], parts[s.transactions.output], self.seed)
            self.txns.start()
        nemesis = Nemesis(self.cluster, self.net, self.history, self.view,
                          self.cluster.cfg.session_timeout_ms, self.apps.processes if self.apps else None,
                          disks=self.disks)
        progress = Progress(self.stream, self.duration_s, len(self.faults), self.history.counts,
                            enabled=self.show_progress)
        for w in workers:
            w.start()
        # the workload starts, and the faults' times count from it, once every client is built: a Java client's
        # JVM takes seconds to start, more on a busy machine (a run of 13 s once ended before its producer sent)
        deadline = time.monotonic() + CLIENTS_READY_S
        for w in workers:
            w.ready.wait(max(0.0, deadline - time.monotonic()))
        t0 = time.monotonic()
        progress.start(t0)
        try:
            self._nemesis_loop(nemesis, t0, progress)
            self._mark(END_PHASE)   # the end phase: no fault from here on (judge/timeline.py's attribution)
            stop_producers.set()
            for w in producers:
                w.join(timeout=30)
            nemesis.heal_everything()
            progress.phase("healing")
            try:
                self.cluster.wait_ready(timeout=120)
                self._wait_topics_led(60)
            except TimeoutError as e:  # a finding, not a crash of the tool: the checkers still run
                self.end_errors.append(f"the cluster did not recover after every fault was healed: {e}")
            else:
                self._wait_settled(30)
            progress.phase("final reads")
            app_output = s.command.output_topic if s.command else None   # read once the app has stopped
            reads = [final_read(self.history, procs, cluster, t.name, p)
                     for t in s.topics if t.name not in (OFFSETS_TOPIC, app_output)   # offsets: listed to pin it
                     for p in range(t.partitions)]
            self.final_reads_ok = all(reads)
            progress.phase("draining groups")
            for m in members:
                m.draining.set()
            self._drain(cluster)
            if self.apps is not None:
                t = s.command.input
                self.apps.end(cluster, self._log_ends(cluster, t, next(x.partitions for x in s.topics if x.name == t)))
            if self.txns is not None:
                progress.phase("draining transactions")
                t = s.transactions.input
                self.txns.end(cluster, self._log_ends(cluster, t, next(x.partitions for x in s.topics if x.name == t)))
            stop_members.set()       # members leave their groups; probes make their final fetch
            for w in members + probes:
                w.join(timeout=30)
            self._final_committed(members)
        finally:
            stop_producers.set()
            stop_members.set()
            if self.apps is not None:
                self.apps.stop()
            if self.txns is not None:
                self.txns.stop()
                workers += [w for w in self.txns.workers() if w.name not in self.txns.stuck]
            for w in workers:
                w.join(timeout=30)
            progress.stop()
            cluster.close()
        self.worker_errors = [f"{w.name}: {w.error!r}" for w in workers if w.error is not None] + self.end_errors
        self.crashes = sum(m.crashes for m in members)
        self.stalls = sum(m.stalls for m in members)

    def _nemesis_loop(self, nemesis: Nemesis, t0: float, progress: Progress) -> None:
        end = t0 + self.duration_s
        pending = list(self.faults)
        active: Active | None = None
        while True:
            now = time.monotonic()
            if active is not None and now >= t0 + active.fault.heal_at_ms / 1000:
                nemesis.heal(active)
                progress.fault(None)
                active = None
                continue
            if active is None and pending and now >= t0 + pending[0].at_ms / 1000:
                f = pending.pop(0)
                active = nemesis.start(f)
                progress.fault(f, active.skipped)
                continue
            if now >= end and active is None:
                return
            deadlines = [end]
            if active is not None:
                deadlines.append(t0 + active.fault.heal_at_ms / 1000)
            elif pending:
                deadlines.append(t0 + pending[0].at_ms / 1000)
            progress.wait(max(0.0, min(deadlines) - time.monotonic()))

    def _wait_topics_led(self, timeout: float) -> None:
        names = {t.name for t in self.scenario.topics}

        def led() -> bool:
            v = self.cluster.view()
            return all(v.topics.get(t) and all(s["leader"] >= 0 for s in v.topics[t]["partitions"].values())
                       for t in names)
        wait_for(led, timeout, "every workload partition to have a leader")

    def _wait_settled(self, timeout: float) -> None:
        """Before the final reads: every workload partition's ISR holds all its replicas again and its
        leader's HW has reached its LEO (the producers have stopped).  A leader elected a moment ago
        can have a lower HW than its followers until their next fetch, and acknowledged records above
        it are not yet readable.  A partition that does not settle in ``timeout`` is read as it is:
        the checkers judge what the final read saw."""
        names = {t.name for t in self.scenario.topics if t.name != OFFSETS_TOPIC}

        def settled() -> bool:
            v = self.cluster.view()
            parts = [s for t in names if v.topics.get(t) for s in v.topics[t]["partitions"].values()]
            if not all(set(s["isr"]) == set(s["replicas"]) for s in parts):
                return False
            offsets = replica_offsets(v, timeout_s=1.0)
            for t in names:
                for p, s in (v.topics.get(t) or {}).get("partitions", {}).items():
                    o = offsets.get((t, p))
                    if o is None or o["high_watermark"] is None or \
                            o["high_watermark"] < o["leo"].get(s["leader"], -1):
                        return False
            return True
        try:
            wait_for(settled, timeout, "every workload partition's ISR full and its HW at its LEO")
        except TimeoutError:
            pass

    def _drain(self, cluster: ClusterClient, timeout_s: float = 60.0) -> None:
        """Let each group consume and commit up to the end of its topic."""
        ends: dict[str, dict[tuple[str, int], int]] = {}
        for t in self.scenario.topics:
            ends[t.name] = self._log_ends(cluster, t.name, t.partitions)
        self.drained: dict[str, bool] = {}
        admin = GroupAdmin(cluster, timeout_s=5.0)   # not recorded: the members' own ops are the history
        for g in self.scenario.groups:
            want = ends[g.topic]

            def caught_up() -> bool:
                got = admin.committed(g.id)
                return all(got.get(tp, -1) >= end for tp, end in want.items())
            try:
                wait_for(caught_up, timeout_s, f"group {g.id} to commit up to the end of {g.topic}", interval=0.5)
                self.drained[g.id] = True
            except TimeoutError:
                self.drained[g.id] = False

    def _final_committed(self, members: list[MemberWorker]) -> None:
        """The last word: each group's committed offsets, once its members have stopped."""
        for g in self.scenario.groups:
            m = next((m for m in members if m.spec.id == g.id and m.member is not None), None)
            if m is None:
                continue
            try:
                m.final_committed()
            except Exception as e:
                log.info("final fetch-committed of %s failed: %s", g.id, e)

    def _log_ends(self, cluster: ClusterClient, topic: str, partitions: int) -> dict[tuple[str, int], int]:
        from client.consumer import LATEST, PartitionFetcher
        f = PartitionFetcher(cluster)
        return f.list_offsets([(topic, p) for p in range(partitions)], LATEST)

    def _mark(self, phase: str) -> None:
        """An end-phase mark in the history (a nemesis line, once): ``end`` when the workload stops,
        ``stop`` when the brokers are stopped.  Leader moves after them are no fault's doing."""
        if self.history is not None and phase not in self._marked:
            self._marked.add(phase)
            self.history.nemesis(phase, {"phase": phase})

    def _teardown(self, failed: bool) -> None:
        if self.cluster is not None:
            if self.history is not None:
                self._mark(END_PHASE)
                self._mark(STOP_PHASE)
            try:
                self.cluster.down()
            except Exception as e:
                log.warning("stopping the cluster failed: %s", e)
        if self.proxy is not None:
            self.proxy.stop()
        if self.netns is not None:
            self.netns.down()
        if self.disks is not None:
            for problem in self.disks.unmount_all():
                self.end_errors.append(f"unmounting a log directory failed: {problem}")
        if self.history is not None:
            self.history.close()

    # ------------------------------------------------------------------ analysis

    def _analyse(self) -> RunResult:
        ops = read_history(self.out / "history.jsonl")
        events = read_run_events(self.out / "cluster")
        write_edn(ops, self.out / "history.edn")
        unclean = bool(self.cluster.cfg.get("unclean.leader.election.enable"))
        # the configured count: a scenario that lists __consumer_offsets creates it with no topic_created event
        n_offsets = self.cluster.cfg.get("offsets.topic.num.partitions")
        app = load_app(self.out) if self.scenario.command is not None else None
        if self.scenario.command is not None and app is None:
            app = {"group": self.scenario.command.group, "input": self.scenario.command.input, "output": None}
        txn = None
        if self.scenario.transactions is not None:
            from chaos.txn_run import load_txn
            txn = load_txn(self.out) or {"input": self.scenario.transactions.input,
                                         "output": self.scenario.transactions.output,
                                         "group": self.scenario.transactions.group}
        result = check(ops, events, unclean_election=unclean, offsets_partitions=n_offsets, app=app, txn=txn)
        rows = failover_timeline(ops, events, offsets_partitions=n_offsets,
                                 observed_groups=[app["group"]] if app else ())
        counts: dict[str, int] = {}
        for op in ops:
            if op["type"] != "invoke" and op["process"] != "nemesis":
                counts[f"{op['f']}:{op['type']}"] = counts.get(f"{op['f']}:{op['type']}", 0) + 1
        client_ops = sum(1 for op in ops if op["type"] == "invoke")
        verdict, code = result.verdict, result.exit_code
        notes = list(getattr(self, "worker_errors", []))
        formed = {op.get("group") for op in ops if op["f"] == "sync" and op["type"] == "ok"}
        for g in self.scenario.groups:
            if g.id not in formed:
                errs = sorted({str(op.get("error")) for op in ops if op.get("group") == g.id and op["type"] == "fail"})
                notes.append(f"group {g.id} never completed a rebalance (errors: {', '.join(errs[:3]) or 'none'})")
        if notes and verdict == "valid":
            verdict, code = "unknown", 2
        results = {
            "scenario": self.scenario.name, "seed": self.seed, "duration_s": self.duration_s,
            "planted_bugs": list(self.planted_bugs), "verdict": verdict, "exit_code": code,
            "checks": result.to_json(), "timeline": rows, "timeline_summary": summarize(rows),
            "ops": {"invoked": client_ops, "ops_per_s": round(client_ops / self.duration_s, 1), "by_outcome": counts},
            "faults": len(self.faults), "member_crashes": getattr(self, "crashes", 0),
            "member_stalls": getattr(self, "stalls", 0), "drained": getattr(self, "drained", {}),
            "workload_errors": notes,
        }
        if app is not None:
            results["app"] = app_results(app, result)
        if txn is not None:
            from chaos.txn_run import txn_results
            from judge.txn_timeline import format_txn_table, txn_failover_timeline, txn_summary
            txn_rows = txn_failover_timeline(ops, events, self.cluster.cfg.get("transaction.state.log.num.partitions"))
            results["transactions"] = txn_results(txn, result)
            results["txn_timeline"], results["txn_timeline_summary"] = txn_rows, txn_summary(txn_rows)
        (self.out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
        self.say("")
        self.say(format_table(rows))
        self.say(f"\nops: {client_ops} invoked ({results['ops']['ops_per_s']}/s); faults: {len(self.faults)}; "
                 f"member crashes: {results['member_crashes']}, stalls: {results['member_stalls']}")
        for a in result.anomalies:
            self.say(f"ANOMALY {a.kind}: {a.message}")
        for u in result.unknowns:
            self.say(f"unknown: {u}")
        for n in notes:
            self.say(f"workload error: {n}")
        if app is not None:
            self.say(format_app(results["app"]))
        if txn is not None:
            self.say("\ntransaction coordinators:\n" + format_txn_table(results["txn_timeline"]))
            t = results["transactions"]
            self.say(f"transactions: {t['commits']} committed, drained: {t['drained']}, zombies: {t['zombies']}")
        self.say(f"verdict: {verdict.upper()}  (results in {self.out / 'results.json'})")
        return RunResult(self.out, verdict, code, results)


def default_out(scenario: Scenario, seed: int) -> Path:
    return Path("runs") / f"{scenario.name}-{seed}-{time.strftime('%Y%m%d-%H%M%S')}"
