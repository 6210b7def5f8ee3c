"""Data-plane commands for labs: ``produce``, ``consume``, and the offsets in ``topics --describe``.

    kafkasim produce --topic T [--partition P] [--key K] [--acks all|1|0] [VALUE ...]   (else stdin lines)
    kafkasim consume --topic T [--partition P] [--offset N | --from-beginning] [--max-messages N]
    kafkasim topics --describe [--topic T] [--watch [--interval S]]
"""
from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sys
import time
from typing import Any

from cli.common import guard, open_cluster

# the clients are imported by the commands that use them: `kafkasim` builds every command's parser on each
# call, and a command such as `cluster status` should not pay for the client's and the broker's imports


def bootstrap_of(cluster) -> list[str]:
    return [f"{b.host}:{b.port}" for b in cluster.cfg.brokers]


# ---------------------------------------------------------------------- describe with LEO and HW

def offsets_suffix(s: dict[str, Any]) -> str:
    if "leo" not in s:
        return ""
    hw = "-" if s.get("high_watermark") is None else s["high_watermark"]
    leos = ",".join(f"{b}={s['leo'].get(str(b), '-')}" for b in s["replicas"])
    return f"\tHw: {hw}\tLeo: {leos}"


def watch(cluster, topic: str | None, interval_s: float, describe, out=sys.stdout) -> int:
    """Redraw the describe output in place until interrupted (live demos).

    Ctrl-C (SIGINT) ends it after the redraw in hand.  Its handler only records the signal, taking no lock: a
    handler runs in the main thread between two of its bytecodes, so one that set a ``threading.Event`` could
    land while the same thread held that Event's lock inside ``wait`` and hang the command for good.  Nor does it
    raise, so an interrupt never lands inside a ZooKeeper or gRPC call (that could leave a client's threads
    behind and the process hanging at exit).  The wait between redraws is a ``select`` on the signal's wakeup
    fd (``signal.set_wakeup_fd``), which the interpreter writes to as the signal arrives: Ctrl-C cuts it short."""
    from launcher.cluster import add_offsets

    stopped: list[int] = []
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: stopped.append(signum))
    previous_fd = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    try:
        while not stopped:
            view = cluster.view()
            add_offsets(view)
            out.write("\x1b[H\x1b[2J")
            print(time.strftime("%H:%M:%S"), f"controller {view.controller_id} epoch {view.controller_epoch}",
                  file=out)
            describe(view, topic, out)
            out.flush()
            if not stopped:
                select.select([wake_r], [], [], interval_s)  # the refresh period, cut short by Ctrl-C
    finally:
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGINT, previous)
        os.close(wake_r)
        os.close(wake_w)
    return 0


# ---------------------------------------------------------------------- produce / consume

def cmd_produce(args: argparse.Namespace) -> int:
    from client.metadata import ClusterClient
    from client.producer import Producer, parse_acks

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
    from client.consumer import PartitionFetcher
    from client.metadata import ClusterClient

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
        moved = cluster.elect_preferred_leaders(None if args.all else [(args.topic, args.partition)])
        print(f"preferred leader election: {moved} partition(s) moved")
        return 0
    finally:
        cluster.close()
