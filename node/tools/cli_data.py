"""Data-plane commands for labs: ``produce``, ``consume``, and the offsets in ``topics --describe``.

    kafkasim produce --topic T [--partition P] [--key K] [--acks all|1|0] [VALUE ...]   (else stdin lines)
    kafkasim consume --topic T [--partition P] [--offset N | --from-beginning] [--max-messages N]
    kafkasim topics --describe [--topic T] [--watch [--interval S]]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import grpc

from client.consumer import PartitionFetcher
from client.metadata import ClusterClient
from client.producer import Producer, parse_acks
from kafkacommon import errors
from node.tools.cli_common import guard, open_cluster
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg


def bootstrap_of(cluster) -> list[str]:
    return [f"{b.host}:{b.port}" for b in cluster.cfg.brokers]


# ---------------------------------------------------------------------- describe with LEO and HW

def replica_offsets(view, timeout_s: float = 2.0) -> dict[tuple[str, int], dict[str, Any]]:
    """Ask every registered broker for its hosted replicas: per partition the HW (the
    leader's), the log start offset, and each replica's LEO."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for b, info in sorted(view.brokers.items()):
        try:
            with grpc.insecure_channel(f"{info['host']}:{info['port']}") as ch:
                r = pbg.BrokerStub(ch).DescribeBroker(pb.DescribeBrokerRequest(), timeout=timeout_s)
        except grpc.RpcError:
            continue  # paused or dying: its replicas show no LEO
        for s in r.replicas:
            entry = out.setdefault((s.topic, s.partition), {"leo": {}, "high_watermark": None,
                                                            "log_start_offset": None})
            entry["leo"][b] = s.log_end_offset
            if s.is_leader:
                entry["high_watermark"] = s.high_watermark
                entry["log_start_offset"] = s.log_start_offset
    return out


def add_offsets(view) -> None:
    """Put the replicas' LEOs and the HW into the view's partitions (in place)."""
    offsets = replica_offsets(view)
    for t, info in view.topics.items():
        for p, s in info["partitions"].items():
            o = offsets.get((t, p), {})
            s["high_watermark"] = o.get("high_watermark")
            s["log_start_offset"] = o.get("log_start_offset")
            s["leo"] = {str(b): leo for b, leo in sorted(o.get("leo", {}).items())}


def offsets_suffix(s: dict[str, Any]) -> str:
    if "leo" not in s:
        return ""
    hw = "-" if s.get("high_watermark") is None else s["high_watermark"]
    leos = ",".join(f"{b}={s['leo'].get(str(b), '-')}" for b in s["replicas"])
    return f"\tHw: {hw}\tLeo: {leos}"


def watch(cluster, topic: str | None, interval_s: float, describe, out=sys.stdout) -> int:
    """Redraw the describe output in place until interrupted (live demos)."""
    try:
        while True:
            view = cluster.view()
            add_offsets(view)
            out.write("\x1b[H\x1b[2J")
            print(time.strftime("%H:%M:%S"), f"controller {view.controller_id} epoch {view.controller_epoch}",
                  file=out)
            describe(view, topic, out)
            out.flush()
            time.sleep(interval_s)  # the refresh period of a display loop
    except KeyboardInterrupt:
        return 0


# ---------------------------------------------------------------------- produce / consume

def cmd_produce(args: argparse.Namespace) -> int:
    cluster = open_cluster(args)
    acks = parse_acks(args.acks)
    values = args.values if args.values else (line.rstrip("\n") for line in sys.stdin)
    with ClusterClient(bootstrap_of(cluster)) as cc:
        producer = Producer(cc, acks=acks, request_timeout_ms=args.timeout_ms)
        n = 0
        for v in values:
            key = args.key
            if args.key_separator and args.key_separator in v:
                key, v = v.split(args.key_separator, 1)
            md = producer.send(args.topic, v.encode(), key=None if key is None else key.encode(),
                               partition=args.partition)
            n += 1
            if args.verbose:
                print(f"{md.topic}-{md.partition}@{md.offset} (leader epoch {md.leader_epoch})")
        if args.verbose:
            print(f"{n} records sent", file=sys.stderr)
    return 0


def cmd_consume(args: argparse.Namespace) -> int:
    if args.offset is not None and args.partition is None:
        print("error: --offset needs --partition", file=sys.stderr)
        return 2
    cluster = open_cluster(args)
    with ClusterClient(bootstrap_of(cluster)) as cc:
        parts = cc.partitions_for(args.topic)
        if args.partition is not None and args.partition not in parts:
            print(f"error: {args.topic} has no partition {args.partition}", file=sys.stderr)
            return 1
        fetcher = PartitionFetcher(cc, auto_offset_reset="earliest" if args.from_beginning else "latest")
        fetcher.assign([(args.topic, p) for p in ([args.partition] if args.partition is not None else parts)])
        if args.offset is not None:
            fetcher.seek((args.topic, args.partition), args.offset)
        seen, deadline = 0, time.monotonic() + args.timeout_ms / 1000 if args.timeout_ms else None
        while args.max_messages is None or seen < args.max_messages:
            if deadline is not None and time.monotonic() >= deadline:
                break
            for r in fetcher.poll(max_wait_ms=200):
                if args.json:
                    print(json.dumps({"topic": r.topic, "partition": r.partition, "offset": r.offset,
                                      "timestamp_ms": r.timestamp_ms,
                                      "key": None if r.key is None else r.key.decode(errors="replace"),
                                      "value": None if r.value is None else r.value.decode(errors="replace")}))
                else:
                    value = "null" if r.value is None else r.value.decode(errors="replace")
                    key = "null" if r.key is None else r.key.decode(errors="replace")
                    print(f"{key}{args.key_separator}{value}" if args.print_key else value)
                sys.stdout.flush()
                seen += 1
                if args.max_messages is not None and seen >= args.max_messages:
                    break
        print(f"Processed a total of {seen} messages", file=sys.stderr)
    return 0


def add_parsers(sub, with_config) -> None:
    p = with_config(sub.add_parser("produce", help="like kafka-console-producer.sh: values from args or stdin"))
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, help="explicit partition (default: Kafka's default partitioner)")
    p.add_argument("--key", help="key for every record (hashed with murmur2 to pick the partition)")
    p.add_argument("--key-separator", help="split each line into key and value at this separator")
    p.add_argument("--acks", default="all", help="all (-1), 1 or 0 (default: all)")
    p.add_argument("--timeout-ms", type=int, default=30000, help="request timeout for acks=all")
    p.add_argument("--verbose", "-v", action="store_true", help="print each record's partition and offset")
    p.add_argument("values", nargs="*", help="values to send; none: one per line from stdin")
    p.set_defaults(func=lambda a: guard(cmd_produce, a))

    c = with_config(sub.add_parser("consume", help="like kafka-console-consumer.sh (no group)"))
    c.add_argument("--topic", required=True)
    c.add_argument("--partition", type=int)
    c.add_argument("--offset", type=int, help="start offset (needs --partition)")
    c.add_argument("--from-beginning", action="store_true")
    c.add_argument("--max-messages", type=int)
    c.add_argument("--timeout-ms", type=int, default=0, help="stop after this long (0: never)")
    c.add_argument("--print-key", action="store_true")
    c.add_argument("--key-separator", default="\t")
    c.add_argument("--json", action="store_true", help="one JSON object per record")
    c.set_defaults(func=lambda a: guard(cmd_consume, a))


def cmd_leader_election(args: argparse.Namespace) -> int:
    """``leader-election --preferred``: the controller's ElectLeaders."""
    cluster = open_cluster(args)
    try:
        view = cluster.view()
        if view.controller_id is None:
            print("error: no active controller", file=sys.stderr)
            return 1
        b = view.brokers[view.controller_id]
        tps = [] if args.all else [pb.TopicPartition(topic=args.topic, partition=args.partition)]
        with grpc.insecure_channel(f"{b['host']}:{b['port']}") as ch:
            resp = pbg.BrokerStub(ch).ElectLeaders(pb.ElectLeadersRequest(partitions=tps, preferred=True), timeout=15)
        if resp.error_code:
            print(f"error: {errors.name(resp.error_code)}", file=sys.stderr)
            return 1
        print(f"preferred leader election: {len(resp.partition_errors)} partition(s) moved")
        return 0
    finally:
        cluster.close()
