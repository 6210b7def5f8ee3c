"""Controlled shutdown of a broker that leads N partitions (issue 3's goal: 500 in at most 500 ms).

    python bench/controlled_shutdown.py [--runs 3] [--partitions 1500] [--json]

A fresh cluster of 3 real brokers per run (one shared real ZooKeeper, tick
100 ms), with N offsets partitions so that each broker leads about N/3,
settled first: every replica taken up, replica.lag.time.max.ms past the last
role change, and every ISR whole again (or 120 s spent waiting for it, which
the output counts).  A
broker that is not the controller gets SIGTERM; the figure is its
``controlled_shutdown_done.duration_ms``: from asking the controller to the
answer, with every leadership moved and the broker out of every ISR.
Baseline, same run: the same with 50 partitions (about 17 led).
"""
from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import TICK_MS, make_cluster, summary, wait_isr_whole  # noqa: E402
from node.events import read_run_events  # noqa: E402
from util.waiting import wait_for  # noqa: E402
from zk.server import EmbeddedZooKeeper  # noqa: E402


def one(zk: EmbeddedZooKeeper, work: Path, partitions: int) -> dict:
    c = make_cluster(zk, work, partitions, controlled=True, **{"zookeeper.session.timeout.ms": 6000})
    try:
        isr_whole = wait_isr_whole(c)
        view = c.view()
        parts = view.topics["__consumer_offsets"]["partitions"]
        victim = max((b for b in view.brokers if b != view.controller_id),
                     key=lambda b: sum(s["leader"] == b for s in parts.values()))
        led = sum(s["leader"] == victim for s in parts.values())
        c.signal_broker(victim, signal.SIGTERM)
        done = wait_for(lambda: next((e for e in read_run_events(c.run_dir) if e["type"] == "controlled_shutdown_done"
                                      and e["broker"] == victim), None), 60, "the controlled shutdown")
        c.wait_exit(victim, timeout=30)
        return {"led": led, "duration_ms": done["duration_ms"], "succeeded": done["succeeded"],
                "isr_whole_before": isr_whole}
    finally:
        c.down()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=1500)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res = {}
    with tempfile.TemporaryDirectory(prefix="kafkasim-bench-") as tmp:
        zk = EmbeddedZooKeeper(Path(tmp) / "zk", tick_ms=TICK_MS)
        zk.start()
        try:
            for n in (50, a.partitions):
                res[n] = [one(zk, Path(tmp), n) for _ in range(a.runs)]
        finally:
            zk.stop()
    if a.json:
        print(json.dumps(res, indent=2))
        return
    for n, runs in res.items():
        led = statistics.median(r["led"] for r in runs)
        print(f"{n:>5} partitions, victim leads {led:.0f}: {summary([r['duration_ms'] for r in runs])}"
              f"  all succeeded: {all(r['succeeded'] for r in runs)}; "
              f"runs that started with every ISR whole: {sum(r['isr_whole_before'] for r in runs)}/{len(runs)}")
    big = res[a.partitions]
    med = statistics.median(r["duration_ms"] for r in big)
    print(f"goal: a broker leading ~500 partitions shut down in <= 500 ms: {med:.1f} ms "
          f"{'met' if med <= 500 else 'MISSED'}")


if __name__ == "__main__":
    main()
