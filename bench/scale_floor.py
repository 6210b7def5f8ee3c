"""The floor of a controller's SIGTERM failover at N partitions (bench/scale.py's, issue 49).

The least ZooKeeper work any implementation of Kafka 2.8's design must do from
the stopping controller's signal until a new controller has every partition
led, measured on the cluster's own ZooKeeper (in a chroot of its own, the
brokers stopped) right after that size's failover, by separate kazoo processes
(bench/scale_floor_worker.py):

  1. the controlled shutdown: one conditional state write for every partition
     the stopping broker holds a replica of, in the batches and counts the
     run's own ``partition_states_written`` events show (the leaderships moved
     away, then the ISRs shrunk: at 10k about 2,010 + 4,020), each write fenced
     by a check of /controller_epoch's version, as Kafka's are; the znodes made
     with a state read from the cluster, at the cluster's paths, and written
     with that state shrunk by the stopping broker (the same sizes);
  2. the handover: the stopping controller's session closed, so its Election
     znode is gone, and the next contender of kazoo's Election elected (as
     bench/controller_failover.py's baseline);
  3. the next controller: with controlled shutdown there is nothing left to
     elect.  The STRICT floor ends at its election (kafkasim's next controller
     may decide from its broker's cache, docs/deviations.md); the KAFKA variant
     adds the read of every partition state Kafka's initializeControllerContext
     does (here one multiRead, cheaper than Kafka's pipelined getData calls).
     Not counted in either: Kafka's read of the followers' states before it
     shrinks their ISRs (ReplicaStateMachine), any LeaderAndIsr or
     UpdateMetadata, any broker's own shutdown.

The writes go the cheaper of two ways ZooKeeper allows, the same at both sizes
(``METHOD``): ``partition``, one small multi (check + setData) per partition,
all of a batch pipelined (Kafka 2.8's updateLeaderAndIsr), or ``batched``,
multis of MULTI_CHUNK setData ops with one check each, pipelined (kafkasim's
ZkClient.write_states).  Both are measured once per size (``compare``, writes
only, each twice, alternating) and printed.  From the signal to the next
controller elected is the floor's time; its 10k-vs-1k ratio is printed beside
kafkasim's: if it is below the goal's 5x, the goal is not below the floor.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "bench" / "scale_floor_worker.py"
MULTI_CHUNK = 1000       # zk.client.MULTI_CHUNK: the cluster's ops per multi
OFFSETS_PARTITIONS = 50  # __consumer_offsets, besides the benchmark's topic
METHOD = "batched"       # the cheaper way, measured: bench/RESULTS.md's entry of branch scale49g


def state_paths(states: int, topic: str = "scale") -> list[str]:
    """The cluster's partition-state paths: ``states - 50`` of ``topic``, then the 50 of __consumer_offsets."""
    n = max(0, states - OFFSETS_PARTITIONS)
    return ([f"/brokers/topics/{topic}/partitions/{p}/state" for p in range(n)]
            + [f"/brokers/topics/__consumer_offsets/partitions/{p}/state" for p in range(states - n)])


def shrunk_state(data: bytes, broker: int) -> bytes:
    """A partition state (Kafka's JSON) with ``broker`` out of its ISR (the first ISR member when it is not in
    it), a new leader from the rest where it led, and the next leader epoch: the controlled shutdown's write."""
    s = json.loads(data)
    isr = list(s["isr"])
    gone = broker if broker in isr else isr[0]
    if len(isr) > 1:
        isr.remove(gone)
    if s["leader"] == gone:
        s["leader"] = isr[0]
    s["isr"], s["leader_epoch"] = isr, s["leader_epoch"] + 1
    return json.dumps(s, separators=(",", ":")).encode()


def floor_counts(cs_writes: list[tuple[int, float]], states: int, brokers: int = 5, rf: int = 3) -> list[int]:
    """The controlled shutdown's state writes, batch by batch, as the run's events show them (count, ms); without
    them, what one broker of ``brokers`` holds of ``states`` partitions at ``rf``: its leaderships, its follows."""
    counts = [int(c) for c, _ms in cs_writes if c]
    if counts:
        return counts
    held = round(states * rf / brokers)
    led = round(states / brokers)
    return [led, held - led]


def parse_lines(lines: list[str]) -> dict[str, Any]:
    """The worker's lines of one floor failover -> its stages in ms: ``writes`` (signal -> every batch written,
    and each ``batches`` own), ``handover`` (-> the next contender elected), ``strict`` (signal -> elected),
    ``read`` (the next controller's read of every state), ``kafka`` (strict + read)."""
    rows = [ln.split() for ln in lines if ln.strip()]
    sig = next(r for r in rows if r[0] == "signal")
    old = sig[1]
    written = next(r for r in rows if r[0] == "written" and r[1] == old)
    elected = next(r for r in rows if r[0] == "elected" and r[1] != old)
    read = next((r for r in rows if r[0] == "read"), None)
    t0 = int(sig[2])
    out = {"writes": (int(written[2]) - t0) / 1e6, "batches": [int(us) / 1000 for us in written[3:]],
           "handover": (int(elected[2]) - int(written[2])) / 1e6, "strict": (int(elected[2]) - t0) / 1e6}
    if read is not None:
        out["read"] = int(read[2]) / 1e6
        out["kafka"] = out["strict"] + out["read"]
    return out


def compare_lines(lines: list[str]) -> dict[str, list[float]]:
    """The ``compare`` lines -> each method's write times, ms."""
    out: dict[str, list[float]] = {}
    for r in (ln.split() for ln in lines if ln.startswith("compare ")):
        out.setdefault(r[1], []).append(float(r[2]))
    return out


def verdict(ours: tuple[float, float], floor: tuple[float, float], goal: float = 5.0) -> str:
    """kafkasim's and the floor's (1k, 10k) figures -> the ratio goal against the floor's own ratio."""
    mine, least = ours[1] / ours[0], floor[1] / floor[0]
    if least > goal:
        where = (f"the goal is below the floor (the floor's own ratio {least:.2f}x > {goal:g}x); kafkasim "
                 + ("within" if mine <= least else "above") + " the floor's ratio")
    else:
        where = (f"the goal is NOT below the floor (its own ratio {least:.2f}x <= {goal:g}x); kafkasim "
                 + ("meets" if mine <= goal else "misses") + " it")
    return f"kafkasim {mine:.2f}x, the floor {least:.2f}x: {where}"


def _run(worker: list[str], out: Path, states: int, counts: list[int], written: bytes, method: str,
         election: str) -> dict[str, Any]:
    out.write_text("")
    procs = [subprocess.Popen(worker + [str(out), "contend", election], stdin=subprocess.PIPE, text=True) for _ in range(3)]

    def rows() -> list[list[str]]:
        return [ln.split() for ln in out.read_text().splitlines() if ln.strip()]

    def until(pred, what: str, timeout: float = 60.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            got = pred(rows())
            if got:
                return got
            time.sleep(0.005)   # a poll of the worker's file, not a wait for a span
        raise TimeoutError(f"the floor: {what}")

    try:
        first = until(lambda rs: sum(r[0] == "ready" for r in rs) == 3 and next(
            (r[1] for r in rs if r[0] == "elected"), None), "three contenders and a leader")
        leader = next(p for p in procs if str(p.pid) == first)
        leader.stdin.write(f"shutdown {method} {states} " + " ".join(map(str, counts)) + f"\n{written.hex()}\n")
        leader.stdin.flush()
        nxt = until(lambda rs: next((r[1] for r in rs if r[0] == "elected" and r[1] != first), None),
                    "the next controller")
        successor = next(p for p in procs if str(p.pid) == nxt)
        successor.stdin.write(f"read {states}\n")
        successor.stdin.flush()
        until(lambda rs: any(r[0] == "read" for r in rs), "the next controller's read")
        return parse_lines(out.read_text().splitlines())
    finally:
        for p in procs:
            p.kill()
            p.wait()


def measure(connect: str, work: Path, states: int, counts: list[int], sample: bytes, broker: int,
            runs: int = 3, method: str = METHOD) -> dict[str, Any]:
    """The floor at ``states`` partition states on ZooKeeper ``connect``: the two write methods compared once,
    then ``runs`` floor failovers with ``method``.  -> their figures, medians and the load."""
    chroot = f"/bench-scale-floor-{uuid.uuid4().hex[:8]}"
    out = work / f"floor-{states}-{uuid.uuid4().hex[:6]}.log"
    out.touch()
    worker = [sys.executable, str(WORKER), connect, chroot]
    written = shrunk_state(sample, broker)
    subprocess.run(worker + [str(out), "setup", str(states), sample.hex()], check=True, timeout=300)
    subprocess.run(worker + [str(out), "compare", written.hex(), str(states)] + [str(c) for c in counts], check=True,
                   timeout=300)
    res: dict[str, Any] = {"states": states, "counts": counts, "method": method, "sample_bytes": len(sample),
                           "written_bytes": len(written), "compare": compare_lines(out.read_text().splitlines()),
                           "load": load1(), "runs": []}
    for i in range(runs):
        res["runs"].append(_run(worker, work / f"floor-{states}-run{i}.log", states, counts, written, method,
                                f"/controller-election-{i}"))
    for k in ("writes", "handover", "strict", "read", "kafka"):
        res[k] = statistics.median(r[k] for r in res["runs"])
    return res


def load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def report(f: dict[str, Any]) -> list[str]:
    cmp = ", ".join(f"{m} {' / '.join(f'{v:.1f}' for v in vs)} ms" for m, vs in f["compare"].items())
    out = [f"floor ({f['states']} states, the same ZooKeeper, its own chroot, brokers stopped; load {f['load']:.2f}): "
           f"writes {'+'.join(map(str, f['counts']))} of {f['written_bytes']} bytes (znodes of {f['sample_bytes']})",
           f"  write methods, writes only, alternating: {cmp}; the floor uses '{f['method']}'"]
    for i, r in enumerate(f["runs"]):
        out.append(f"  run {i + 1}: writes {r['writes']:.1f} ms ({' + '.join(f'{b:.1f}' for b in r['batches'])}), "
                   f"handover {r['handover']:.1f} ms, strict {r['strict']:.1f} ms; read {r['read']:.1f} ms, "
                   f"with Kafka's read {r['kafka']:.1f} ms")
    out.append(f"  median: strict floor {f['strict']:.1f} ms (writes {f['writes']:.1f}, handover {f['handover']:.1f}); "
               f"with Kafka's read {f['kafka']:.1f} ms")
    return out
