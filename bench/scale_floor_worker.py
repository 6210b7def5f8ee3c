"""One process of the floor of a controller's SIGTERM failover (bench/scale_floor.py, run by bench/scale.py).

    python bench/scale_floor_worker.py CONNECT CHROOT OUT setup STATES DATA_HEX
    python bench/scale_floor_worker.py CONNECT CHROOT OUT compare WRITE_HEX STATES COUNT [COUNT ...]
    python bench/scale_floor_worker.py CONNECT CHROOT OUT contend ELECTION

Every path is in CHROOT, on the cluster's own ZooKeeper.  ``setup`` makes
/controller_epoch and STATES partition-state znodes at the cluster's paths
(/brokers/topics/<t>/partitions/<p>/state, the last 50 of them
__consumer_offsets'), each holding DATA (a state read from the cluster), and
exits.  ``compare`` writes the first sum(COUNT) states twice in each of the two
ways below, alternating, untimed by anyone else, and appends
"compare <method> <ms>" lines to OUT.

``contend``: a contender in kazoo's Election at ELECTION (as bench/kazoo_election_worker.py).
Once elected it appends "elected <pid> <mono_ns>", learns every state's zkVersion
(untimed: a controller holds them in its context) and reads a command from stdin:

  shutdown METHOD COUNT [COUNT ...]   the controlled shutdown: "signal", then
        each batch of COUNT states written (the first batch the leaderships
        moved, the next the ISRs shrunk), each write a conditional setData at
        the state's zkVersion fenced by a check of /controller_epoch's version,
        the batch's writes pipelined and the batch awaited before the next, as
        Kafka's controller does; then "written", then its session closed (its
        Election znode gone: the handover), "gone", and exit.
        METHOD ``partition``: one small multi per state (check + setData), as
        Kafka 2.8's updateLeaderAndIsr sends them; ``batched``: multis of
        MULTI_CHUNK states, each with one check (as kafkasim writes them).
  read  every state read in one multiRead of getData (what Kafka's
        initializeControllerContext reads with pipelined getData calls):
        "read <pid> <ns>".
"""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from kazoo.client import KazooClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.scale_floor import MULTI_CHUNK, state_paths  # noqa: E402
from zk.batch import CREATE, SET_DATA, multi_read_data, multi_write_async  # noqa: E402

EPOCH = "/controller_epoch"


def client(connect: str, chroot: str) -> KazooClient:
    zk = KazooClient(hosts=connect + chroot, timeout=10.0)
    zk.start(timeout=10)
    return zk


def setup(connect: str, chroot: str, states: int, data: bytes) -> None:
    root = KazooClient(hosts=connect, timeout=10.0)
    root.start(timeout=10)
    root.ensure_path(chroot)
    root.stop()
    root.close()
    zk = client(connect, chroot)
    paths = state_paths(states)
    parents = sorted({p.rsplit("/", 2)[0] for p in paths})   # /brokers/topics/<t>/partitions
    for parent in parents:
        zk.ensure_path(parent)
    zk.create(EPOCH, b"1")
    ops = []
    for p in paths:
        ops += [(CREATE, p.rsplit("/", 1)[0], b"", -1), (CREATE, p, data, -1)]
    pending = [multi_write_async(zk, None, ops[i:i + MULTI_CHUNK]) for i in range(0, len(ops), MULTI_CHUNK)]
    for r in pending:
        res = r.get(timeout=60)
        if any(isinstance(x, Exception) for x in res):
            raise RuntimeError(f"setup failed: {res[:3]}")
    zk.stop()
    zk.close()


def versions(zk: KazooClient, paths: list[str]) -> list[int]:
    return [v for _data, v in multi_read_data(zk, paths, timeout=60)]


def write(zk: KazooClient, method: str, fence: int, paths: list[str], vers: list[int], data: bytes,
          counts: list[int]) -> list[int]:
    """The batches written one after the other, each pipelined; -> each batch's ms.  ``vers`` is updated."""
    out, lo = [], 0
    check = (EPOCH, fence)
    for count in counts:
        t0 = time.monotonic_ns()
        idx = range(lo, lo + count)
        if method == "partition":
            pending = [multi_write_async(zk, check, [(SET_DATA, paths[i], data, vers[i])]) for i in idx]
        else:
            ops = [(SET_DATA, paths[i], data, vers[i]) for i in idx]
            pending = [multi_write_async(zk, check, ops[j:j + MULTI_CHUNK]) for j in range(0, count, MULTI_CHUNK)]
        for r in pending:
            res = r.get(timeout=60)
            if any(isinstance(x, Exception) for x in res):
                raise RuntimeError(f"a fenced multi failed: {res[:3]}")
        out.append((time.monotonic_ns() - t0) // 1000)
        for i in idx:
            vers[i] += 1
        lo += count
    return out


def compare(connect: str, chroot: str, out: str, data: bytes, states: int, counts: list[int]) -> None:
    zk = client(connect, chroot)
    paths = state_paths(states)[:sum(counts)]
    fence = zk.get(EPOCH)[1].version
    vers = versions(zk, paths)
    lines = []
    for method in ("partition", "batched", "partition", "batched"):
        us = write(zk, method, fence, paths, vers, data, counts)
        lines.append(f"compare {method} {sum(us) / 1000:.1f}\n")
    with open(out, "a") as f:
        f.writelines(lines)
    zk.stop()
    zk.close()


def contend(connect: str, chroot: str, out: str, election: str) -> None:
    me = str(os.getpid())
    zk = client(connect, chroot)

    def note(line: str) -> None:
        with open(out, "a") as f:
            f.write(line + "\n")

    def lead() -> None:
        note(f"elected {me} {time.monotonic_ns()}")
        fence = zk.get(EPOCH)[1].version
        cmd = sys.stdin.readline().split()
        if not cmd:
            threading.Event().wait()
        if cmd[0] == "read":
            paths = state_paths(int(cmd[1]))
            t0 = time.monotonic_ns()
            res = multi_read_data(zk, paths, timeout=60)
            took = time.monotonic_ns() - t0
            if any(isinstance(x, Exception) for x in res):
                raise RuntimeError("the read failed")
            note(f"read {me} {took}")
            threading.Event().wait()
        method, states, counts = cmd[1], int(cmd[2]), [int(c) for c in cmd[3:]]
        paths = state_paths(states)[:sum(counts)]
        vers = versions(zk, paths)
        data = bytes.fromhex(sys.stdin.readline().strip())
        note(f"signal {me} {time.monotonic_ns()}")
        us = write(zk, method, fence, paths, vers, data, counts)
        note(f"written {me} {time.monotonic_ns()} " + " ".join(str(u) for u in us))
        zk.stop()
        zk.close()
        note(f"gone {me} {time.monotonic_ns()}")
        os._exit(0)

    note(f"ready {me} {time.monotonic_ns()}")
    zk.Election(election, me).run(lead)


def main() -> None:
    connect, chroot, out, mode = sys.argv[1:5]
    if mode == "setup":
        setup(connect, chroot, int(sys.argv[5]), bytes.fromhex(sys.argv[6]))
    elif mode == "compare":
        compare(connect, chroot, out, bytes.fromhex(sys.argv[5]), int(sys.argv[6]), [int(c) for c in sys.argv[7:]])
    else:
        contend(connect, chroot, out, sys.argv[5])


if __name__ == "__main__":
    main()
