"""What a group coordinator's open connections receive when its broker is stopped, on the wire.

:func:`probe` sets up, at the coordinator of a group (found with FindCoordinator), a synced member A, a second
member B whose JoinGroup is parked (the group is PreparingRebalance, waiting for A to rejoin), and three
connections that keep asking, one request at a time: A's Heartbeat, an OffsetCommit of an empty group on the same
offsets partition, and a FindCoordinator.  Then it signals the coordinator's broker (``stop``) and records, on
every connection, each answer's error code (or ``closed``) with its time from the signal, until every
connection is closed.

Kafka 2.8.2, SIGTERM (controlled shutdown on): the controller moves the partition's leadership away, the
broker's LeaderAndIsr unloads the partition (GroupCoordinator.onResignation -> onGroupUnloaded), which answers
the parked JoinGroup NOT_COORDINATOR (16); requests that arrive until the socket server stops are answered
NOT_COORDINATOR too; then every connection is closed.  SIGKILL: every connection is closed, no answer.
:func:`runs` collapses a connection's answers into runs for printing and for a test's assertions.

    python -m conformance.unload_wire            # both sides (Kafka 2.8.2 and kafkasim), SIGTERM and SIGKILL
"""
from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from kafkacommon.hashing import partition_for

from conformance.side import assignment, join_fields
from conformance.wire import Conn, decode_response, encode_request

NOT_COORDINATOR = 16
REBALANCE_IN_PROGRESS = 27
SESSION_MS = 30_000
REBALANCE_MS = 60_000
TOPIC = "unload-t"          # named in the members' subscriptions only: no topic is needed
OFFSETS = "__consumer_offsets"   # the one topic both sides have: the empty group commits an offset of it


@dataclass
class Answer:
    t_ms: float             # from the signal
    error: int | str        # the response's error code, or "closed"


@dataclass
class Probe:
    coordinator: int
    partition: int
    signal: str
    answers: dict[str, list[Answer]] = field(default_factory=dict)

    def runs(self, conn: str) -> list[tuple[int | str, int, float, float]]:
        return runs(self.answers.get(conn, []))

    def describe(self) -> str:
        lines = [f"{self.signal} of coordinator broker {self.coordinator} (__consumer_offsets-{self.partition}); "
                 f"per connection, its answers in order (error code x count, first..last ms from the signal):"]
        for conn in self.answers:
            lines.append(f"  {conn:<15} " + ", ".join(
                f"{e} x{n} ({a:.1f}..{b:.1f})" for e, n, a, b in self.runs(conn)))
        return "\n".join(lines)


def runs(answers: list[Answer]) -> list[tuple[int | str, int, float, float]]:
    """Consecutive equal answers as (error, count, first ms, last ms)."""
    out: list[list[Any]] = []
    for a in answers:
        if out and out[-1][0] == a.error:
            out[-1][1] += 1
            out[-1][3] = a.t_ms
        else:
            out.append([a.error, 1, a.t_ms, a.t_ms])
    return [tuple(r) for r in out]  # type: ignore[misc]


def _error(body: dict[str, Any]) -> int | str:
    if body.get("connection") == "closed":
        return "closed"
    if "node_id" in body and body.get("error_code") == 0:   # FindCoordinator: which broker it names
        return f"0->{body['node_id']}"
    if "error_code" in body:
        return body["error_code"]
    topics = body.get("topics") or []                       # OffsetCommit
    return topics[0]["partitions"][0]["error_code"] if topics else "?"


def find_coordinator(listeners: dict[int, tuple[str, int]], group: str, timeout_s: float = 60.0) -> int:
    deadline = time.monotonic() + timeout_s
    while True:
        for b, (host, port) in listeners.items():
            c = Conn(host, port, 5.0)
            try:
                r = c.request(10, 1, {"key": group, "key_type": 0})
            finally:
                c.close()
            if r.get("error_code") == 0:
                return r["node_id"]
        if time.monotonic() > deadline:
            raise TimeoutError(f"no coordinator for {group}: {r}")
        time.sleep(0.2)   # a retry interval, as a client's backoff (not a synchronisation)


def probe(listeners: dict[int, tuple[str, int]], stop: Callable[[int, signal.Signals], None],
          sig: signal.Signals, offsets_partitions: int, prefix: str = "unload", timeout_s: float = 60.0) -> Probe:
    """Run the probe described above against the brokers at ``listeners``; ``stop(broker, sig)`` signals one."""
    group = f"{prefix}-g"
    partition = partition_for(group, offsets_partitions)
    other = next(g for g in (f"{prefix}-c{i}" for i in range(100_000))
                 if partition_for(g, offsets_partitions) == partition)
    deadline = time.monotonic() + timeout_s
    while True:   # COORDINATOR_LOAD_IN_PROGRESS (14) or NOT_COORDINATOR (16) until the coordinator is settled
        x = find_coordinator(listeners, group)
        host, port = listeners[x]
        conns = {name: Conn(host, port, timeout_s) for name in ("A", "B", "heartbeat", "commit", "findcoordinator")}
        # A joins (JoinGroup v3: no MEMBER_ID_REQUIRED round) and syncs: the group is Stable, generation 1
        a = conns["A"].request(11, 3, join_fields(group, TOPIC, "", SESSION_MS, REBALANCE_MS))
        if a["error_code"] not in (14, 16) or time.monotonic() > deadline:
            break
        for c in conns.values():
            c.close()
        time.sleep(0.1)   # a client's retry backoff
    try:
        if a["error_code"] != 0:
            raise RuntimeError(f"A's JoinGroup: {a}")
        member, gen = a["member_id"], a["generation_id"]
        s = conns["A"].request(14, 1, {"group_id": group, "generation_id": gen, "member_id": member,
                                       "assignments": [{"member_id": member, "assignment": assignment(TOPIC, [0])}]})
        if s["error_code"] != 0:
            raise RuntimeError(f"A's SyncGroup: {s}")
        heartbeat = {"group_id": group, "generation_id": gen, "member_id": member}
        commit = {"group_id": other, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
                  "topics": [{"name": OFFSETS, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                             "committed_metadata": ""}]}]}
        e = _error(conns["commit"].request(8, 2, commit))
        if e != 0:
            raise RuntimeError(f"the empty group's OffsetCommit failed before the signal: {e}")
        # B's JoinGroup parks: the group is PreparingRebalance until A rejoins (it never does)
        conns["B"].send(encode_request(11, 3, join_fields(group, TOPIC, "", SESSION_MS, REBALANCE_MS), 7))
        deadline = time.monotonic() + timeout_s
        while _error(conns["heartbeat"].request(12, 1, heartbeat)) != REBALANCE_IN_PROGRESS:
            if time.monotonic() > deadline:
                raise TimeoutError("the group never began rebalancing")
        out = Probe(x, partition, sig.name, {name: [] for name in ("B", "heartbeat", "commit", "findcoordinator")})
        t0 = time.monotonic()
        ms = lambda: (time.monotonic() - t0) * 1000.0   # noqa: E731

        def parked() -> None:
            got = conns["B"].receive()
            if got is None:
                out.answers["B"].append(Answer(ms(), "closed"))
                return
            out.answers["B"].append(Answer(ms(), _error(decode_response(11, 3, got)[1])))
            if conns["B"].receive() is None:   # then, when the broker closes it
                out.answers["B"].append(Answer(ms(), "closed"))

        def loop(name: str, api: int, version: int, fields: dict[str, Any]) -> None:
            while time.monotonic() - t0 < timeout_s:
                try:
                    e = _error(conns[name].request(api, version, fields))
                except OSError:
                    e = "closed"
                out.answers[name].append(Answer(ms(), e))
                if e == "closed":
                    return
        threads = [threading.Thread(target=parked, daemon=True),
                   threading.Thread(target=loop, args=("heartbeat", 12, 1, heartbeat), daemon=True),
                   threading.Thread(target=loop, args=("commit", 8, 2, commit), daemon=True),
                   threading.Thread(target=loop, args=("findcoordinator", 10, 1, {"key": group, "key_type": 0}),
                                    daemon=True)]
        stop(x, sig)
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout_s + 5)
        return out
    finally:
        for c in conns.values():
            c.close()


KAFKA_LINES = ("Controlled shutdown", "Resigned as the group coordinator", "Unloading group metadata",
               "Finished unloading", "Stopping socket server", "Follower __consumer_offsets")


def main() -> None:   # pragma: no cover (a measurement: both sides, each signal, on fresh clusters)
    """``python -m conformance.unload_wire [SIGTERM|SIGKILL ...]``: each signal on a fresh pair of clusters
    (conformance/clusters.py: 2 brokers a side, one offsets partition), then what the coordinator logged of it:
    Kafka's server.log and state-change.log lines, kafkasim's events."""
    import os
    import sys
    import tempfile
    from pathlib import Path
    from conformance.clusters import SETTINGS, Sides
    from node.events import read_run_events
    sigs = [signal.Signals[a] for a in sys.argv[1:]] or [signal.SIGTERM, signal.SIGKILL]
    for sig in sigs:
        with tempfile.TemporaryDirectory(prefix="unload-wire-") as d:
            sides = Sides(Path(d))
            with sides as (kafka, sim):
                ref, cluster = sides.ref, sides.sim
                assert ref is not None and cluster is not None
                stops = {"kafka": lambda b, s: os.kill(ref.pids[b], s), "kafkasim": cluster.signal_broker}
                for side in (kafka, sim):
                    p = probe(side.listeners, stops[side.name], sig, SETTINGS["offsets.topic.num.partitions"],
                              prefix=f"unload-{side.name}")
                    print(f"{side.name}: {p.describe()}", flush=True)
                    if side.name == "kafka":
                        ref.wait_exit(p.coordinator, 60)
                        for name in ("server.log", "state-change.log"):
                            text = (ref.broker_dir(p.coordinator) / "logs" / name).read_text(errors="replace")
                            print("\n".join(f"    {ln}" for ln in text.splitlines() if any(w in ln for w in KAFKA_LINES)))
                    else:
                        cluster.wait_exit(p.coordinator, 60)
                        ev = [e for e in read_run_events(cluster.run_dir) if e["broker"] == p.coordinator]
                        t0 = next((e["mono_ns"] for e in ev if e["type"] == "signal_received"), None)
                        for e in ev if t0 is not None else []:
                            if e["mono_ns"] >= t0 and e["type"] != "kafka_request":
                                print(f"    {(e['mono_ns'] - t0) / 1e6:7.1f} ms {e['type']}")


if __name__ == "__main__":   # pragma: no cover
    main()
