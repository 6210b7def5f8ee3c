"""How long a ZooKeeper takes to start (spawned until it serves), with its class-data archive
(util/jvm_archive.py) and without, alternated in one run: the baseline is the same server started the way it was
before the archive.  Each pass starts and stops one standalone server of each kind in a fresh data directory.

    python3 bench/jvm_start.py [--passes 10] [--kafka]

With ``--kafka``, the same for a Kafka 2.8.2 broker (reference/jvm.py): spawned until its server.log says
``started``, alone on a standalone ZooKeeper (a chroot per start), with the CPU its JVM used by then; then
stopped (SIGTERM) before the next.  Kafka's jars are fetched first when missing (``reference.jars``).

The archive is written first (into a scratch cache or file, so the machine's own is untouched) and not timed.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
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


def jvm_cpu_s(pid: int) -> float:
    """The CPU seconds (user + system) process ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kafka_start_stop(base: Path, zk: str, flags: list[str]) -> tuple[float, float]:
    """(seconds from spawn until the broker logged ``started``, its JVM's CPU seconds by then)."""
    from reference.jvm import has_started, spawn_scratch
    d = Path(tempfile.mkdtemp(dir=base))
    t = time.monotonic()
    proc = spawn_scratch(d, f"{zk}/{d.name}", flags)
    try:
        while not has_started(d):
            if proc.poll() is not None:
                raise RuntimeError(f"the broker exited {proc.returncode}: {d / 'logs'}")
            if time.monotonic() - t > 120:
                raise RuntimeError(f"the broker did not start in 120 s: {d / 'logs'}")
            time.sleep(0.01)
        return time.monotonic() - t, jvm_cpu_s(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bench_kafka(passes: int) -> None:
    from reference.jars import ensure_jars
    from reference.jvm import lone_zookeeper, write_archive
    from util.jvm_archive import QUIET
    ensure_jars(quiet=True)
    with tempfile.TemporaryDirectory(prefix="kafkasim-bench-kafka-jvm-") as tmp:
        base = Path(tmp)
        with lone_zookeeper(base / "zookeeper") as zk:
            archive = base / "kafka.jsa"
            write_archive([f"-XX:ArchiveClassesAtExit={archive}", *QUIET])   # not timed
            flags = {"without": [], "with archive": [f"-XX:SharedArchiveFile={archive}", *QUIET]}
            runs: dict[str, list[tuple[float, float]]] = {k: [] for k in flags}
            kafka_start_stop(base, zk, [])   # the page cache warm for both: not counted
            for i in range(passes):
                for kind in (("without", "with archive") if i % 2 == 0 else ("with archive", "without")):
                    runs[kind].append(kafka_start_stop(base, zk, flags[kind]))
    print(f"Kafka 2.8.2 broker start, spawn -> started, {passes} passes alternated  (load {os.getloadavg()[0]:.2f})")
    for kind, rs in runs.items():
        ws, cs = [w for w, _ in rs], [c for _, c in rs]
        print(f"  {kind:<14} median {statistics.median(ws) * 1000:7.0f} ms   min {min(ws) * 1000:6.0f}   "
              f"max {max(ws) * 1000:6.0f}   its CPU by then, median {statistics.median(cs):.2f} s")
    wall = statistics.median([w for w, _ in runs["with archive"]]) / statistics.median([w for w, _ in runs["without"]])
    cpu = statistics.median([c for _, c in runs["with archive"]]) / statistics.median([c for _, c in runs["without"]])
    print(f"  with archive / without: {wall:.2f}x the time, {cpu:.2f}x the CPU")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=10)
    ap.add_argument("--kafka", action="store_true", help="a Kafka 2.8.2 broker's start instead of ZooKeeper's")
    args = ap.parse_args()
    if args.kafka:
        bench_kafka(args.passes)
        return 0
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
