"""A stopping broker's own LeaderAndIsr from its controlled shutdown, in one process: every partition it led becomes
a follower while it is shutting down (issue 49: at 10,000 partitions the stopping broker applies 2,010 of them, and
its handover, node/server/shutdown.py, waits for that apply, up to 1 s, before it goes on stopping).

    PYTHONPATH=$PWD python3 bench/become_follower.py [--partitions 2000] [--reps 7] [--busy 0 2] [--profile] [--dir DIR]

Broker 1 of 5, a ReplicaManager with real logs (in a temporary directory under ``--dir``, default the system's
temporary directory, on disk) behind the broker's gRPC service (node/server/servicer.py), hosting ``--partitions``
replicas (RF 3) that it leads, their logs empty (as bench/scale.py's topic), and following 200 more from the other four brokers (so
four fetchers run, as in the cluster; their leaders have no address, so they only wait).  Each rep: one
LeaderAndIsr makes every led partition a follower of its next replica, with the broker shutting down (so no fetch
starts: Kafka's makeFollowers skips the fetchers then); then, not measured, one makes them leaders again.  Printed
per rep's median: the request's CPU (the calling thread's) and wall time, in all and per partition, alone and
beside ``--busy`` threads running pure Python in the same process: in the cluster the broker's other threads
(fetchers, the fetch handler, gRPC) want the interpreter lock too, and each time the request gives it up (a
system call: an event line's write) taking it back can wait a busy thread's switch interval (5 ms).  The digest covers
the answers, the replicas' states and fetchers, and the event lines without their clocks: it must be the same
for every tree.  ``--profile``: cProfile's top entries over every measured request (the calling thread).
Run it from each tree in turn (PYTHONPATH=<tree>), alternating.
"""
from __future__ import annotations

import argparse
import cProfile
import hashlib
import os
import pstats
import shutil
import statistics
import tempfile
import threading
import time

from bench.broker_requests import lines_digest
from node.events import EventLog
from node.server.servicer import BrokerServicer
from proto import kafkasim_pb2 as pb
from replication.broker_state import BrokerState

BROKERS = [1, 2, 3, 4, 5]
ME = 1
TOPIC = "scale"


def replicas_led(p: int) -> list[int]:
    """A partition this broker leads: itself first, two others after it."""
    return [ME, BROKERS[1 + p % 4], BROKERS[1 + (p + 1) % 4]]


def state(p: int, le: int, cepoch: int, leader: int, reps: list[int], topic: str = TOPIC) -> pb.PartitionState:
    return pb.PartitionState(topic=topic, partition=p, controller_epoch=cepoch, leader=leader, leader_epoch=le,
                             isr=reps, zk_version=le, replicas=reps)


def header(cepoch: int) -> pb.ControllerHeader:
    return pb.ControllerHeader(controller_id=2, controller_epoch=cepoch, broker_epoch=5)


def lai(parts, cepoch: int) -> pb.LeaderAndIsrRequest:
    return pb.LeaderAndIsrRequest.FromString(
        pb.LeaderAndIsrRequest(header=header(cepoch), partitions=parts).SerializeToString())


def spin(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for i in range(1000):
            x += i * i


def run(n: int, reps: int, profile: bool, base: str, busy: int) -> tuple[list[float], list[float], str, cProfile.Profile | None]:
    from node.replicas.replica_manager import ReplicaManager
    from replication.partition_types import ReplicaSettings
    tmp = tempfile.mkdtemp(prefix="become-follower-", dir=base)
    stopping = [False]
    events = EventLog(os.path.join(tmp, "events.jsonl"), ME)
    rm = ReplicaManager(ME, os.path.join(tmp, "logs"), ReplicaSettings(), events, broker_epoch=lambda: 5,
                        endpoint_of=lambda b: None, controller_endpoint=lambda: None, fetch_wait_ms=500,
                        segment_bytes=1 << 20, checkpoint_interval_ms=600_000, shutting_down=lambda: stopping[0])
    changes: list = []
    rm.on_leadership = lambda t, p, lead, le: changes.append((t, p, lead, le))
    st = BrokerState(ME)
    st.broker_epoch = 5
    sv = BrokerServicer(st, events, controller=None, replicas=rm)
    digest = hashlib.sha256()
    prof = cProfile.Profile() if profile else None
    cpu, wall = [], []
    try:
        epoch, le = 1, 1
        followed = [state(p, 1, epoch, BROKERS[1 + p % 4], [BROKERS[1 + p % 4], ME, BROKERS[1 + (p + 1) % 4]],
                          topic="other") for p in range(200)]
        digest.update(sv.LeaderAndIsr(lai([state(p, le, epoch, ME, replicas_led(p)) for p in range(n)] + followed,
                                          epoch), None).SerializeToString())
        for r in range(reps):
            epoch += 1
            le += 1
            stopping[0] = True
            request = lai([state(p, le, epoch, replicas_led(p)[1], replicas_led(p)) for p in range(n)], epoch)
            stop = threading.Event()
            spinners = [threading.Thread(target=spin, args=(stop,), daemon=True) for _ in range(busy)]
            for t in spinners:
                t.start()
            c0, w0 = time.thread_time(), time.perf_counter()
            if prof is not None:
                prof.enable()
            answer = sv.LeaderAndIsr(request, None)
            if prof is not None:
                prof.disable()
            wall.append((time.perf_counter() - w0) * 1e3)
            cpu.append((time.thread_time() - c0) * 1e3)
            stop.set()
            for t in spinners:
                t.join()
            digest.update(answer.SerializeToString())
            for p in range(n):
                h = rm.hosted[(TOPIC, p)]
                digest.update(repr((p, h.repl.is_leader, h.repl.leader_id, h.repl.leader_epoch, tuple(h.repl.isr),
                                    h.fetching_from, h.log.log_end_offset)).encode())
            with rm._lock:
                assigned = sorted((b, sorted(f._parts)) for b, f in rm.fetchers.items())
            digest.update(repr(assigned).encode())
            stopping[0] = False
            epoch += 1
            le += 1
            digest.update(sv.LeaderAndIsr(lai([state(p, le, epoch, ME, replicas_led(p)) for p in range(n)], epoch),
                                          None).SerializeToString())
        digest.update(repr(sorted(changes)).encode())   # new leaders are taken up side by side: any order
    finally:
        rm.close()
        events.close()
        lines = lines_digest(os.path.join(tmp, "events.jsonl"))
        shutil.rmtree(tmp, ignore_errors=True)
    return cpu, wall, digest.hexdigest()[:12] + "/" + lines, prof


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--busy", type=int, nargs="+", default=[0, 2], help="busy threads beside the request, per run")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the logs go (default: %(default)s)")
    a = ap.parse_args()
    tree = os.path.dirname(os.path.dirname(os.path.abspath(pb.__file__)))
    n = a.partitions
    print(f"tree {tree}; {n:,} led partitions become followers, shutting down")
    for busy in a.busy:
        load = open("/proc/loadavg").read().split()[0]
        cpu, wall, digest, prof = run(n, a.reps, a.profile and busy == a.busy[0], a.dir, busy)
        print(f"  {busy} busy: LeaderAndIsr CPU median {statistics.median(cpu):7.1f} ms "
              f"({statistics.median(cpu) * 1e3 / n:5.1f} µs/partition; min {min(cpu):.1f}), wall median "
              f"{statistics.median(wall):7.1f} ms ({statistics.median(wall) * 1e3 / n:6.1f} µs/partition; min "
              f"{min(wall):.1f}), {len(cpu)} reps; 1-minute load {load}; digest {digest}")
        if prof is None:
            continue
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)


if __name__ == "__main__":
    main()
