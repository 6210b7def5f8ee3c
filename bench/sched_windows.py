"""Which processes use the cores in a failover's windows: per process, the CPU it ran and the time its threads
waited runnable for a core (run-queue wait), from the kernel's scheduler events.

    rec = SchedRecorder.start(path)      # `perf sched record`, system-wide, on CLOCK_MONOTONIC (the event logs' clock)
    ...                                  # the failover
    rec.stop()
    rows = switches(path)                # one row per time a thread left a core
    cpu, wait = window(rows, a_ns, b_ns, label)   # ns per label (label(pid, comm) names each process)

Used by bench/coordinator.py --sched.  Needs `perf` and the right to trace the scheduler (root, or
kernel.perf_event_paranoid <= -1); start() returns None without them.  perf itself takes some CPU while it
records, counted under "others" (with kernel threads and other users' work: 1-2 ms of a 65 ms window on
2 cores on a quiet machine, issue 49's fo49j).  Idle time = the window's length x the cores - every task's CPU.
"""
from __future__ import annotations

import os
import re
import shutil
import statistics
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Callable, NamedTuple

#: perf needs a few hundred ms before it records (its set-up); start() waits this long.
WARM_UP_S = 1.0

_LINE = re.compile(r"^\s*(\d+\.\d+)\s+\[(\d+)\]\s+(.+?)\[(\d+)(?:/(\d+))?\]\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


class Switch(NamedTuple):
    """A thread left a core at ``t_ns`` after running ``run_ns``; before that it waited ``wait_ns`` runnable."""
    t_ns: int
    comm: str
    tid: int
    pid: int
    run_ns: int
    wait_ns: int


class SchedRecorder:
    def __init__(self, proc: subprocess.Popen, path: Path):
        self.proc = proc
        self.path = path

    @classmethod
    def start(cls, path: Path) -> "SchedRecorder | None":
        if shutil.which("perf") is None:
            return None
        proc = subprocess.Popen(["perf", "sched", "record", "-k", "CLOCK_MONOTONIC", "-o", str(path)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(WARM_UP_S)
        if proc.poll() is not None:   # not allowed, or no such events on this kernel
            return None
        return cls(proc, path)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def switches(path: Path) -> list[Switch]:
    """The recording's context switches, from `perf sched timehist` (times in ns on CLOCK_MONOTONIC)."""
    out = subprocess.run(["perf", "sched", "timehist", "-i", str(path)], capture_output=True, text=True,
                         check=False).stdout
    rows = []
    for line in out.splitlines():
        m = _LINE.match(line)
        if m:
            t, _cpu, comm, tid, pid, _wait, delay, run = m.groups()
            rows.append(Switch(round(float(t) * 1e9), comm.strip(), int(tid), int(pid or tid),
                               round(float(run) * 1e6), round(float(delay) * 1e6)))
    return rows


def window(rows: list[Switch], a_ns: int, b_ns: int, label: Callable[[int, str], str]) -> tuple[Counter, Counter]:
    """CPU and run-queue wait (ns) per label within [a_ns, b_ns]; the label "idle" gets the cores' idle time."""
    cpu: Counter = Counter()
    wait: Counter = Counter()
    for r in rows:
        start = r.t_ns - r.run_ns
        ran = min(r.t_ns, b_ns) - max(start, a_ns)
        if ran > 0:
            cpu[label(r.pid, r.comm)] += ran
        waited = min(start, b_ns) - max(start - r.wait_ns, a_ns)
        if waited > 0:
            wait[label(r.pid, r.comm)] += waited
    cpu["idle"] = max(0, (os.cpu_count() or 1) * (b_ns - a_ns) - sum(cpu.values()))
    return cpu, wait


#: bench/coordinator.py --sched's processes, as printed: the stopping broker, the new coordinator, the offsets
#: partition's other ISR member, ZooKeeper, the benchmark's process (the clients), everything else on the machine
#: (other users' work, kernel threads, perf itself), and the cores' idle time.
WHO = ("stopping", "new", "follower", "zookeeper", "clients", "others", "idle")


def failover_cpu(rec: SchedRecorder, roles: dict, t0: int, loaded_ns: int, first_ns: int,
                 cs_done_ns: int | None) -> dict:
    """A coordinator failover's CPU and run-queue wait (ms) per process (``roles``: pid -> one of WHO) from the
    signal (``t0``) to the load, and from the load to the first commit; and the stopping broker's CPU from its
    controlled shutdown's end (``cs_done_ns``) to its exit (its last switch), all of it and the part between the
    load and the first commit.  Deletes the recording."""
    rows = switches(rec.path)
    rec.path.unlink(missing_ok=True)

    def label(pid: int, _comm: str) -> str:
        return roles.get(pid, "others")
    out = {}
    for name, a, b in (("signal_loaded", t0, loaded_ns), ("loaded_first", loaded_ns, first_ns)):
        cpu, wait = window(rows, a, b, label)
        out.update({f"sched_{name}_{who}_cpu": cpu[who] / 1e6 for who in WHO})
        out.update({f"sched_{name}_{who}_wait": wait[who] / 1e6 for who in WHO if who != "idle"})
    stopping = {pid for pid, who in roles.items() if who == "stopping"}
    gone = max((r.t_ns for r in rows if r.pid in stopping), default=None)
    if cs_done_ns is not None and gone is not None and gone > cs_done_ns:
        out["sched_stopping_after_cs_ms"] = (gone - cs_done_ns) / 1e6
        out["sched_stopping_after_cs_cpu"] = window(rows, cs_done_ns, gone, label)[0]["stopping"] / 1e6
        a = max(cs_done_ns, loaded_ns)
        out["sched_stopping_after_cs_in_loaded_first_cpu"] = (
            window(rows, a, first_ns, label)[0]["stopping"] / 1e6 if first_ns > a else 0.0)
    return out


def print_failover(runs: list[dict]) -> None:
    """The medians of failover_cpu's figures over ``runs`` (those recorded), one line per window."""
    runs = [r for r in runs if "sched_loaded_first_new_cpu" in r]
    if not runs:
        return
    print(f"  where the cores went (--sched: the scheduler's events; medians over {len(runs)} failovers; "
          "CPU ms / run-queue wait ms per process; idle = the cores' idle time):")
    for name, a, b in (("signal_loaded", "signal", "loaded"), ("loaded_first", "loaded", "first commit")):
        span = statistics.median((r["first_commit"] - r["loaded"]) if name == "loaded_first" else r["loaded"]
                                 for r in runs)
        print(f"    {a} -> {b} ({span:.1f} ms x {os.cpu_count()} cores): " + ", ".join(
            f"{who} {statistics.median(r[f'sched_{name}_{who}_cpu'] for r in runs):.1f}"
            + (f"/{statistics.median(r[f'sched_{name}_{who}_wait'] for r in runs):.1f}" if who != "idle" else "")
            for who in WHO))
    after = [r for r in runs if "sched_stopping_after_cs_cpu" in r]
    if after:
        print("    the stopping broker from its controlled shutdown's end to its exit: "
              f"{statistics.median(r['sched_stopping_after_cs_ms'] for r in after):.1f} ms, CPU "
              f"{statistics.median(r['sched_stopping_after_cs_cpu'] for r in after):.1f} ms, of which "
              f"{statistics.median(r['sched_stopping_after_cs_in_loaded_first_cpu'] for r in after):.1f} ms "
              "between the load and the first commit")
