"""TEMPORARY probe (term49h, not to be kept): the clocks of a controller's state writes, in the broker.

Active only with KAFKASIM_PROBE_WRITES=<dir>: one JSON line per write_states call in <dir>/probe-<pid>.jsonl, and
a GIL-latency sampler (a thread sleeping 1 ms in a loop, its lateness) in <dir>/gil-<pid>.txt.
"""
from __future__ import annotations

import json
import os
import threading
import time

DIR = os.environ.get("KAFKASIM_PROBE_WRITES")
_marks: dict[int, dict] = {}
_lock = threading.Lock()
_installed: set[int] = set()
_last_flush: dict = {}
_tids: dict = {}


def schedstat(tid: int | None) -> list[int] | None:
    """(on the CPU ns, waiting on a run queue ns, timeslices) of a thread of this process."""
    if tid is None:
        return None
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return None


def sched_now() -> dict:
    return {"ctl": schedstat(threading.get_native_id()), "kazoo": schedstat(_tids.get("kazoo"))}


def now() -> int:
    return time.monotonic_ns()


def note_flush(t0: int, t1: int, lines: int) -> None:
    _last_flush.update(t0=t0, t1=t1, lines=lines)


def install(kz) -> None:
    """Wrap the kazoo connection's send and read steps (instance attributes) to stamp marked requests."""
    conn = kz._connection
    if id(conn) in _installed:
        return
    _installed.add(id(conn))
    for t in threading.enumerate():
        if "zk_loop" in t.name:
            _tids["kazoo"] = t.native_id
    submit, read_header, read_response = conn._submit, conn._read_header, conn._read_response
    last = {}

    def _submit(request, timeout, xid=None):
        m = _marks.get(id(request))
        t0 = now()
        r = submit(request, timeout, xid)
        if m is not None:
            m["send0"], m["send1"] = t0, now()
            _tids["kazoo"] = threading.get_native_id()
        return r

    def _read_header(timeout):
        t0 = now()
        r = read_header(timeout)
        last["read0"], last["read1"] = t0, now()
        return r

    def _read_response(header, buffer, offset):
        try:
            request = kz._pending[0][0]
        except IndexError:
            request = None
        m = _marks.get(id(request))
        if m is not None:
            m["read0"], m["read1"], m["resp0"] = last.get("read0"), last.get("read1"), now()
        r = read_response(header, buffer, offset)
        if m is not None:
            m["set"] = now()
        return r

    conn._submit, conn._read_header, conn._read_response = _submit, _read_header, _read_response


def mark(request) -> dict:
    m: dict = {}
    _marks[id(request)] = m
    return m


def record(rec: dict) -> None:
    rec["flush"] = dict(_last_flush)
    _last_flush.clear()
    time.sleep(0.002)   # the reader thread's last stamp
    for m in rec.get("multis", ()):
        m.update(m.pop("req", None) or {})
    with _lock:
        with open(os.path.join(DIR, f"probe-{os.getpid()}.jsonl"), "a") as f:
            f.write(json.dumps(rec) + "\n")
    _marks.clear()


def start_gil_sampler() -> None:
    def run() -> None:
        path = os.path.join(DIR, f"gil-{os.getpid()}.txt")
        buf = []
        last_write = time.monotonic()
        while True:
            t0 = time.monotonic_ns()
            time.sleep(0.001)
            t1 = time.monotonic_ns()
            buf.append(f"{t0} {(t1 - t0) // 1000}\n")
            if time.monotonic() - last_write > 0.2:
                with open(path, "a") as f:
                    f.write("".join(buf))
                buf.clear()
                last_write = time.monotonic()
    threading.Thread(target=run, name="gil-probe", daemon=True).start()
