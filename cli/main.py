"""The ``kafkasim`` command, in Kafka's vocabulary.

    kafkasim cluster up|down|status      kafkasim broker --id N (foreground)
    kafkasim broker kill|term|pause|resume|start ID
    kafkasim controller                  kafkasim zk ls|get PATH
    kafkasim topics --describe           kafkasim leader-election --preferred
    kafkasim produce --topic T [VALUE...]   kafkasim consume --topic T [--from-beginning]
    kafkasim consumer-groups --list|--describe|--delete|--reset-offsets   kafkasim console-consumer --group G
    kafkasim broker-health --host H --port P
    kafkasim demo                        (the README's main job)
    kafkasim chaos list|run|check        chaos runs (docs/chaos.md)
    kafkasim sim run|replay|sweep|shrink seeded simulated runs of the whole cluster (docs/simulation.md)
    kafkasim analyze RUN_DIR...          chaos runs -> Parquet tables and a report (docs/analysis.md)
    kafkasim ui [--port 8080] [--host H] [--read-only] [--replay RUN_DIR]   the web view (docs/ui.md)
    kafkasim reference up|down|status    real Kafka 2.8.2 brokers beside kafkasim (docs/reference.md)
    kafkasim reference tool NAME ARGS    one of Kafka 2.8.2's tools (kafka-topics, ...) from the jar cache
    kafkasim conformance [--filter API]  the same requests to Kafka 2.8.2 and kafkasim, compared (docs/conformance.md)
    kafkasim compare SCENARIO|all        a scenario on Kafka 2.8.2 and on kafkasim, compared (docs/compare.md)
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any

from cli.common import open_cluster
from node.config import ConfigError

BROKER_ACTIONS = {"kill": signal.SIGKILL, "term": signal.SIGTERM, "pause": signal.SIGSTOP,
                  "resume": signal.SIGCONT, "start": None}


def print_view(view, processes: dict[int, dict[str, Any]] | None = None, out=sys.stdout,
               listeners: dict[int, list[str]] | None = None) -> None:
    """The controller, each broker (registration, gRPC address, Kafka listeners, epoch, process), the topics."""
    print(f"Controller: broker {view.controller_id}  epoch {view.controller_epoch}", file=out)
    ids = sorted(set(view.brokers) | set(processes or {}))
    for b in ids:
        info = view.brokers.get(b)
        proc = (processes or {}).get(b, {})
        state = "registered" if info else "not registered"
        epoch = f"epoch {info['epoch']}" if info else ""
        pid = (f"pid {proc['pid']} {proc.get('state')}" if proc.get("pid")
               else "not started by this tool" if proc else "")
        where = f"grpc {info['host']}:{info['port']}" if info else ""
        kafka = f"kafka {','.join(listeners[b])}" if (listeners or {}).get(b) else ""
        print(f"Broker {b}: {state:<15} {where:<27} {kafka:<37} {epoch:<14} {pid}", file=out)
    describe_topics(view, None, out)


def kafka_listeners(cluster) -> dict[int, list[str]]:
    """Each configured broker's Kafka listeners, as a client coming in on each is told to dial it:
    ``NAME://host:port`` (``advertised.listeners``, else ``listeners``)."""
    return {b.id: [f"{name}://{host}:{port}" for name, host, port in b.advertised_endpoints]
            for b in cluster.cfg.brokers}


def describe_topics(view, topic: str | None, out=sys.stdout) -> None:
    from cli.data import offsets_suffix
    for t, info in sorted(view.topics.items()):
        if topic and t != topic:
            continue
        parts = info["partitions"]
        rf = len(next(iter(parts.values()))["replicas"]) if parts else 0
        cfgs = ",".join(f"{k}={v}" for k, v in sorted(info["config"].items()))
        print(f"Topic: {t}\tPartitionCount: {len(parts)}\tReplicationFactor: {rf}\tConfigs: {cfgs}", file=out)
        for p, s in sorted(parts.items()):
            print(f"\tTopic: {t}\tPartition: {p}\tLeader: {s['leader'] if s['leader'] >= 0 else 'none'}"
                  f"\tLeaderEpoch: {s['leader_epoch']}\tReplicas: {','.join(map(str, s['replicas']))}"
                  f"\tIsr: {','.join(map(str, s['isr']))}{offsets_suffix(s)}", file=out)


# ---------------------------------------------------------------------- commands

def cmd_cluster(args: argparse.Namespace) -> int:
    cluster = open_cluster(args)
    try:
        if args.action == "up":
            view = cluster.up(timeout=args.timeout)
            print(f"cluster up: ZooKeeper {cluster.connect}; run dir {cluster.run_dir}")
            c = view.controller_id
            print(f"controller: broker {c}, epoch {view.controller_epoch}; "
                  f"{len(view.brokers)} brokers; "
                  f"{sum(len(t['partitions']) for t in view.topics.values())} partitions with a leader")
            if args.ui:
                from ui.server import serve
                return serve(host=args.ui_host, port=args.ui_port, cluster=cluster, config_path=cluster.config_path)
            return 0
        if args.action == "down":
            cluster.down()
            print("cluster down")
            return 0
        view = cluster.view()
        procs = cluster.processes()
        listeners = kafka_listeners(cluster)
        if args.json:
            doc = view.to_json()
            for b in doc["brokers"]:
                b.update(alive=True, process=procs.get(b["id"]), kafka_listeners=listeners.get(b["id"], []))
            registered = {b["id"] for b in doc["brokers"]}
            for b, p in procs.items():
                if b not in registered:
                    doc["brokers"].append({"id": b, "alive": False, "process": p,
                                           "kafka_listeners": listeners.get(b, [])})
            doc["brokers"].sort(key=lambda b: b["id"])
            json.dump(doc, sys.stdout, indent=2)
            print()
        else:
            print_view(view, procs, listeners=listeners)
        return 0
    finally:
        cluster.close()


def cmd_broker_action(action: str, broker_id: int, config: str) -> int:
    ns = argparse.Namespace(config=config, brokers=None)
    cluster = open_cluster(ns)
    try:
        if action == "start":
            pid = cluster.start_broker(broker_id)
            print(f"broker {broker_id} started (pid {pid})")
        else:
            pid = cluster.signal_broker(broker_id, BROKER_ACTIONS[action])
            print(f"broker {broker_id} (pid {pid}): sent {BROKER_ACTIONS[action].name}")
        return 0
    finally:
        cluster.close()


def cmd_controller(args: argparse.Namespace) -> int:
    cluster = open_cluster(args)
    try:
        view = cluster.view()
        if args.json:
            print(json.dumps({"broker_id": view.controller_id, "epoch": view.controller_epoch}))
        elif view.controller_id is None:
            print(f"no active controller (last epoch {view.controller_epoch})")
        else:
            print(f"controller: broker {view.controller_id}, epoch {view.controller_epoch}")
        return 0
    finally:
        cluster.close()


def cmd_zk(args: argparse.Namespace) -> int:
    from zk.errors import NoNode

    cluster = open_cluster(args)
    try:
        zk = cluster.zk()
        try:
            if args.action == "ls":
                print("[" + ", ".join(sorted(zk.get_children(args.path))) + "]")
            else:
                data, stat = zk.get(args.path)
                print(data.decode(errors="replace") if data else "")
                for f, v in (("czxid", hex(stat.czxid)), ("mzxid", hex(stat.mzxid)), ("ctime", stat.ctime),
                             ("mtime", stat.mtime), ("version", stat.version), ("cversion", stat.cversion),
                             ("ephemeralOwner", hex(stat.ephemeral_owner)), ("dataLength", stat.data_length),
                             ("numChildren", stat.num_children)):
                    print(f"{f} = {v}")  # zkCli.sh's names
        except NoNode:
            print(f"Node does not exist: {args.path}", file=sys.stderr)
            return 1
        return 0
    finally:
        cluster.close()


def cmd_topics(args: argparse.Namespace) -> int:
    from zk.admin import TopicError, create_topic, delete_topic, list_topics, parse_configs

    actions = [a for a in ("create", "delete", "describe", "list") if getattr(args, a)]
    if len(actions) != 1:
        print("error: give exactly one of --create, --delete, --describe, --list", file=sys.stderr)
        return 2
    cluster = open_cluster(args)
    try:
        if args.create or args.delete:
            if not args.topic:
                print("error: --topic is required", file=sys.stderr)
                return 2
            try:
                if args.create:
                    # omitted: the cluster's num.partitions / default.replication.factor (Kafka's KIP-464)
                    partitions = cluster.cfg.get("num.partitions") if args.partitions is None else args.partitions
                    rf = (cluster.cfg.get("default.replication.factor") if args.replication_factor is None
                          else args.replication_factor)
                    create_topic(cluster.zk(), args.topic, partitions, rf, parse_configs(args.config_entries or []))
                    print(f"Created topic {args.topic}.")
                else:
                    delete_topic(cluster.zk(), args.topic)
                    print(f"Deleted topic {args.topic}.")
            except TopicError as e:
                print(f"error: {e}", file=sys.stderr)
                return 1
            return 0
        if args.list:
            print("\n".join(list_topics(cluster.zk())))
            return 0
        from cli import data
        from launcher.cluster import add_offsets
        view = cluster.view()
        if args.topic and args.topic not in view.topics:
            print(f"error: topic '{args.topic}' does not exist", file=sys.stderr)
            return 1
        if args.watch:
            return data.watch(cluster, args.topic, args.interval, describe_topics)
        add_offsets(view)
        if args.json:
            doc = view.to_json()["topics"]
            print(json.dumps([t for t in doc if not args.topic or t["topic"] == args.topic], indent=2))
        else:
            describe_topics(view, args.topic)
        return 0
    finally:
        cluster.close()


def cmd_ui(args: argparse.Namespace) -> int:
    from ui.server import serve

    if args.replay:
        run = Path(args.replay)
        if not run.is_dir():
            print(f"error: --replay {args.replay}: no such directory", file=sys.stderr)
            return 2
        try:
            return serve(host=args.host, port=args.port, replay=run)
        except FileNotFoundError as e:
            print(f"error: --replay: {e}", file=sys.stderr)
            return 2
    cluster = open_cluster(args)
    try:
        return serve(host=args.host, port=args.port, read_only=args.read_only, cluster=cluster,
                     config_path=cluster.config_path)
    finally:
        cluster.close()


def cmd_demo(args: argparse.Namespace) -> int:
    from cli import demo   # loads confluent-kafka (librdkafka) only when the demo runs

    return demo.run(args)


def cmd_broker_health(args: argparse.Namespace) -> int:
    import grpc

    from proto import kafkasim_pb2 as pb
    from proto import kafkasim_pb2_grpc as pbg

    try:
        with grpc.insecure_channel(f"{args.host}:{args.port}") as ch:
            r = pbg.BrokerStub(ch).DescribeBroker(pb.DescribeBrokerRequest(), timeout=args.timeout)
    except grpc.RpcError as e:
        print(f"unhealthy: {e.code().name}", file=sys.stderr)
        return 1
    if r.broker_epoch < 0:
        print(f"unhealthy: broker {r.broker_id} is not registered", file=sys.stderr)
        return 1
    print(f"broker {r.broker_id} healthy: epoch {r.broker_epoch}, controller {r.known_controller_id}")
    return 0


class _ClusterOrTopicConfig(argparse.Action):
    """kafka-topics.sh's --config KEY=VALUE, next to our --config cluster.yaml: a value with '='
    is a topic config entry, anything else the cluster definition file."""

    def __call__(self, parser, namespace, value, option_string=None):
        if "=" in value:
            namespace.config_entries = [*getattr(namespace, "config_entries", []), value]
        else:
            namespace.config = value


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kafkasim", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)

    def with_config(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--config", default="cluster.yaml", help="cluster definition (default: cluster.yaml)")
        return p

    c = with_config(sub.add_parser("cluster", help="start, inspect or stop the local cluster"))
    c.add_argument("action", choices=["up", "down", "status"])
    c.add_argument("--brokers", type=int, help="up: run N brokers (ids 1..N) instead of cluster.yaml's list")
    c.add_argument("--json", action="store_true", help="status: machine-readable output")
    c.add_argument("--timeout", type=float, default=60.0, help="up: seconds to wait for readiness")
    c.add_argument("--ui", action="store_true", help="up: then serve the web view (docs/ui.md) until Ctrl-C")
    c.add_argument("--ui-port", type=int, default=8080, help="--ui: the web view's port (default 8080)")
    c.add_argument("--ui-host", default="127.0.0.1", help="--ui: the address to bind (default 127.0.0.1)")
    c.set_defaults(func=cmd_cluster)

    sub.add_parser("broker", help="run a broker (--id N), or: broker kill|term|pause|resume|start ID",
                   add_help=False)

    k = with_config(sub.add_parser("controller", help="which broker is the controller, in which epoch"))
    k.add_argument("--json", action="store_true")
    k.set_defaults(func=cmd_controller)

    z = with_config(sub.add_parser("zk", help="read ZooKeeper like zookeeper-shell"))
    z.add_argument("action", choices=["ls", "get"])
    z.add_argument("path")
    z.set_defaults(func=cmd_zk)

    t = sub.add_parser("topics", help="like kafka-topics.sh")
    t.add_argument("--config", action=_ClusterOrTopicConfig, default="cluster.yaml", metavar="FILE|KEY=VALUE",
                   help="the cluster definition (default: cluster.yaml), or, as KEY=VALUE (repeatable), "
                        "a topic config for --create: cleanup.policy, min.insync.replicas, ...")
    t.set_defaults(config_entries=[])
    t.add_argument("--create", action="store_true")
    t.add_argument("--delete", action="store_true")
    t.add_argument("--describe", action="store_true")
    t.add_argument("--list", action="store_true")
    t.add_argument("--topic")
    t.add_argument("--partitions", type=int, help="default: num.partitions")
    t.add_argument("--replication-factor", type=int, help="default: default.replication.factor")
    t.add_argument("--json", action="store_true")
    t.add_argument("--watch", action="store_true", help="--describe: redraw in place (Ctrl-C stops)")
    t.add_argument("--interval", type=float, default=1.0, help="--watch: seconds between refreshes")
    t.set_defaults(func=cmd_topics)

    from cli import data, groups
    data.add_parsers(sub, with_config)
    groups.add_parsers(sub, with_config)

    le = with_config(sub.add_parser("leader-election", help="like kafka-leader-election.sh"))
    le.add_argument("--preferred", action="store_true", required=True)
    g = le.add_mutually_exclusive_group(required=True)
    g.add_argument("--all", action="store_true", help="every partition")
    g.add_argument("--topic")
    le.add_argument("--partition", type=int, default=0)
    le.set_defaults(func=data.cmd_leader_election)

    h = sub.add_parser("broker-health", help="exit 0 when a broker answers over gRPC (healthchecks)")
    h.add_argument("--host", default="127.0.0.1")
    h.add_argument("--port", type=int, required=True)
    h.add_argument("--timeout", type=float, default=2.0)
    h.set_defaults(func=cmd_broker_health)

    from chaos import cli as chaos_cli
    chaos_cli.add_parsers(sub)
    from sim import cli as sim_cli
    sim_cli.add_parsers(sub)

    from analysis import main as analysis_main  # imports no pyspark until the command runs
    analysis_main.add_parsers(sub)
    from reference import cli as reference_cli   # Kafka 2.8.2 itself (docs/reference.md)
    reference_cli.add_parsers(sub)
    from conformance import cli as conformance_cli   # Kafka 2.8.2 and kafkasim, answer by answer
    conformance_cli.add_parsers(sub)
    from compare import cli as compare_cli       # Kafka 2.8.2 beside kafkasim, compared (docs/compare.md)
    compare_cli.add_parsers(sub)

    u = with_config(sub.add_parser("ui", help="the web view of a live cluster or of a finished run (docs/ui.md)"))
    u.add_argument("--port", type=int, default=8080)
    u.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; any other needs the printed token for controls)")
    u.add_argument("--read-only", action="store_true", help="no controls")
    u.add_argument("--replay", metavar="RUN_DIR", help="replay a finished run (a chaos run or a cluster's run dir)")
    u.set_defaults(func=cmd_ui)

    d = with_config(sub.add_parser("demo", help="the main job: a cluster, consumer groups, a coordinator "
                                                "failover, a report (--controller: controller failovers)"))
    d.add_argument("--controller", action="store_true", help="the controller-failover demo instead")
    d.add_argument("--brokers", type=int, default=None, help="run N brokers instead of cluster.yaml's list")
    d.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    d.set_defaults(func=cmd_demo)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "broker":
        rest = argv[1:]
        if rest and rest[0] in BROKER_ACTIONS:
            ap = argparse.ArgumentParser(prog=f"kafkasim broker {rest[0]}")
            ap.add_argument("id", type=int)
            ap.add_argument("--config", default="cluster.yaml")
            a = ap.parse_args(rest[1:])
            return _run(lambda: cmd_broker_action(rest[0], a.id, a.config))
        from node.boot import broker_main
        return broker_main(rest)
    if argv[:2] == ["reference", "tool"]:   # the tool's own options are not ours to parse
        from reference.cli import run_tool
        return run_tool(argv[2:])
    args = build_parser().parse_args(argv)
    return _run(lambda: args.func(args))


def _run(fn) -> int:
    try:
        return fn()
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (RuntimeError, TimeoutError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
