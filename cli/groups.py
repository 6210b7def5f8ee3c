"""``kafkasim consumer-groups`` (like kafka-consumer-groups.sh) and ``kafkasim console-consumer``.

    kafkasim consumer-groups --list [--json]
    kafkasim consumer-groups --describe --group G [--members | --offsets | --state] [--json]
    kafkasim consumer-groups --delete --group G
    kafkasim consumer-groups --reset-offsets --group G --topic T
        (--to-earliest | --to-latest | --to-offset N | --shift-by N) [--execute]
    kafkasim console-consumer --group G --topic T [--max-messages N] [--assignor range]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

from kafkacommon import errors
from cli.common import guard, open_cluster
from cli.data import bootstrap_of

if TYPE_CHECKING:   # the clients are imported by the commands that use them (cli/data.py says why)
    from client.admin import GroupAdmin


def _table(rows: list[list], headers: list[str]) -> str:
    cells = [headers] + [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def cmd_consumer_groups(args: argparse.Namespace) -> int:
    actions = [a for a in ("list", "describe", "delete", "reset_offsets") if getattr(args, a)]
    if len(actions) != 1:
        print("error: give exactly one of --list, --describe, --delete, --reset-offsets", file=sys.stderr)
        return 2
    if not args.list and not args.group:
        print("error: --group is required", file=sys.stderr)
        return 2
    from client.admin import GroupAdmin
    from client.metadata import ClusterClient

    cluster = open_cluster(args)
    with ClusterClient(bootstrap_of(cluster)) as cc:
        admin = GroupAdmin(cc)
        if args.list:
            groups = admin.list_groups()
            print(json.dumps(groups, indent=2) if args.json else "\n".join(g["group"] for g in groups))
            return 0
        if args.delete:
            code = admin.delete(args.group)
            if code != errors.NONE:
                print(f"error: deleting group {args.group!r}: {errors.name(code)}", file=sys.stderr)
                return 1
            print(f"Deletion of requested consumer groups ('{args.group}') was successful.")
            return 0
        if args.reset_offsets:
            return _reset(admin, args)
        d = admin.describe(args.group)
        if d.state == "Dead" and not d.offsets and not args.json:
            print(f"Consumer group '{args.group}' does not exist.")
            return 0
        if args.json:
            doc = d.to_json()
            if args.members:
                doc = {k: doc[k] for k in ("group", "coordinator", "state", "members")}
            elif args.state:
                doc = {k: v for k, v in doc.items() if k not in ("members", "offsets")} | {
                    "num_members": len(d.members)}
            print(json.dumps(doc, indent=2))
            return 0
        if args.state:
            print(_table([[d.group_id, f"broker {d.coordinator}", d.protocol or None, d.state, d.generation,
                           len(d.members)]],
                         ["GROUP", "COORDINATOR", "ASSIGNMENT-STRATEGY", "STATE", "GENERATION", "#MEMBERS"]))
        elif args.members:
            print(_table([[d.group_id, m["member_id"], m["host"], m["client_id"], len(m["assignment"]),
                           ",".join(m["assignment"])] for m in d.members],
                         ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]))
        else:
            print(f"Group {d.group_id}: coordinator broker {d.coordinator}, state {d.state}, "
                  f"generation {d.generation}, {len(d.members)} members\n")
            print(_table([[d.group_id, o["topic"], o["partition"], o["current_offset"], o["log_end_offset"],
                           o["lag"], o["member_id"], o["client_id"]] for o in d.offsets],
                         ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                          "CLIENT-ID"]))
        return 0


def _reset(admin: GroupAdmin, args: argparse.Namespace) -> int:
    if not args.topic:
        print("error: --reset-offsets needs --topic", file=sys.stderr)
        return 2
    specs = [(k, v) for k, v in (("to-earliest", args.to_earliest or None), ("to-latest", args.to_latest or None),
                                 ("to-offset", args.to_offset), ("shift-by", args.shift_by)) if v is not None]
    if len(specs) != 1:
        print("error: give exactly one of --to-earliest, --to-latest, --to-offset N, --shift-by N", file=sys.stderr)
        return 2
    how, value = specs[0]
    plan = admin.plan_reset(args.group, args.topic, how, None if isinstance(value, bool) else value)
    rows = [[args.group, t, p, o] for (t, p), o in sorted(plan.items())]
    if not args.execute:
        print(_table(rows, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]))
        print("\n(dry run: add --execute to commit these offsets)")
        return 0
    result = admin.reset(args.group, plan)
    bad = {tp: c for tp, c in result.items() if c != errors.NONE}
    print(_table(rows, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]))
    if bad:
        print(f"error: {', '.join(f'{t}-{p}: {errors.name(c)}' for (t, p), c in sorted(bad.items()))}",
              file=sys.stderr)
        return 1
    return 0


class _PrintingListener:
    def on_partitions_revoked(self, partitions):
        print(f"# revoked {','.join(f'{t}-{p}' for t, p in partitions)}", file=sys.stderr)

    def on_partitions_assigned(self, partitions):
        print(f"# assigned {','.join(f'{t}-{p}' for t, p in partitions)}", file=sys.stderr)


def cmd_console_consumer(args: argparse.Namespace) -> int:
    from client.group import GroupMember
    from client.metadata import ClusterClient

    cluster = open_cluster(args)
    with ClusterClient(bootstrap_of(cluster)) as cc:
        member = GroupMember(cc, args.group, [args.topic], assignors=args.assignor.split(","),
                             client_id=args.client_id, session_timeout_ms=args.session_timeout_ms,
                             heartbeat_interval_ms=max(100, args.session_timeout_ms // 3),
                             listener=_PrintingListener(),
                             auto_offset_reset="earliest" if args.from_beginning else "latest")
        seen = 0
        deadline = time.monotonic() + args.timeout_ms / 1000 if args.timeout_ms else None
        try:
            while args.max_messages is None or seen < args.max_messages:
                if deadline is not None and time.monotonic() >= deadline:
                    break
                batch = member.poll(200)
                for r in batch:
                    print("null" if r.value is None else r.value.decode(errors="replace"))
                    seen += 1
                sys.stdout.flush()
                if batch:
                    member.commit()
        except KeyboardInterrupt:
            pass
        finally:
            member.close()
        print(f"Processed a total of {seen} messages", file=sys.stderr)
    return 0


def add_parsers(sub, with_config) -> None:
    g = with_config(sub.add_parser("consumer-groups", help="like kafka-consumer-groups.sh"))
    g.add_argument("--list", action="store_true")
    g.add_argument("--describe", action="store_true")
    g.add_argument("--delete", action="store_true")
    g.add_argument("--reset-offsets", action="store_true")
    g.add_argument("--group")
    g.add_argument("--topic")
    what = g.add_mutually_exclusive_group()
    what.add_argument("--members", action="store_true", help="--describe: members and their assignments")
    what.add_argument("--offsets", action="store_true", help="--describe: offsets and lag (the default)")
    what.add_argument("--state", action="store_true", help="--describe: coordinator, state, generation")
    g.add_argument("--to-earliest", action="store_true")
    g.add_argument("--to-latest", action="store_true")
    g.add_argument("--to-offset", type=int)
    g.add_argument("--shift-by", type=int)
    g.add_argument("--execute", action="store_true", help="--reset-offsets: commit (default: dry run)")
    g.add_argument("--json", action="store_true")
    g.set_defaults(func=lambda a: guard(cmd_consumer_groups, a))

    c = with_config(sub.add_parser("console-consumer", help="consume as a member of a consumer group"))
    c.add_argument("--group", required=True)
    c.add_argument("--topic", required=True)
    c.add_argument("--from-beginning", action="store_true", help="with no committed offset, start at the earliest")
    c.add_argument("--max-messages", type=int)
    c.add_argument("--timeout-ms", type=int, default=0)
    c.add_argument("--assignor", default="range", help="range, roundrobin, sticky, cooperative-sticky (comma list)")
    c.add_argument("--client-id", default="console-consumer")
    c.add_argument("--session-timeout-ms", type=int, default=10000)
    c.set_defaults(func=lambda a: guard(cmd_console_consumer, a))

