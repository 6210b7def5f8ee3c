"""The broker's side of the controller's requests at 10,000-partition sizes, in one process: the CPU of each
LeaderAndIsr, UpdateMetadata and StopReplica as the broker's gRPC service (node/server/servicer.py) takes it,
from the request's bytes to the answer's (issue 49: the controller's SIGTERM at 10,000 partitions is bound by
the five brokers' CPU).

    PYTHONPATH=$PWD python3 bench/broker_requests.py [--reps 12] [--hosted 2000] [--profile SCENARIO]

Broker 1 of 5 with a topic of 10,000 partitions and the 50 of ``__consumer_offsets`` (replication factor 3:
6,030 replicas here), without replicas (no logs): a LeaderAndIsr of 2,000 shrunk ISRs (leader epochs up), an
UpdateMetadata of every partition with 2,000 changed, a new controller's LeaderAndIsr of every replica here
(unchanged: each STALE_CONTROLLER_EPOCH), the UpdateMetadata of every partition after it (unchanged), the same
UpdateMetadata again, a StopReplica of 2,000.  Then, with a ReplicaManager whose logs are on /dev/shm,
``--hosted`` replicas: every ISR shrunk, every leadership moved, and the same request again.  Each figure is the
median of ``--reps`` (CPU: the thread's without replicas, the process's with them).  Run it from each tree
(PYTHONPATH), alternating: the answers' and event lines' digests must be the same for every tree.
``--profile`` prints cProfile's top entries for one scenario (the calling thread only).
"""
from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import os
import pstats
import shutil
import statistics
import tempfile
import time

from node.events import EventLog
from node.server.servicer import BrokerServicer
from proto import kafkasim_pb2 as pb
from replication.broker_state import BrokerState

BROKERS = [1, 2, 3, 4, 5]
NPART = 10050
ME = 1


def replicas_of(p: int) -> list[int]:
    return [BROKERS[(p % 5 + i) % 5] for i in range(3)]


def tpof(p: int) -> tuple[str, int]:
    return ("scale", p) if p < 10000 else ("__consumer_offsets", p - 10000)


def state(p: int, le: int, isr=None, cepoch: int = 1, leader=None) -> pb.PartitionState:
    reps = replicas_of(p)
    return pb.PartitionState(topic=tpof(p)[0], partition=tpof(p)[1], controller_epoch=cepoch,
                             leader=reps[0] if leader is None else leader, leader_epoch=le, isr=isr or reps,
                             zk_version=le, replicas=reps)


def from_info(i, **kw) -> pb.PartitionState:
    d = dict(topic=i.topic, partition=i.partition, controller_epoch=i.controller_epoch, leader=i.leader,
             leader_epoch=i.leader_epoch, isr=list(i.isr), zk_version=i.zk_version, replicas=list(i.replicas))
    d.update(kw)
    return pb.PartitionState(**d)


def header(cepoch: int) -> pb.ControllerHeader:
    return pb.ControllerHeader(controller_id=2, controller_epoch=cepoch, broker_epoch=5)


def lai(parts, cepoch: int) -> bytes:
    return pb.LeaderAndIsrRequest(header=header(cepoch), partitions=parts).SerializeToString()


def um(parts, cepoch: int) -> bytes:
    return pb.UpdateMetadataRequest(header=header(cepoch), partitions=parts, live_brokers=[
        pb.BrokerEndpoint(id=b, host="127.0.0.1", port=9000 + b, broker_epoch=5) for b in BROKERS]).SerializeToString()


class Runner:
    def __init__(self, servicer: BrokerServicer, clock, profile: str | None):
        self.sv, self.clock, self.profile = servicer, clock, profile
        self.digest = hashlib.sha256()
        self.results: dict[str, list[float]] = {}
        self.prof = cProfile.Profile() if profile else None

    def call(self, kind: str, data: bytes, name: str | None = None) -> None:
        on = self.prof is not None and name == self.profile
        c0 = self.clock()
        if on:
            self.prof.enable()
        request = getattr(pb, kind + "Request").FromString(data)
        answer = getattr(self.sv, kind)(request, None).SerializeToString()
        if on:
            self.prof.disable()
        if name:
            self.results.setdefault(name, []).append((self.clock() - c0) * 1e3)
        self.digest.update(answer)


def without_replicas(reps: int, profile: str | None, tmp: str) -> Runner:
    st = BrokerState(ME)
    st.broker_epoch = 5
    sv = BrokerServicer(st, EventLog(os.path.join(tmp, "events.jsonl"), ME), controller=None)
    r = Runner(sv, time.thread_time, profile)
    mine = [p for p in range(NPART) if ME in replicas_of(p)]
    r.call("LeaderAndIsr", lai([state(p, 1) for p in mine], 1))
    r.call("UpdateMetadata", um([state(p, 1) for p in range(NPART)], 1))
    epoch = 1
    for i in range(reps):
        epoch += 1
        r.call("LeaderAndIsr", lai([state(p, st.partitions[tpof(p)].leader_epoch + 1, cepoch=epoch,
                                          isr=replicas_of(p)[:2] if i % 2 == 0 else None) for p in mine[:2000]], epoch),
               "LeaderAndIsr, 2,000 ISRs shrunk")
        r.call("UpdateMetadata", um([from_info(st.metadata[tpof(p)], **(
            {"leader_epoch": st.metadata[tpof(p)].leader_epoch + 1, "controller_epoch": epoch}
            if 5000 <= p < 7000 else {})) for p in range(NPART)], epoch), "UpdateMetadata, 2,000 of 10,050 changed")
        epoch += 1
        r.call("LeaderAndIsr", lai([from_info(st.partitions[tpof(p)]) for p in mine], epoch),
               f"LeaderAndIsr, {len(mine):,} unchanged")
        epoch += 1
        again = um([from_info(st.metadata[tpof(p)]) for p in range(NPART)], epoch)
        r.call("UpdateMetadata", again, "UpdateMetadata, 10,050 unchanged")
        r.call("UpdateMetadata", again, "UpdateMetadata, the same again")
        r.call("StopReplica", pb.StopReplicaRequest(
            header=header(epoch), delete_partitions=False, leader_epoch=-1,
            partitions=[pb.TopicPartition(topic="scale", partition=p) for p in mine[2000:4000]]).SerializeToString(),
            "StopReplica, 2,000")
        r.call("LeaderAndIsr", lai([state(p, 50 + i, cepoch=epoch) for p in mine[2000:4000]], epoch))  # back
    sv.events.close()
    return r


def with_replicas(reps: int, hosted: int, profile: str | None, tmp: str) -> Runner:
    from node.replicas.replica_manager import ReplicaManager
    from replication.partition_types import ReplicaSettings
    events = EventLog(os.path.join(tmp, "replicas.jsonl"), ME)
    rm = ReplicaManager(ME, os.path.join(tmp, "logs"), ReplicaSettings(), events, broker_epoch=lambda: 5,
                        endpoint_of=lambda b: None, controller_endpoint=lambda: None, fetch_wait_ms=100,
                        segment_bytes=1 << 20, checkpoint_interval_ms=600_000)
    st = BrokerState(ME)
    st.broker_epoch = 5
    r = Runner(BrokerServicer(st, events, controller=None, replicas=rm), time.process_time, profile)
    parts = [p for p in range(NPART) if ME in replicas_of(p)][:hosted]
    le = dict.fromkeys(parts, 1)
    epoch = 1
    r.call("LeaderAndIsr", lai([state(p, 1) for p in parts], epoch))
    try:
        for _ in range(reps):
            epoch += 1
            for p in parts:
                le[p] += 1
            r.call("LeaderAndIsr", lai([state(p, le[p], cepoch=epoch, isr=[x for x in replicas_of(p) if x != 4] or None)
                                        for p in parts], epoch), f"replicas: LeaderAndIsr, {hosted:,} ISRs shrunk")
            for p in parts:
                le[p] += 1
            moved = [state(p, le[p], cepoch=epoch, leader=replicas_of(p)[1] if replicas_of(p)[0] == ME else ME)
                     for p in parts]
            r.call("LeaderAndIsr", lai(moved, epoch), f"replicas: LeaderAndIsr, {hosted:,} leaderships moved")
            epoch += 1
            r.call("LeaderAndIsr", lai(moved, epoch), f"replicas: LeaderAndIsr, {hosted:,} unchanged")
    finally:
        rm.close()
    events.close()
    return r


def lines_digest(path: str) -> str:
    h = hashlib.sha256()
    for line in open(path):
        e = json.loads(line)
        for k in ("ts_ms", "mono_ns", "waited_ms", "duration_ms"):
            e.pop(k, None)
        h.update(json.dumps(e, sort_keys=True).encode())
    return h.hexdigest()[:12]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--hosted", type=int, default=2000, help="replicas with logs (0: none)")
    ap.add_argument("--profile", help="a scenario's name, as printed: its cProfile top entries")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="broker-requests-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        runs = [without_replicas(a.reps, a.profile, tmp)]
        if a.hosted:
            runs.append(with_replicas(max(2, a.reps // 2), a.hosted, a.profile, tmp))
        print(f"tree {os.path.dirname(os.path.dirname(os.path.abspath(pb.__file__)))}; 1-minute load "
              f"{open('/proc/loadavg').read().split()[0]}; answers {runs[0].digest.hexdigest()[:12]}, event lines "
              f"{lines_digest(os.path.join(tmp, 'events.jsonl'))}")
        for r in runs:
            for name, ms in r.results.items():
                print(f"  {name:48s} CPU median {statistics.median(ms):7.1f} ms  (min {min(ms):6.1f}, {len(ms)} runs)")
            if r.prof is not None and r.prof.getstats():
                pstats.Stats(r.prof).sort_stats("tottime").print_stats(15)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
