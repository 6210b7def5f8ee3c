"""`kafkasim demo --controller`: controller failover, told from the event logs.

1. ``cluster up``: an embedded ZooKeeper and the brokers, as real processes.
2. SIGTERM the controller: a clean handover (its session closes at once).
3. SIGKILL the new controller: detection waits for its ZooKeeper session to expire.
4. Restart both brokers: they register with new broker epochs (bounced or new).
5. Print what happened, stage by stage, and write it to <run.dir>/report.txt.
"""
from __future__ import annotations

import argparse
import signal
import time
from typing import Any

from cli.common import open_cluster
from launcher.cluster import Cluster
from node.events import read_run_events
from util.waiting import wait_for


def _first(events: list[dict], after_ns: int, type_: str, **match: Any) -> dict | None:
    for e in events:
        if e["mono_ns"] >= after_ns and e["type"] == type_ and all(e.get(k) == v for k, v in match.items()):
            return e
    return None


def failover(cluster: Cluster, sig: signal.Signals, lines: list[str], timeout: float) -> int:
    before = cluster.view()
    old, old_epoch = before.controller_id, before.controller_epoch
    led = sorted(p for p, s in before.topics["__consumer_offsets"]["partitions"].items() if s["leader"] == old)
    lines.append(f"\n== {sig.name} of the controller, broker {old} (epoch {old_epoch}), "
                 f"which leads {len(led)} offsets partitions")
    t0 = time.monotonic_ns()
    cluster.signal_broker(old, sig)
    view = wait_for(lambda: (v := cluster.view()).controller_id not in (None, old)
                    and v.controller_epoch > old_epoch and _settled(v, old) and v,
                    timeout, "a new controller that moved every leadership")
    cluster.wait_exit(old, timeout=10)
    # ZooKeeper names the new controller before its broker has logged the failover: the report is read from the
    # event lines, so it waits for the new controller's controller_failover_done (its election's line is before it)
    events = wait_for(lambda: (ev := read_run_events(cluster.run_dir)) and _first(
        ev, t0, "controller_failover_done", epoch=view.controller_epoch) and ev,
        timeout, "the new controller's controller_failover_done event line")
    stopped = _first(events, t0, "zk_session_closing", broker=old)
    elected = _first(events, t0, "controller_elected", epoch=view.controller_epoch)
    written = _first(events, t0, "partition_states_written", epoch=view.controller_epoch)
    gone_ns = stopped["mono_ns"] if stopped else t0
    lines.append("   signal sent                      t=0 ms")
    shut = _first(events, t0, "controlled_shutdown_done", broker=old)
    if shut:
        moved = [e for e in events if e["mono_ns"] >= t0 and e["type"] == "partition_state_written"
                 and e["reason"] == "controlled_shutdown"]
        lines.append(f"   controlled shutdown: the old controller moved {len(moved)} leaderships away and left "
                     f"every ISR in {shut['duration_ms']:.1f} ms")
    if stopped:
        lines.append(f"   old controller closes its session t={(stopped['mono_ns'] - t0) / 1e6:8.1f} ms")
    if elected:
        lines.append(f"   broker {elected['broker']} won the election (epoch {elected['epoch']})"
                     f"  t={(elected['mono_ns'] - t0) / 1e6:8.1f} ms")
    if written:
        lines.append(f"   {written['count']} partition states written    t={(written['mono_ns_written'] - t0) / 1e6:8.1f} ms"
                     f"  ({(written['mono_ns_written'] - gone_ns) / 1e6:.1f} ms after the old controller was gone)")
    elif shut:
        done = _first(events, t0, "controller_failover_done", epoch=view.controller_epoch)
        if done:
            lines.append(f"   new controller took over           t={(done['mono_ns'] - t0) / 1e6:8.1f} ms"
                         f"  (nothing left to write: controlled shutdown did it)")
    moved = [p for p in led if view.partition("__consumer_offsets", p)["leader"] != old]
    lines.append(f"   new controller: broker {view.controller_id}, epoch {view.controller_epoch}; "
                 f"{len(moved)}/{len(led)} of its partitions have a new leader; "
                 f"broker {old} is in {sum(old in s['isr'] for s in view.topics['__consumer_offsets']['partitions'].values())} ISRs")
    return old


def _settled(view, dead: int) -> bool:
    parts = view.topics["__consumer_offsets"]["partitions"].values()
    return all(s["leader"] != dead and s["leader"] >= 0 for s in parts)


def run(args: argparse.Namespace) -> int:
    cluster = open_cluster(args)
    lines: list[str] = []
    try:
        t = time.monotonic()
        view = cluster.up(timeout=90)
        lines.append(f"cluster up in {time.monotonic() - t:.1f}s: ZooKeeper {cluster.connect}, "
                     f"{len(view.brokers)} brokers, controller broker {view.controller_id} (epoch {view.controller_epoch})")
        session_s = cluster.cfg.session_timeout_ms / 1000
        first = failover(cluster, signal.SIGTERM, lines, timeout=30)
        second = failover(cluster, signal.SIGKILL, lines, timeout=session_s * 3 + 30)
        lines.append(f"   (SIGKILL: detection waits for the ZooKeeper session timeout, {session_s:.1f}s)")
        lines.append(f"\n== restarting brokers {first} and {second}")
        for b in (first, second):
            cluster.start_broker(b)
        view = cluster.wait_ready(60)
        wait_for(lambda: len((v := cluster.view()).brokers) == len(cluster.cfg.brokers) and v, 60, "all brokers registered")
        view = cluster.view()
        for b in (first, second):
            lines.append(f"   broker {b} registered again with broker epoch {view.brokers[b]['epoch']}")
        events = read_run_events(cluster.run_dir)
        changes = [e for e in events if e["type"] == "broker_change" and (e["new"] or e["bounced"])]
        if changes:
            last = changes[-1]
            lines.append(f"   controller saw: new {last['new']}, bounced {last['bounced']}, dead {last['dead']}")
        lines.append(f"\nfinal: controller broker {view.controller_id}, epoch {view.controller_epoch}")
        lines.append(f"event logs: {cluster.run_dir / 'events'}")
        report = "\n".join(lines)
        print(report)
        (cluster.run_dir / "report.txt").write_text(report + "\n")
        return 0
    finally:
        if not args.keep:
            cluster.down()
        cluster.close()
