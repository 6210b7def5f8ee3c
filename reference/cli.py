"""``kafkasim reference up|down|status --config cluster.yaml``: real Kafka 2.8.2 brokers beside kafkasim.

    kafkasim reference up      [--config cluster.yaml] [--timeout S] [--port-offset N] [--heap-mb M]
    kafkasim reference status  [--config cluster.yaml] [--json]
    kafkasim reference down    [--config cluster.yaml]
    kafkasim reference tool    NAME [ARGS...]      one of Kafka 2.8.2's tools from the jar cache (kafka-topics, ...)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from node.config import ConfigError, load_config


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("reference", help="real Kafka 2.8.2 brokers with the cluster.yaml's ids and settings "
                                         "(docs/reference.md)", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=["up", "down", "status", "tool"],
                   help="tool NAME [ARGS...]: one of Kafka 2.8.2's tools from the jar cache, its arguments as "
                        "bin/NAME.sh takes them (kafka-topics, kafka-consumer-groups, kafka-configs, ...)")
    p.add_argument("--config", default="cluster.yaml", help="cluster definition (default: cluster.yaml)")
    p.add_argument("--timeout", type=float, default=120.0, help="up: seconds to wait until ready")
    p.add_argument("--port-offset", type=int, default=None,
                   help="up: listen on each broker's kafkasim Kafka listener port + N (default: free ports)")
    p.add_argument("--heap-mb", type=int, default=None, help="up: each broker's -Xms/-Xmx (default 512)")
    p.add_argument("--chroot", default=None, help="up: the brokers' ZooKeeper chroot (default /kafka-reference)")
    p.add_argument("--json", action="store_true", help="status: machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from reference.jars import JarsUnavailable
    if args.action == "tool":   # `kafkasim reference tool NAME ARGS` is taken before argparse (cli/main.py)
        return run_tool([])
    from reference.kafka import DEFAULT_CHROOT, DEFAULT_HEAP_MB, ReferenceCluster

    try:
        cfg = load_config(args.config)
        ref = ReferenceCluster(cfg, chroot=args.chroot or DEFAULT_CHROOT, port_offset=args.port_offset,
                               heap_mb=args.heap_mb or DEFAULT_HEAP_MB, config_path=Path(args.config))
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        if args.action == "up":
            status = ref.up(timeout=args.timeout)
            for note in ref.startup_restarts:
                print(f"note: {note}")
            print(f"reference up: Kafka 2.8.2, {len(status['brokers'])} brokers on ZooKeeper {ref.zk_connect}; "
                  f"files in {ref.root}")
            print_status(status)
            print(f"bootstrap.servers={ref.bootstrap_servers}")
        elif args.action == "down":
            ref.down()
            print("reference down")
        elif args.json:
            json.dump(ref.status(), sys.stdout, indent=2)
            print()
        else:
            print_status(ref.status())
        return 0
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (JarsUnavailable, RuntimeError, TimeoutError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        ref.close()


def run_tool(argv: list[str]) -> int:
    """One Kafka tool, in the foreground, with this process's stdin and stdout: its exit status."""
    import subprocess
    from reference.jars import JarsUnavailable
    from reference.javaclient import JavaUnavailable, tool_command
    if not argv:
        print("error: which tool? kafkasim reference tool NAME [ARGS...] (kafka-topics, kafka-consumer-groups, "
              "kafka-configs, ...)", file=sys.stderr)
        return 2
    try:
        cmd = tool_command(argv[0], argv[1:])
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (JarsUnavailable, JavaUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    try:
        return subprocess.call(cmd)
    except KeyboardInterrupt:
        return 130


def print_status(status: dict[str, Any], out=sys.stdout) -> None:
    if not status["up"]:
        print("reference: not up (no state file; `kafkasim reference up` starts it)", file=out)
        return
    if status["zk_error"]:
        print(f"ZooKeeper {status['zookeeper']}: not reachable ({status['zk_error']})", file=out)
    controller = status["controller"]
    print(f"Controller: {'broker ' + str(controller) if controller is not None else 'none'}  "
          f"(chroot {status['chroot']})", file=out)
    for b in status["brokers"]:
        pid = f"pid {b['pid']} {b['state']}" if b["pid"] else "not started"
        reg = "registered" if b["registered"] else "not registered"
        print(f"Broker {b['id']}: {reg:<15} {b['listener'] or '':<22} {pid}", file=out)
