"""Commit CPU: what one OffsetCommit through the Kafka listener costs in CPU, a figure the machine's load does not
set (issue 49: the wall-clock ratio of bench/coordinator.py swings with the load of a shared 2-core machine).

    python bench/commit_cpu.py [--threads 128] [--seconds 10] [--per-request 10] [--runs 1] [--zookeeper-offsets-per-s N]
                               [--profile DIR]

A real 3-broker cluster (RF 3, acks=all, 50 offsets partitions), N librdkafka consumers (one group each,
synchronous commits of ``--per-request`` offsets), 2 s of warm-up, then a measured window of ``--seconds``:
- the brokers' CPU per commit (/proc: user + system of each broker process), and split by thread: each broker's
  threads by name (``bench.scale.thread_names``: ``py-spy dump``; without py-spy, by the OS
  thread name, which for the Python threads is the interpreter's);
- the client's CPU per commit (this process: librdkafka's threads and the Python threads driving them);
- then the floor, for as long: the same consumers fetching the same offsets back (OffsetFetch: the same
  listener, door and core, no write, no replication), its CPU per request;
- then the write floor, for as long: as many librdkafka producers, each with one Produce in flight carrying one
  batch of a commit's records (its keys and values, ``--per-request`` of them), acks=all, to a topic of RF 3 with
  as many partitions as __consumer_offsets (each producer on its group's offsets partition's number): every
  commit is at least such a replicated append through the same listener.  Its CPU per request, and its Produce
  requests as the brokers logged them against its rounds (one a round: each round's records in one request).
With ``--profile DIR``, py-spy samples the thread holding the GIL (``--gil``) in every broker during each measured
window (its collapsed stacks kept in DIR), and the functions most often running (self and inclusive) are
printed per window, the three brokers together (py-spy's own CPU then loads the machine; the brokers' CPU is still read from /proc).
With ``--zookeeper-offsets-per-s`` (the old ZooKeeper design's figure from bench/coordinator.py's run), the CPU
the issue's goal (10x that many offsets a second) would take at these costs, in cores, against the machine's.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.commit_load import FloorProducer, produce_requests  # noqa: E402
from bench.common import TICK_MS, make_cluster, thread_times  # noqa: E402
from kafkacommon.hashing import partition_for  # noqa: E402
from bench.scale import top_stacks, thread_names  # noqa: E402
from util.waiting import wait_for  # noqa: E402
from zk.admin import create_topic  # noqa: E402
from zk.server import EmbeddedZooKeeper  # noqa: E402

SPY_RATE = 100   # py-spy's samples a second (bench.scale.top_stacks counts CPU-seconds at this rate)

def spy(pids: dict[int, int], out: Path) -> list[subprocess.Popen]:
    """py-spy on every broker, samples of the thread holding the GIL (``--gil``), until SIGINT."""
    procs = []
    for b, pid in pids.items():
        try:
            procs.append(subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--format", "raw", "--gil",
                                           "--rate", str(SPY_RATE), "--nonblocking", "-o", str(out / f"{b}.raw")],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        except FileNotFoundError:   # no py-spy: no profile
            break
    return procs


def one_run(zk: EmbeddedZooKeeper, work: Path, threads: int, seconds: float, per_request: int,
            profile: Path | None = None) -> dict:
    from confluent_kafka import Consumer, TopicPartition
    c = make_cluster(zk, work, partitions=50, **{"zookeeper.session.timeout.ms": 6000})
    try:
        create_topic(c.zk(), "t", per_request, 3, {})
        boot = ",".join(f"{h}:{p}" for h, p in (b.kafka_advertised for b in c.cfg.brokers))
        consumers = [Consumer({"bootstrap.servers": boot, "group.id": f"cpu-{i}", "enable.auto.commit": False,
                               "log_level": 0}) for i in range(threads)]
        tps = [TopicPartition("t", p) for p in range(per_request)]
        for i, k in enumerate(consumers):
            wait_for(lambda k=k: k.committed([tps[0]], timeout=10) is not None, 30, f"the coordinator of cpu-{i}")
        pids = dict(c.pids)
        # the write floor's producers: one Produce of one batch of a commit's records in flight each, acks=all, to
        # a topic of RF 3 with as many partitions as __consumer_offsets, each on its group's offsets partition
        create_topic(c.zk(), "commit-floor", 50, 3, {})
        producers = [FloorProducer(boot, f"cpu-floor-{i}", "commit-floor", partition_for(f"cpu-{i}", 50), f"cpu-{i}",
                                   "t", per_request) for i in range(threads)]
        for p in producers:
            wait_for(lambda p=p: p.round(0), 30, "a first produce")   # metadata and connections first
        for p in producers:
            p.errors.clear()
        produced0 = produce_requests(c.run_dir, "cpu-floor")

        def window(call, kind: str) -> dict:
            counts = [0] * threads
            stop = threading.Event()

            def run(i: int) -> None:
                n = 0
                while not stop.is_set():
                    n += 1
                    call(i, n)
                    counts[i] += 1
            ts = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(threads)]
            for t in ts:
                t.start()
            time.sleep(2)   # warm-up: every consumer in its loop
            names = {b: thread_names(p) for b, p in pids.items()}
            before = {b: thread_times(p) for b, p in pids.items()}
            mine0, n0, load0, t0 = os.times(), sum(counts), os.getloadavg()[0], time.perf_counter()
            procs = []
            if profile is not None:
                (profile / kind).mkdir(parents=True)
                procs = spy(pids, profile / kind)
            time.sleep(seconds)
            after = {b: thread_times(p) for b, p in pids.items()}
            for p in procs:
                p.send_signal(signal.SIGINT)   # py-spy writes what it sampled
            for p in procs:
                p.wait(60)
            mine1, n1, load1, took = os.times(), sum(counts), os.getloadavg()[0], time.perf_counter() - t0
            stop.set()
            for t in ts:
                t.join(30)
            n = max(n1 - n0, 1)
            rounds = sum(counts)
            by_thread: collections.Counter = collections.Counter()
            for b in pids:
                for tid, (comm, cpu1) in after[b].items():
                    # the thread's name without its root frame
                    name = names[b][tid].split(" (")[0] if tid in names[b] else f"{comm} (OS name)"
                    by_thread[re.sub(r"\d+", "N", name)] += cpu1 - before[b].get(tid, (comm, 0.0))[1]
            brokers = sum(by_thread.values())
            client = (mine1.user + mine1.system) - (mine0.user + mine0.system)
            return {"requests_per_s": n / took, "brokers_ms": 1000 * brokers / n, "client_ms": 1000 * client / n,
                    "threads_ms": {k: 1000 * v / n for k, v in by_thread.most_common()}, "load": (load0, load1),
                    "rounds": rounds}

        commit = window(lambda i, n: consumers[i].commit(
            offsets=[TopicPartition("t", p, n) for p in range(per_request)], asynchronous=False), "commit")
        floor = window(lambda i, n: consumers[i].committed(tps, timeout=10), "floor")
        write = window(lambda i, n: producers[i].round(n), "write")
        write["errors"] = sum(len(p.errors) for p in producers)
        # one Produce request a round: the brokers' logged requests against the rounds the window counted
        write["produce_requests"] = produce_requests(c.run_dir, "cpu-floor") - produced0
        for k in consumers:
            k.close()
        return {"commit": commit, "floor": floor, "write": write}
    finally:
        c.down()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--per-request", type=int, default=10)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--zookeeper-offsets-per-s", type=float, default=None)
    ap.add_argument("--profile", type=Path, default=None, metavar="DIR",
                    help="py-spy (--gil) on every broker during each measured window, its samples kept in DIR "
                         "(raw, collapsed stacks); the top functions printed")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kafkasim-commit-cpu-") as tmp:
        zk = EmbeddedZooKeeper(Path(tmp) / "zk", tick_ms=TICK_MS)
        zk.start()
        try:
            for run in range(1, a.runs + 1):
                profile = a.profile / f"run-{run}" if a.profile else None
                r = one_run(zk, Path(tmp), a.threads, a.seconds, a.per_request, profile)
                for kind, w in (("commit", r["commit"]), ("floor (OffsetFetch)", r["floor"]),
                                (f"write floor (Produce of {a.per_request} records)", r["write"])):
                    print(f"run {run} {kind}: {w['requests_per_s']:.0f} requests/s, brokers' CPU "
                          f"{w['brokers_ms']:.3f} ms a request (all 3), client {w['client_ms']:.3f} ms; load "
                          f"{w['load'][0]:.1f} / {w['load'][1]:.1f}")
                    for name, ms in list(w["threads_ms"].items())[:6]:
                        print(f"    {ms:.3f} ms  {name}")
                w = r["write"]
                print(f"run {run} write floor: {w['errors']} errors; {w['produce_requests']} Produce requests logged "
                      f"for {w['rounds']} rounds ({'one a round' if w['produce_requests'] == w['rounds'] else 'NOT one a round'})")
                if profile is not None:
                    for kind in ("commit", "floor", "write"):
                        merged = profile / f"{kind}.raw"   # the three brokers' samples together
                        merged.write_text("".join(f.read_text() for f in sorted((profile / kind).glob("*.raw"))))
                        print(f"run {run} profile of the {kind} window, the three brokers (py-spy --gil, samples of "
                              f"the thread holding the GIL):")
                        for line in top_stacks(merged, 15):
                            print(f"    {line}")
                if a.zookeeper_offsets_per_s:
                    need = a.zookeeper_offsets_per_s * 10 / a.per_request   # requests/s for 10x its offsets/s
                    for kind, w in (("commit", r["commit"]), ("floor", r["floor"]), ("write floor", r["write"])):
                        cores = need * (w["brokers_ms"] + w["client_ms"]) / 1000
                        print(f"run {run} 10x {a.zookeeper_offsets_per_s:.0f} offsets/s = {need:.0f} requests/s "
                              f"at the {kind}'s CPU: {cores:.2f} cores (the machine has {os.cpu_count()})")
        finally:
            zk.stop()


if __name__ == "__main__":
    main()
