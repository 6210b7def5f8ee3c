"""One contender in kazoo's Election recipe (the baseline for bench/controller_failover.py).

    python bench/kazoo_election_worker.py CONNECT PATH OUT_FILE SESSION_MS [WRITES [ELECTED | create]]

When it becomes leader it appends "elected <id> <mono_ns>" to OUT_FILE and
holds leadership until SIGTERM, which closes its session (like a clean
broker shutdown) and appends "gone <id> <mono_ns>".

With WRITES > 0 (the floor of a controller's failover in Kafka's order): once
elected it writes WRITES partition-state znodes under PATH-state (made first by
one run with "create", which exits), then the first ELECTED of them again
(default: WRITES), each time in one multi fenced by a check of PATH-state's
version (as a controller's writes are fenced by its epoch), then appends
"written <id> <mono_ns>".  That is a controller failover's order: every
partition whose ISR held the dead broker leaves it (leader -1 where it led),
then the partitions it led get a new leader.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

from kazoo.client import KazooClient


def main() -> None:
    connect, path, out, session_ms = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    writes = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    elected = int(sys.argv[6]) if len(sys.argv) > 6 and sys.argv[6] != "create" else writes
    me = str(os.getpid())
    zk = KazooClient(hosts=connect, timeout=session_ms / 1000)
    zk.start(timeout=10)
    state = f"{path}-state"    # with WRITES: PATH-state/p0 ... p<WRITES-1>, made by a run with "create"
    if len(sys.argv) > 6 and sys.argv[6] == "create":
        zk.ensure_path(state)
        for lo in range(0, writes, 500):
            t = zk.transaction()
            for i in range(lo, min(lo + 500, writes)):
                t.create(f"{state}/p{i}", b"{}")
            t.commit()
        zk.stop()
        zk.close()
        return
    stop = threading.Event()

    def on_term(*_):
        # timed like a broker: from the moment it starts closing its session
        with open(out, "a") as f:
            f.write(f"gone {me} {time.monotonic_ns()}\n")
        zk.stop()
        zk.close()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)

    def lead() -> None:
        with open(out, "a") as f:
            f.write(f"elected {me} {time.monotonic_ns()}\n")
        if writes:
            fence = zk.get(state)[1].version
            # Kafka's order: the dead replicas out of the ISR with leader -1, then the election
            for data, count in ((b'{"controller_epoch":2,"leader":-1,"version":1,"leader_epoch":1,"isr":[2]}', writes),
                                (b'{"controller_epoch":2,"leader":2,"version":1,"leader_epoch":2,"isr":[2]}', elected)):
                t = zk.transaction()
                t.check(state, fence)
                for i in range(count):
                    t.set_data(f"{state}/p{i}", data)
                results = t.commit()
                if any(isinstance(r, Exception) for r in results):
                    raise RuntimeError(f"the fenced multi failed: {results[:3]}")
            with open(out, "a") as f:
                f.write(f"written {me} {time.monotonic_ns()}\n")
        stop.wait()

    with open(out, "a") as f:
        f.write(f"ready {me} {time.monotonic_ns()}\n")
    zk.Election(path, me).run(lead)


if __name__ == "__main__":
    main()
