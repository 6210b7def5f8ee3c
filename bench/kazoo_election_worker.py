"""One contender in kazoo's Election recipe (the baseline for bench/controller_failover.py).

    python bench/kazoo_election_worker.py CONNECT PATH OUT_FILE SESSION_MS

When it becomes leader it appends "elected <id> <mono_ns>" to OUT_FILE and
holds leadership until SIGTERM, which closes its session (like a clean
broker shutdown) and appends "gone <id> <mono_ns>".
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
    me = str(os.getpid())
    zk = KazooClient(hosts=connect, timeout=session_ms / 1000)
    zk.start(timeout=10)
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
        stop.wait()

    with open(out, "a") as f:
        f.write(f"ready {me} {time.monotonic_ns()}\n")
    zk.Election(path, me).run(lead)


if __name__ == "__main__":
    main()
