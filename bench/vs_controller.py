"""Controller failover for bench/vs_kafka.py, as ZooKeeper shows it, the same way on both sides.

The controller's broker gets SIGTERM or SIGKILL (the cluster.yaml has controlled shutdown off, so the next
controller does all the work: it elects a leader for every partition the old controller led).  From the
signal, the waiter reads the partition states of the partitions the old broker led (one multiRead every
``POLL_S``) until each names a leader that is alive (neither the old broker nor -1).  Each time is the
znode's own mtime, ZooKeeper's clock when the write landed, not when the waiter saw it, so the poll interval
does not round the figure; ``/controller``'s ctime gives the moment the next controller was elected.
"""
from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

from bench.vs_sides import Side
from util.waiting import wait_for
from zk import paths
from zk.batch import GET_DATA
from zk.client import ZkClient

POLL_S = 0.05


def controller_failover(side: Side, sig: signal.Signals, timeout: float = 120.0) -> dict[str, Any]:
    zk = side.zk()
    old = zk.read_controller()
    if old is None:
        raise RuntimeError(f"{side.name}: no controller")
    snap = zk.read_snapshot()
    led = sorted(tp for tp, (st, _v) in snap.states.items() if st.leader == old)
    total = len(snap.states)
    elected: dict[tuple[str, int], float] = {}
    la = os.getloadavg()[0]
    mono0, wall0 = time.monotonic_ns(), time.time() * 1000.0
    side.signal(old, sig)

    try:
        wait_for(lambda: poll_new_leaders(zk, led, old, elected), timeout,
                 f"{side.name}: a new leader for the {len(led)} partitions broker {old} led", interval=POLL_S)
    except TimeoutError as e:   # say whether the old broker is still shutting down, and how far it got
        running, registered = side.pid(old) is not None, old in zk.read_brokers()
        raise TimeoutError(f"{e} ({len(elected)} elected; broker {old} still running: {running}, still "
                           f"registered: {registered}; the end of its log:\n{side.log_tail(old, 800)})") from e

    _new, controller_ms = wait_for(lambda: new_controller(zk, old), timeout, f"{side.name}: a new controller",
                                   interval=POLL_S)
    side.wait_exit(old, 60)
    stages = getattr(side, "controller_stages", None)   # kafkasim's event logs: where its time went
    return {"signal": sig.name, "partitions": total, "led": len(led), "load": la,
            "controller": controller_ms - wall0, "all_leaders": max(elected.values()) - wall0 if elected else None,
            "first_leader": min(elected.values()) - wall0 if elected else None,
            **(stages(old, mono0) if stages is not None else {})}


def poll_new_leaders(zk: ZkClient, led: list[tuple[str, int]], old: int,
                     found: dict[tuple[str, int], float]) -> bool:
    """One poll of the partitions ``led`` that broker ``old`` led: each whose state znode names another leader (not
    -1) goes into ``found`` with that znode's mtime (ZooKeeper's clock when the write landed); True once all have."""
    pending = [tp for tp in led if tp not in found]
    for tp, ans in zip(pending, zk.read_many([(GET_DATA, paths.partition_state(*tp)) for tp in pending])):
        if not isinstance(ans, Exception) and json.loads(ans[0])["leader"] not in (old, -1):
            found[tp] = float(ans[1].mtime)
    return len(found) == len(led)


def new_controller(zk: ZkClient, old: int) -> tuple[int, float] | None:
    """(the controller, ``/controller``'s ctime) once a broker other than ``old`` holds ``/controller``."""
    data, stat = zk.get(paths.CONTROLLER)
    now = json.loads(data)["brokerid"]
    return (now, float(stat.ctime)) if now != old else None
