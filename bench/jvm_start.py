"""How long a ZooKeeper takes to start (spawned until it serves), with its class-data archive
(util/jvm_archive.py) and without, alternated in one run: the baseline is the same server started the way it was
before the archive.  Each pass starts and stops one standalone server of each kind in a fresh data directory.

    python3 bench/jvm_start.py [--passes 10]

The archive is written first (into a scratch cache, so the machine's own is untouched) and not timed.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from util.cache import CACHE_ENV  # noqa: E402
from zk.server import ZooKeeperServer, free_port  # noqa: E402


def start_stop(base: Path, archive_flags: list[str] | None) -> float:
    """Seconds from spawning a standalone server until it serves; ``archive_flags`` None: its archive's."""
    d = Path(tempfile.mkdtemp(dir=base))
    server = ZooKeeperServer(d, free_port(), archive_flags=archive_flags)
    t = time.monotonic()
    server.start()
    try:
        server.wait_ready(60.0)
        return time.monotonic() - t
    finally:
        server.stop(30.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kafkasim-bench-jvm-") as tmp:
        base = Path(tmp)
        os.environ[CACHE_ENV] = str(base / "cache")
        start_stop(base, None)   # writes the archive (its own server first), then starts with it: not timed
        times: dict[str, list[float]] = {"without": [], "with archive": []}
        for i in range(args.passes):
            for kind in (("without", "with archive") if i % 2 == 0 else ("with archive", "without")):
                times[kind].append(start_stop(base, [] if kind == "without" else None))
        print(f"ZooKeeper start, spawn -> serving, {args.passes} passes alternated  "
              f"(load {os.getloadavg()[0]:.2f})")
        for kind, ts in times.items():
            print(f"  {kind:<14} median {statistics.median(ts) * 1000:7.0f} ms   "
                  f"min {min(ts) * 1000:6.0f}   max {max(ts) * 1000:6.0f}")
        ratio = statistics.median(times["with archive"]) / statistics.median(times["without"])
        print(f"  with archive / without: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
