"""The fsyncs of a controller's SIGTERM, for bench/vs_kafka.py's ``--only fsyncs`` (issue 49's scale row, by kind).

bench/scale.py's profile of the controller's SIGTERM at 10,000 partitions puts most of the five brokers' samples
in the leader epoch checkpoints' fsyncs.  This block counts, on both sides, what the surviving brokers fsync on
that path, so that the count is read from a running Kafka 2.8.2 and not only from its source:

* a fresh cluster of ``BROKERS`` brokers per side, controlled shutdown on, and a topic of N partitions (RF 3),
  created and settled as bench/vs_scale.py does;
* ``strace -f`` attached to every broker but the controller (each of its threads traced before the signal);
* SIGTERM to the controller's broker; the count runs until the next controller is done with its failover and
  no survivor has fsynced a take-up's file (an epoch checkpoint, a ``partition.metadata``) for ``QUIET_S``
  (their take-up of the last LeaderAndIsr over);
* each survivor's ``fsync``/``fdatasync`` calls, by the file's kind (:func:`kind_of`), and the partitions it
  leads afterwards under a new leader epoch (each of which Kafka 2.8's ``LeaderEpochFileCache.assign`` writes
  and fsyncs).

strace slows the traced brokers many times over, so this block counts and does not time.
"""
from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.vs_controller import POLL_S, new_controller
from bench.vs_idle import BROKERS
from bench.vs_scale import create_and_settle
from bench.vs_sides import Side
from util.waiting import wait_for

QUIET_S = 10.0   # a margin: strace slows the survivors' take-ups many times over
_CALL = re.compile(r"\bf(?:data)?sync\(\d+<([^>]*)>")   # a call, whole or <unfinished ...> (-f)
KINDS = ("leader-epoch-checkpoint", "partition.metadata", "log segment", "index", "other checkpoint",
         "directory", "other")


def kind_of(path: str) -> str:
    """What an fsynced file is, from its path (strace's ``-y``)."""
    name = Path(path).name
    if name.startswith("leader-epoch-checkpoint"):
        return "leader-epoch-checkpoint"
    if name.startswith("partition.metadata"):
        return "partition.metadata"
    if name.endswith(".log"):
        return "log segment"
    if name.endswith((".index", ".timeindex", ".txnindex")):
        return "index"
    if "checkpoint" in name:
        return "other checkpoint"
    if "." not in name:
        return "directory"   # a log directory, a partition's directory (their names hold no dot but the topic's)
    return "other"


def count_fsyncs(trace: str) -> dict[str, int]:
    """The fsync and fdatasync calls in an ``strace -f -y`` output, by :func:`kind_of`: each call once, whether
    strace wrote it whole or, another thread's call between, as ``<unfinished ...>`` and later ``resumed``."""
    counts = collections.Counter(kind_of(p) for p in _CALL.findall(trace))
    return {k: counts[k] for k in KINDS if counts[k]}


class Strace:
    """``strace -f`` on every thread of ``pid``, writing to ``out``; entered once every thread is traced."""

    def __init__(self, pid: int, out: Path) -> None:
        self.pid, self.out = pid, out
        self.proc: subprocess.Popen | None = None

    def _all_traced(self) -> bool:
        tasks = list(Path(f"/proc/{self.pid}/task").iterdir())
        for t in tasks:
            try:
                status = (t / "status").read_text()
            except FileNotFoundError:
                continue   # a thread that has just ended
            if re.search(r"^TracerPid:\s+0$", status, re.M):
                return False
        return bool(tasks)

    def __enter__(self) -> "Strace":
        self.proc = subprocess.Popen(["strace", "-f", "-qq", "-y", "-e", "trace=fsync,fdatasync", "-o",
                                      str(self.out), "-p", str(self.pid)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for(lambda: self.proc.poll() is not None or self._all_traced(), 60,
                 f"strace attached to every thread of {self.pid}", interval=0.1)
        if self.proc.poll() is not None:
            raise RuntimeError(f"strace -p {self.pid} failed: {self.proc.stderr.read().decode()[-500:]}")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)   # strace detaches and flushes its output
            self.proc.wait(30)


def _take_ups(trace: str) -> int:
    """The fsyncs a LeaderAndIsr's take-up makes, per partition: epoch checkpoints and ``partition.metadata``."""
    counts = count_fsyncs(trace)
    return counts.get("leader-epoch-checkpoint", 0) + counts.get("partition.metadata", 0)


def _quiet(spies: list[Strace], last: dict[int, tuple[int, float]]) -> bool:
    """True once no survivor has fsynced a take-up's file for QUIET_S (``last``: each trace's count of them and
    when it last changed).  The periodic checkpoints (high watermarks every 5 s on each broker) do not count: on
    four brokers one of them is almost always under a few seconds old."""
    now = time.monotonic()
    for s in spies:
        n = _take_ups(s.out.read_text(errors="replace")) if s.out.exists() else 0
        if last.get(s.pid, (None, 0.0))[0] != n:
            last[s.pid] = (n, now)
    return all(now - t >= QUIET_S for _n, t in last.values())


def controller_sigterm_fsyncs(side: Side, partitions: int, work: Path, timeout_s: float = 600.0) -> dict[str, Any]:
    """Create and settle the topic, trace the survivors, SIGTERM the controller: the survivors' fsyncs by kind."""
    create_and_settle(side, partitions)
    zk = side.zk()
    old, epoch = zk.read_controller_and_epoch()
    if old is None:
        raise RuntimeError(f"{side.name}: no controller")
    before = {tp: st.leader_epoch for tp, (st, _v) in zk.read_snapshot().states.items()}
    survivors = [b for b in side.ids if b != old]
    spies = []
    try:
        for b in survivors:
            spies.append(Strace(side.pid(b), work / f"{side.name}-fsyncs-{partitions}-{b}.txt").__enter__())
        side.signal(old, signal.SIGTERM)
        new, _elected = wait_for(lambda: new_controller(zk, old), timeout_s, f"{side.name}: a new controller",
                                 interval=POLL_S)
        wait_for(lambda: side.controller_ready_ms(new, epoch + 1), timeout_s,
                 f"{side.name}: broker {new}'s failover of epoch {epoch + 1}", interval=0.2)
        side.wait_exit(old, 120)
        last: dict[int, tuple[int, float]] = {}
        wait_for(lambda: _quiet(spies, last), timeout_s, f"{side.name}: the survivors' take-up fsyncs quiet",
                 interval=0.2)
    finally:
        for s in spies:
            s.__exit__()
    new_epochs = collections.Counter(st.leader for tp, (st, _v) in zk.read_snapshot().states.items()
                                     if st.leader_epoch != before.get(tp))
    out = {"partitions": partitions, "controller": old, "survivors": {}}
    for b, s in zip(survivors, spies):
        out["survivors"][b] = {"fsyncs": count_fsyncs(s.out.read_text(errors="replace")),
                               "new_epochs_led": new_epochs.get(b, 0)}
        os.unlink(s.out)
    return out


def fsync_report(res: dict[str, list], partitions: list[int], names: dict[str, str]) -> None:
    """Per side and size: the survivors' fsyncs by kind (summed), and the partitions they lead under a new epoch."""
    for n in partitions:
        for kind, name in names.items():
            for r in res.get(f"{kind}|fsyncs {n}", []):
                total: collections.Counter = collections.Counter()
                for s in r["survivors"].values():
                    total.update(s["fsyncs"])
                led = sum(s["new_epochs_led"] for s in r["survivors"].values())
                parts = ", ".join(f"{k} {total[k]:,}" for k in KINDS if total[k])
                print(f"fsyncs of the {BROKERS - 1} survivors of the controller's SIGTERM on {name}, {n:,} "
                      f"partitions: {sum(total.values()):,} ({parts}); partitions they lead under a new "
                      f"leader epoch: {led:,}")
