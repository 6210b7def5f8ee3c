"""The controller's SIGTERM at scale for bench/vs_kafka.py (issue 49's scale row), the same way on both sides.

bench/scale.py times kafkasim's controller SIGTERM on 5 brokers at 1,000 and 10,000 partitions, until the next
controller has elected every leader, and holds the ratio of the two to issue 49's goal (<= 5x).  This block
measures the same path on Kafka 2.8.2 beside kafkasim, with one clock for both:

* a fresh cluster of ``BROKERS`` brokers per side and partition count, controlled shutdown on (Kafka's
  default), and one topic of N partitions (RF 3) created through the Kafka protocol as bench/vs_idle.py creates
  it (answered once its znode is written; the block then waits itself);
* once every broker holds a log directory for each replica it is assigned and every ISR of the topic is whole
  in ZooKeeper, ``SETTLE_S`` more seconds pass (a fixed span: the creation's own work, log opening, the
  LeaderAndIsr take-ups and the JIT's compilation of them, is over before the signal);
* the controller's broker gets SIGTERM.  From the signal (wall clock, as ZooKeeper's znode times and Kafka's
  logs are written):

  moved     the last of the partitions the old controller led to name another leader in ZooKeeper (the
            state znodes' mtimes: the controlled shutdown's moves);
  elected   the next controller's ``/controller`` (its ctime);
  ready     the next controller done with its failover: Kafka's "Ready to serve as the new controller with
            epoch E" in its controller.log (ms), kafkasim's ``controller_failover_done`` of epoch E (``ts_ms``),
            bench/scale.py's end point; after it every partition of the topic and of ``__consumer_offsets`` is
            checked to name a live leader in ZooKeeper.

Each side's ready at the largest count over the smallest is issue 49's scale ratio, printed for both.
"""
from __future__ import annotations

import os
import signal
import time
from typing import Any

from bench.vs_controller import POLL_S, new_controller, poll_new_leaders
from bench.vs_idle import BROKERS, create_topic_and_wait, size_ratios
from bench.vs_sides import OFFSETS, Side
from util.waiting import wait_for

TOPIC = "vs-scale"
SETTLE_S = 15.0


def create_and_settle(side: Side, partitions: int) -> float:
    """The topic created (bench/vs_idle.py's way) and settled (module docstring); seconds until logs and ISRs."""
    created = create_topic_and_wait(side, TOPIC, partitions)
    time.sleep(SETTLE_S)   # a fixed span after the creation, not a condition (module docstring)
    return created


def controller_sigterm(side: Side, partitions: int, timeout_s: float = 900.0) -> dict[str, Any]:
    """Create and settle the topic, then SIGTERM the controller; the stages (module docstring) in ms."""
    created = create_and_settle(side, partitions)
    zk = side.zk()
    old, epoch = zk.read_controller_and_epoch()
    if old is None:
        raise RuntimeError(f"{side.name}: no controller")
    snap = zk.read_snapshot()
    led = sorted(tp for tp, (st, _v) in snap.states.items() if st.leader == old)
    everything = sorted(snap.states)
    moved: dict[tuple[str, int], float] = {}
    la = os.getloadavg()[0]
    wall0 = time.time() * 1000.0
    side.signal(old, signal.SIGTERM)

    wait_for(lambda: poll_new_leaders(zk, led, old, moved), timeout_s,
             f"{side.name}: a new leader for the {len(led)} partitions broker {old} led", interval=POLL_S)
    new, elected = wait_for(lambda: new_controller(zk, old), timeout_s, f"{side.name}: a new controller",
                            interval=POLL_S)
    ready = wait_for(lambda: side.controller_ready_ms(new, epoch + 1), timeout_s,
                     f"{side.name}: broker {new}'s failover of epoch {epoch + 1}", interval=0.2)
    live = set(zk.read_brokers()) - {old}
    states = zk.read_states(everything)
    leaderless = [tp for tp in everything if tp not in states or states[tp][0].leader not in live]
    if leaderless:
        raise RuntimeError(f"{side.name}: after the failover {len(leaderless)} partitions have no live leader, "
                           f"e.g. {leaderless[:3]}")
    side.wait_exit(old, 120)
    return {"partitions": partitions, "offsets_partitions": sum(t == OFFSETS for t, _p in everything),
            "led": len(led), "create_s": created, "load": la,
            "moved": max(moved.values()) - wall0 if moved else None, "elected": elected - wall0,
            "ready": ready - wall0}


def scale_ratio(res: dict[str, list], partitions: list[int], names: dict[str, str]) -> None:
    """Each side's ready at its largest partition count over its smallest (issue 49's scale row: <= 5x)."""
    for name, hi, lo, y, x in size_ratios(res, "scale", partitions, names, lambda r: r["ready"]):
        print(f"controller SIGTERM on {name}, {BROKERS} brokers, until the next controller is ready: "
              f"{hi:,} vs {lo:,} partitions: {y:,.0f} vs {x:,.0f} ms = {y / x:.2f}x")
