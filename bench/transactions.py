"""Transactions: a transaction coordinator's SIGKILL failover against the group coordinator's, and
transactional produce against idempotent produce, each figure against its baseline from the same run.

    python bench/transactions.py [--runs 5] [--records 50000] [--rounds 3] [--clients librdkafka,java]
                                 [--reference] [--quick] [--json]

One cluster of 3 real broker processes (one real ZooKeeper, tick 100 ms, session timeout 1 s,
controlled shutdown off, __transaction_state and __consumer_offsets with 10 partitions, RF 3):

  failover    a transactional id T and a group G whose __transaction_state and __consumer_offsets
              partitions have the same preferred leader, which is not the controller: a confluent-kafka
              transactional producer committing one transaction of one record after another (T), and a
              confluent-kafka consumer in G committing synchronously after every poll.  That broker gets
              SIGKILL; per client, the time from the signal to its first request accepted by the new
              coordinator and answered to the client: EndTxn without error on another broker (from the
              kafka_request events) and the commit_transaction call returning after it; OffsetCommit
              without error on another broker and the commit returning after it.  Between runs the broker
              is restarted and the preferred leaders elected again, so each run kills both coordinators
              at once.  Goal: the transaction coordinator's <= 1.2x the group coordinator's (medians).
  failover, Java   the same with Kafka 2.8.2's Java client (reference/javaclient.py, one JVM each): an
              exactly-once pipeline (JavaEosPipeline: read_committed input fed 200 records/s, its group's
              coordinator on another broker, one transaction per poll) against a JavaMember committing
              after every poll.  librdkafka's transactional producer queries the coordinator again 500 ms
              after its coordinator connection last went down, and every failed reconnection to the dead
              broker restarts that timer; the Java client looks it up again after its retry backoff.
  throughput  100-byte records to a topic of 1 partition, RF 3, min.insync.replicas 2, acks=all: a
              confluent-kafka transactional producer (linger.ms 5), 100 records per transaction (begin,
              100 produce, commit), against an idempotent producer (enable.idempotence, linger.ms 5)
              producing the same number, in alternating rounds.  Goal >= 0.5x (medians).  Besides, 8
              transactional producers side by side.  A transaction costs AddPartitionsToTxn (the Ongoing
              record, acks=all), the Produce, EndTxn (the PrepareCommit record), and, as in Kafka 2.8, the
              next transaction's AddPartitionsToTxn answered CONCURRENT_TRANSACTIONS until the markers and
              the CompleteCommit record are written: librdkafka then waits 20 ms before asking again.
  --reference the throughput pair again against Kafka 2.8.2 itself (reference/kafka.py: brokers with the
              same ids and settings on the same ZooKeeper, started once kafkasim's cluster is down), the
              same rounds with the same client: how far the goal is Kafka's own ratio.
"""
from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer as CConsumer, KafkaException, Producer as CProducer, TopicPartition  # noqa: E402

from bench.common import TICK_MS, make_cluster  # noqa: E402
from reference.javaclient import JavaEosPipeline, JavaMember  # noqa: E402
from reference.kafka import ReferenceCluster  # noqa: E402
from client.metadata import ClusterClient  # noqa: E402
from kafkacommon.hashing import partition_for  # noqa: E402
from node.events import read_run_events  # noqa: E402
from util.waiting import wait_for  # noqa: E402
from zk.admin import create_topic  # noqa: E402
from zk.server import EmbeddedZooKeeper  # noqa: E402

PARTITIONS = 10
TXN_TOPIC, OFFSETS_TOPIC = "__transaction_state", "__consumer_offsets"
VALUE = b"x" * 100


def ms(ns: int) -> float:
    return round(ns / 1e6, 1)


def wait_isr(c, topics: tuple[str, ...], timeout: float = 120) -> None:
    def whole() -> bool:
        view = c.view().topics
        return all(t in view and view[t]["partitions"] and all(
            sorted(s["isr"]) == sorted(s["replicas"]) and s["leader"] >= 0 for s in view[t]["partitions"].values())
            for t in topics)
    wait_for(whole, timeout, f"{', '.join(topics)}: every ISR whole")


def preferred(c, topic: str, p: int) -> int:
    return c.view().topics[topic]["partitions"][p]["replicas"][0]


def pick_pair(c, prefix: str = "") -> tuple[str, str, int]:
    """A transactional id and a group whose coordinators' partitions share a preferred leader other than the
    controller."""
    controller = c.view().controller_id
    for i in range(1000):
        tid = f"{prefix}tx-{i}"
        broker = preferred(c, TXN_TOPIC, partition_for(tid, PARTITIONS))
        if broker == controller:
            continue
        for j in range(1000):
            g = f"{prefix}g-{j}"
            if preferred(c, OFFSETS_TOPIC, partition_for(g, PARTITIONS)) == broker:
                return tid, g, broker
    raise RuntimeError("no transactional id and group share a preferred leader")


# ---------------------------------------------------------------------- failover

class TxnLoop:
    """One transaction of one record after another; the time each commit_transaction returned."""

    def __init__(self, bs: str, tid: str, topic: str, stop: threading.Event) -> None:
        self.bs, self.tid, self.topic, self.stop = bs, tid, topic, stop
        self.acks: list[int] = []
        self.errors: list[tuple[int, str]] = []
        self.thread = threading.Thread(target=self.run, daemon=True)

    def _producer(self) -> CProducer:
        p = CProducer({"bootstrap.servers": self.bs, "transactional.id": self.tid, "client.id": "tx-failover",
                       "linger.ms": 0, "transaction.timeout.ms": 10000})
        p.init_transactions(60)
        return p

    def run(self) -> None:
        p = self._producer()
        while not self.stop.is_set():
            try:
                p.begin_transaction()
                p.produce(self.topic, VALUE, partition=0)
                p.commit_transaction(60)
                self.acks.append(time.monotonic_ns())
            except KafkaException as e:
                err = e.args[0]
                self.errors.append((time.monotonic_ns(), err.name()))
                if err.fatal():
                    p = self._producer()
                elif err.txn_requires_abort():
                    try:
                        p.abort_transaction(60)
                    except KafkaException as e2:
                        self.errors.append((time.monotonic_ns(), e2.args[0].name()))


class CommitLoop:
    """A group member committing synchronously after every poll; the time each commit returned."""

    def __init__(self, bs: str, group: str, topic: str, stop: threading.Event) -> None:
        self.stop = stop
        self.acks: list[int] = []
        self.errors: list[tuple[int, str]] = []
        self.c = CConsumer({"bootstrap.servers": bs, "group.id": group, "client.id": "group-failover",
                            "enable.auto.commit": False, "auto.offset.reset": "earliest",
                            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        self.c.subscribe([topic])
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            self.c.poll(0.02)
            tps = self.c.assignment()
            if not tps:
                continue
            try:
                self.c.commit(offsets=[TopicPartition(t.topic, t.partition, 1) for t in tps], asynchronous=False)
                self.acks.append(time.monotonic_ns())
            except KafkaException as e:
                self.errors.append((time.monotonic_ns(), e.args[0].name()))


def first_accepted(c, t0: int, old: int, api: str, client_id: str) -> dict | None:
    return next((e for e in read_run_events(c.run_dir)
                 if e["mono_ns"] > t0 and e["type"] == "kafka_request" and e.get("api") == api
                 and e.get("client_id") == client_id and e.get("error") is None and e["broker"] != old), None)


class JavaTxnLoop:
    """An exactly-once pipeline in a JVM (one transaction per poll of its input, which a feeder fills); the
    time each ``committed`` report arrived."""

    def __init__(self, bs: str, tid: str, group: str, stop: threading.Event) -> None:
        self.stop = stop
        self.acks: list[int] = []
        self.errors: list[tuple[int, str]] = []
        self.pipe = JavaEosPipeline(bs, tid, group, "jin", "jout", configs={
            "producer.client.id": "tx-failover", "consumer.client.id": "tx-failover-in",
            "transaction.timeout.ms": 10000}, on_line=self._line)
        self.feeder = CProducer({"bootstrap.servers": bs, "linger.ms": 0})
        self.thread = threading.Thread(target=self.run, daemon=True)

    def _line(self, m: dict) -> None:
        if "committed" in m:
            self.acks.append(time.monotonic_ns())
        elif "aborted" in m or "fatal" in m:
            self.errors.append((time.monotonic_ns(), str(m)))

    def run(self) -> None:
        while not self.stop.is_set():
            self.feeder.produce("jin", VALUE, partition=0)
            self.feeder.poll(0)
            self.stop.wait(0.005)

    def close(self) -> None:
        self.pipe.stop(60)
        self.feeder.flush(10)


class JavaCommitLoop:
    """A Java group member committing synchronously after every poll."""

    def __init__(self, bs: str, group: str, stop: threading.Event) -> None:
        self.stop = stop
        self.acks: list[int] = []
        self.errors: list[tuple[int, str]] = []
        self.m = JavaMember(bs, group, "ft", configs={"client.id": "group-failover", "session.timeout.ms": 6000,
                                                      "heartbeat.interval.ms": 500})
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            self.m.poll(20)
            r = self.m.commit({("ft", 0): 1})
            if "committed" in r:
                self.acks.append(time.monotonic_ns())
            else:
                self.errors.append((time.monotonic_ns(), str(r.get("commit_failed"))))

    def close(self) -> None:
        self.m.close(30)


def other_group(c, broker: int) -> str:
    """A group whose coordinator's preferred leader is not ``broker`` (the Java pipeline's input group)."""
    return next(g for g in (f"eos-in-{j}" for j in range(1000))
                if preferred(c, OFFSETS_TOPIC, partition_for(g, PARTITIONS)) != broker)


def failovers(bs: str, c, runs: int, client: str) -> list[dict]:
    for t in ("ft", "jin", "jout"):
        if t not in c.view().topics:
            create_topic(c.zk(), t, 1, 3, {"min.insync.replicas": 2})
    stop = threading.Event()
    # the first FindCoordinator of a transactional id creates __transaction_state (as Kafka 2.8 does)
    boot = CProducer({"bootstrap.servers": bs, "transactional.id": "tx-boot"})
    boot.init_transactions(60)
    wait_isr(c, ("ft", "jin", "jout", TXN_TOPIC, OFFSETS_TOPIC))
    tid, group, broker = pick_pair(c, "j" if client == "java" else "")
    if client == "java":
        txn, grp = JavaTxnLoop(bs, tid, other_group(c, broker), stop), JavaCommitLoop(bs, group, stop)
    else:
        txn, grp = TxnLoop(bs, tid, "ft", stop), CommitLoop(bs, group, "ft", stop)
    pt, pg = partition_for(tid, PARTITIONS), partition_for(group, PARTITIONS)
    for loop in (txn, grp):
        loop.thread.start()
    out = []
    try:
        for _ in range(runs):
            since = time.monotonic_ns()
            wait_for(lambda: sum(a > since for a in txn.acks) > 20 and sum(a > since for a in grp.acks) > 20,
                     180, "both clients committing before the fault")
            view = c.view()
            old = view.topics[TXN_TOPIC]["partitions"][pt]["leader"]
            assert view.topics[OFFSETS_TOPIC]["partitions"][pg]["leader"] == old != view.controller_id
            t0 = time.monotonic_ns()
            c.signal_broker(old, signal.SIGKILL)

            def done(api: str, client_id: str, acks: list[int]) -> bool:
                e = first_accepted(c, t0, old, api, client_id)
                return e is not None and any(a > e["mono_ns"] for a in list(acks))
            wait_for(lambda: done("EndTxn", "tx-failover", txn.acks), 120, "EndTxn on the new coordinator",
                     interval=0.2)
            wait_for(lambda: done("OffsetCommit", "group-failover", grp.acks), 120,
                     "OffsetCommit on the new coordinator", interval=0.2)
            et = first_accepted(c, t0, old, "EndTxn", "tx-failover")
            oc = first_accepted(c, t0, old, "OffsetCommit", "group-failover")
            txn_first = next(a for a in list(txn.acks) if a > et["mono_ns"])
            grp_first = next(a for a in list(grp.acks) if a > oc["mono_ns"])
            events = [e for e in read_run_events(c.run_dir) if e["mono_ns"] > t0]

            def at(type_: str, **match) -> float | None:
                e = next((e for e in events if e["type"] == type_ and all(e.get(k) == v for k, v in match.items())),
                         None)
                return ms(e["mono_ns"] - t0) if e else None
            requests = [(ms(e["mono_ns"] - t0), e["broker"], e["api"], e["error"], e.get("duration_ms"))
                        for e in events if e["type"] == "kafka_request" and e.get("client_id") == "tx-failover"
                        and e["mono_ns"] <= et["mono_ns"] and e["api"] != "Fetch"]
            out.append({"old": old, "new_txn": et["broker"], "new_group": oc["broker"], "txn_requests": requests,
                        "txn_ms": ms(txn_first - t0), "group_ms": ms(grp_first - t0),
                        "ratio": (txn_first - t0) / (grp_first - t0),
                        "detected_ms": at("broker_change"),
                        "txn_loaded_ms": at("txn_coordinator_loaded", partition=pt),
                        "group_loaded_ms": at("coordinator_loaded", partition=pg),
                        "txn_errors": [(ms(t - t0), n) for t, n in txn.errors if t0 < t <= txn_first][:10],
                        "group_errors": [(ms(t - t0), n) for t, n in grp.errors if t0 < t <= grp_first][:10]})
            c.wait_exit(old, timeout=30)
            c.start_broker(old)
            wait_isr(c, ("ft", TXN_TOPIC, OFFSETS_TOPIC))
            c.elect_preferred_leaders()
            wait_for(lambda: c.view().topics[TXN_TOPIC]["partitions"][pt]["leader"] == old
                     and c.view().topics[OFFSETS_TOPIC]["partitions"][pg]["leader"] == old, 60,
                     "the preferred leaders back")
    finally:
        stop.set()
        for loop in (txn, grp):
            loop.thread.join(70)
        if client == "java":
            txn.close()
            grp.close()
        else:
            grp.c.close()
        boot.flush(5)
    return out


# ---------------------------------------------------------------------- throughput

def idempotent(bs: str, topic: str, n: int) -> float:
    p = CProducer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5, "acks": "all"})
    t = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    left = p.flush(120)
    assert left == 0, f"{left} records not delivered"
    return n / (time.perf_counter() - t)


def transactional(bs: str, topic: str, n: int, per_txn: int, tid: str) -> float:
    p = CProducer({"bootstrap.servers": bs, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(60)
    t = time.perf_counter()
    for _ in range(n // per_txn):
        p.begin_transaction()
        for _ in range(per_txn):
            while True:
                try:
                    p.produce(topic, VALUE, partition=0)
                    break
                except BufferError:
                    p.poll(0.01)
            p.poll(0)
        p.commit_transaction(60)
    return (n // per_txn) * per_txn / (time.perf_counter() - t)


def parallel_transactional(bs: str, topic: str, n: int, per_txn: int, producers: int, round_: int) -> float:
    """``producers`` transactional producers (their own ids), n records in all, side by side: records/s."""
    rates: list[float] = []
    t = time.perf_counter()
    threads = [threading.Thread(target=lambda i=i: rates.append(
        transactional(bs, topic, n // producers, per_txn, f"tx-par-{round_}-{i}"))) for i in range(producers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return (n // producers // per_txn) * per_txn * producers / (time.perf_counter() - t)


def throughput(bs: str, c, n: int, rounds: int, per_txn: int = 100, parallel: int = 8) -> dict:
    create_topic(c.zk(), "p", 1, 3, {"min.insync.replicas": 2})
    wait_isr(c, ("p",))
    idem, txn, par = [], [], []
    for r in range(rounds):
        idem.append(idempotent(bs, "p", n))
        txn.append(transactional(bs, "p", n, per_txn, f"tx-throughput-{r}"))
        par.append(parallel_transactional(bs, "p", n, per_txn, parallel, r))
    i, t, pp = statistics.median(idem), statistics.median(txn), statistics.median(par)
    return {"records": n, "per_txn": per_txn, "idempotent_per_s": idem, "transactional_per_s": txn,
            "idempotent_median": i, "transactional_median": t, "ratio": t / i,
            "parallel": parallel, "parallel_per_s": par, "parallel_median": pp, "parallel_ratio": pp / i}


def reference_throughput(cfg, n: int, rounds: int, per_txn: int = 100) -> dict:
    """The idempotent/transactional pair of :func:`throughput` against Kafka 2.8.2 brokers with ``cfg``'s ids and
    settings (the same ZooKeeper, the reference's own chroot), in the same order."""
    from confluent_kafka.admin import AdminClient, NewTopic
    ref = ReferenceCluster(cfg, class_archive=False)   # as the distribution's script starts it (the figures')
    try:
        ref.up(timeout=180)
        bs = ref.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("p", 1, 3, config={"min.insync.replicas": "2"})])["p"].result(60)

        def whole() -> bool:
            t = admin.list_topics("p", timeout=10).topics.get("p")
            return t is not None and t.error is None and all(len(pm.isrs) == 3 and pm.leader >= 0
                                                             for pm in t.partitions.values())
        wait_for(whole, 60, "Kafka 2.8.2's p: its ISR whole")
        idem, txn = [], []
        for r in range(rounds):
            idem.append(idempotent(bs, "p", n))
            txn.append(transactional(bs, "p", n, per_txn, f"tx-throughput-{r}"))
    finally:
        ref.down()
    i, t = statistics.median(idem), statistics.median(txn)
    return {"records": n, "per_txn": per_txn, "idempotent_per_s": idem, "transactional_per_s": txn,
            "idempotent_median": i, "transactional_median": t, "ratio": t / i}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="SIGKILL failovers")
    ap.add_argument("--records", type=int, default=50_000, help="records per throughput round")
    ap.add_argument("--rounds", type=int, default=3, help="throughput rounds (idempotent, then transactional)")
    ap.add_argument("--clients", default="librdkafka,java", help="the failovers' clients: librdkafka, java")
    ap.add_argument("--reference", action="store_true",
                    help="the throughput pair against Kafka 2.8.2 too (the same rounds, the same client)")
    ap.add_argument("--quick", action="store_true", help="1 failover, 10,000 records, 1 round")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.runs, a.records, a.rounds = 1, 10_000, 1
    res: dict = {}
    with tempfile.TemporaryDirectory(prefix="kafkasim-bench-") as tmp, \
            EmbeddedZooKeeper(Path(tmp) / "zk", tick_ms=TICK_MS) as zk:
        c = make_cluster(zk, Path(tmp), partitions=PARTITIONS, controlled=False,
                         **{"transaction.state.log.num.partitions": PARTITIONS,
                            "group.initial.rebalance.delay.ms": 100, "group.min.session.timeout.ms": 1000})
        bs = ",".join(f"{h}:{p}" for h, p in (b.kafka_advertised for b in c.cfg.brokers))
        cc = ClusterClient([f"{b.host}:{b.port}" for b in c.cfg.brokers])
        try:
            res["throughput"] = throughput(bs, c, a.records, a.rounds)
            res["failover"] = {client: failovers(bs, c, a.runs, client) for client in a.clients.split(",")}
        finally:
            cc.close()
            c.down()
        if a.reference:
            res["reference_throughput"] = reference_throughput(c.cfg, a.records, a.rounds)
    if a.json:
        print(json.dumps(res, indent=2))
        return
    report(res)


def report(res: dict) -> None:
    t = res["throughput"]
    print(f"produce, 100-byte records, 1 partition, RF 3, min.insync.replicas 2, acks=all, {t['records']} records "
          f"a round:")
    print(f"  idempotent (linger.ms 5): {', '.join(f'{x:.0f}' for x in t['idempotent_per_s'])} records/s; "
          f"median {t['idempotent_median']:.0f}")
    print(f"  transactional, {t['per_txn']} records a transaction: "
          f"{', '.join(f'{x:.0f}' for x in t['transactional_per_s'])} records/s; median {t['transactional_median']:.0f}")
    print(f"  ratio {t['ratio']:.2f}x (goal >= 0.5x: {'met' if t['ratio'] >= 0.5 else 'MISSED'})")
    print(f"  besides: {t['parallel']} transactional producers side by side (their own ids, the same partition): "
          f"{', '.join(f'{x:.0f}' for x in t['parallel_per_s'])} records/s in all; median {t['parallel_median']:.0f}, "
          f"{t['parallel_ratio']:.2f}x the idempotent producer")
    k = res.get("reference_throughput")
    if k is not None:
        print(f"  Kafka 2.8.2 in the same run (the same settings, client and rounds): idempotent "
              f"{', '.join(f'{x:.0f}' for x in k['idempotent_per_s'])} records/s, median {k['idempotent_median']:.0f}; "
              f"transactional {', '.join(f'{x:.0f}' for x in k['transactional_per_s'])}, median "
              f"{k['transactional_median']:.0f}; ratio {k['ratio']:.2f}x; kafkasim's transactional produce "
              f"{t['transactional_median'] / k['transactional_median']:.2f}x Kafka's, its idempotent "
              f"{t['idempotent_median'] / k['idempotent_median']:.2f}x")
    for client, runs in res["failover"].items():
        print(f"SIGKILL of the broker coordinating both a transactional id and a group, {client} ({len(runs)} runs):")
        for r in runs:
            print(f"  broker {r['old']} -> {r['new_txn']} (txn), {r['new_group']} (group): first EndTxn "
                  f"{r['txn_ms']:.1f} ms, first OffsetCommit {r['group_ms']:.1f} ms ({r['ratio']:.2f}x); detected "
                  f"{r['detected_ms']} ms, loaded: txn {r['txn_loaded_ms']} ms, group {r['group_loaded_ms']} ms")
            print(f"    transactional client's errors until then (ms, error): {r['txn_errors']}")
            reqs = r["txn_requests"]
            finds = sum(1 for q in reqs if q[2] == "FindCoordinator")
            print(f"    its requests until then but Fetch: {len(reqs)}, {finds} of them FindCoordinator; the last 8 "
                  f"(ms, broker, api, error, duration ms): {reqs[-8:]}")
            print(f"    group member's failed commits until then (ms, error): {r['group_errors']}")
        tx = statistics.median(r["txn_ms"] for r in runs)
        gr = statistics.median(r["group_ms"] for r in runs)
        tl = statistics.median(r["txn_loaded_ms"] for r in runs if r["txn_loaded_ms"] is not None)
        gl = statistics.median(r["group_loaded_ms"] for r in runs if r["group_loaded_ms"] is not None)
        print(f"  median: first EndTxn {tx:.1f} ms, first OffsetCommit {gr:.1f} ms, ratio {tx / gr:.2f}x "
              f"(goal <= 1.2x: {'met' if tx / gr <= 1.2 else 'MISSED'}); coordinators loaded: txn {tl:.1f} ms, "
              f"group {gl:.1f} ms ({tl / gl:.2f}x)")


if __name__ == "__main__":
    main()
