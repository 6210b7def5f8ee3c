"""A new controller's load at 10,000 partitions, in one process, on a real ZooKeeper.

The next controller of a controlled shutdown at 10,000 partitions reads every partition state from ZooKeeper
while its broker applies the stopping controller's last LeaderAndIsr (bench/scale.py's failover: 400-1,150 ms of
wall for a read whose own CPU is tens of ms).  This measures that read (``ZkClient.read_snapshot`` then
``read_states`` of every partition, as ``controller/handlers.py`` ``failover`` does) alone and beside busy
Python threads standing in for the broker's other work (each wait for ZooKeeper and each of kazoo's socket reads
gives up the interpreter lock, and taking it back waits for a busy thread's switch interval).

    PYTHONPATH=$PWD python3 bench/controller_load.py [--partitions 10000] [--busy 0 2] [--reps 7]

Run it with PYTHONPATH set to the tree to measure (main's in a detached worktree, then this one).  Each load runs
in a fresh process, as a broker that never was the controller has nothing of the read cached; per case it prints
the medians of the first load's wall and CPU (the process's, when no busy thread runs), then of a second load
in the same process, and the digest of what was read (the same in every tree: nothing changes
in what is read).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kafkacommon.metadata import LeaderAndIsr, TopicAssignment
from zk import codecs, paths
from zk.client import StateWrite, ZkClient
from zk.server import ZooKeeperServer, free_port


def populate(zk: ZkClient, partitions: int, brokers: int = 5, rf: int = 3) -> list[tuple[str, int]]:
    """A topic of ``partitions`` (RF ``rf`` over ``brokers``) and a 50-partition offsets topic, every state
    written as a controller writes them (the ISR full, controller epoch 1)."""
    zk.kz.ensure_path("/")
    zk.ensure_persistent_paths()
    zk.kz.create(paths.CONTROLLER_EPOCH, codecs.encode_controller_epoch(1))
    tps = []
    for topic, n in (("scale", partitions), ("__consumer_offsets", 50)):
        parts = {p: tuple((p + i) % brokers + 1 for i in range(rf)) for p in range(n)}
        zk.create_topic(0, TopicAssignment(topic, parts, topic_id=f"id-{topic}"))
        writes = [StateWrite(topic, p, LeaderAndIsr(r[0], 3, r, 1), None) for p, r in parts.items()]
        zk.write_states(0, writes)
        tps += [(topic, p) for p in parts]
    return tps


def busy(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for i in range(1000):
            x += i * i


def one_load(zk: ZkClient, tps: list[tuple[str, int]]) -> tuple[float, float, float, str]:
    """The new controller's load (``failover``'s FAILOVER_LOAD, then ReadStates of every partition):
    (wall ms, of which the states' read, CPU ms, a digest of the snapshot's topics and the states read)."""
    t0, c0 = time.perf_counter(), time.process_time()
    snap = zk.read_snapshot(with_states=False)
    wanted = [(t, p) for t, a in snap.topics.items() for p in a.partitions]
    t1 = time.perf_counter()
    states = zk.read_states(wanted)
    t2, cpu = time.perf_counter(), time.process_time() - c0
    assert len(states) == len(tps), (len(states), len(tps))
    digest = hashlib.sha256(repr((sorted((t, sorted(a.partitions.items())) for t, a in snap.topics.items()),
                                  sorted(states.items()))).encode()).hexdigest()[:16]
    return (t2 - t0) * 1000, (t2 - t1) * 1000, cpu * 1000, digest


def child(connect: str, partitions: int, busy_threads: int) -> None:
    """One new controller: a fresh process (nothing of the read cached yet, as in a broker that never was the
    controller), its load once with ``busy_threads`` busy beside it, then once more (warm); one JSON line."""
    zk = ZkClient(connect, 30000)
    zk.start()
    stop = threading.Event()
    threads = [threading.Thread(target=busy, args=(stop,), daemon=True) for _ in range(busy_threads)]
    try:
        tps = [("scale", p) for p in range(partitions)] + [("__consumer_offsets", p) for p in range(50)]
        for t in threads:
            t.start()
        cold = one_load(zk, tps)
        warm = one_load(zk, tps)
    finally:
        stop.set()
        for t in threads:
            t.join()
        zk.stop()
    print(json.dumps({"cold": cold, "warm": warm}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--busy", type=int, nargs="+", default=[0, 2])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--child", metavar="CONNECT", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.partitions, args.busy[0])
        return
    with tempfile.TemporaryDirectory(prefix="ctlload-") as d:
        server = ZooKeeperServer(Path(d), free_port())
        server.start()
        try:
            server.wait_ready()
            connect = f"{server.address}/load"
            zk = ZkClient(connect, 30000)
            zk.start()
            try:
                tps = populate(zk, args.partitions)
                one_load(zk, tps)   # the server's JIT warmed
            finally:
                zk.stop()
            digests = set()
            for n in args.busy:
                runs = []
                for _ in range(args.reps):
                    out = subprocess.run([sys.executable, __file__, "--child", connect, "--partitions",
                                          str(args.partitions), "--busy", str(n)],
                                         check=True, capture_output=True, text=True).stdout
                    runs.append(json.loads(out.strip().splitlines()[-1]))
                digests |= {r["cold"][3] for r in runs} | {r["warm"][3] for r in runs}
                load = Path("/proc/loadavg").read_text().split()[0]
                med = statistics.median
                print(f"{args.partitions + 50} states, {n} busy threads, median of {len(runs)} fresh processes: "
                      f"first load {med(r['cold'][0] for r in runs):.1f} ms "
                      f"({', '.join(str(round(r['cold'][0])) for r in runs)}; the states' read "
                      f"{med(r['cold'][1] for r in runs):.1f})"
                      + (f", its CPU {med(r['cold'][2] for r in runs):.1f} ms" if not n else "")
                      + f"; the second load {med(r['warm'][0] for r in runs):.1f} ms"
                      + (f", CPU {med(r['warm'][2] for r in runs):.1f} ms" if not n else "")
                      + f"; load {load}", flush=True)
            print(f"what was read: digest {', '.join(sorted(digests))} (one digest: every load read the same)")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
