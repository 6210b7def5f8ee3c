"""node/server/servicer.py's controller requests against the core fed directly: the broker's shell decodes each
partition state once and answers from errors encoded once (node/net/wire.py), and skips the UpdateMetadata states
it applied already; none of it may change an answer, an event or the state.  Random request sequences (new,
unchanged, older and foreign states; stale headers; deletions; the same UpdateMetadata again) go both to a
BrokerServicer (no replicas) and to a plain BrokerState given every partition of every request."""
from __future__ import annotations

import json
import random

import pytest

from kafkacommon import errors
from node.events import EventLog
from node.net import wire
from node.server.servicer import BrokerServicer
from proto import kafkasim_pb2 as pb
from replication.broker_state import LEADER_DURING_DELETE, BrokerState, Header

ME = 1
TPS = [(t, p) for t in ("t", "u" * 130) for p in range(6)]


def _state(rng: random.Random, tp, known: dict, controller_epoch: int) -> pb.PartitionState:
    cur = known.get(tp)
    roll = rng.random()
    if cur is not None and roll < 0.45:
        return cur      # unchanged: sent again as it was
    replicas = rng.sample([1, 2, 3, 4], 3) if rng.random() < 0.8 else [2, 3, 4]
    leader_epoch = (cur.leader_epoch if cur is not None else 0) + rng.choice([-1, 0, 1, 1, 2])
    leader = rng.choice(replicas + [-1]) if roll < 0.95 else LEADER_DURING_DELETE
    s = pb.PartitionState(topic=tp[0], partition=tp[1], controller_epoch=controller_epoch, leader=leader,
                          leader_epoch=leader_epoch, isr=rng.sample(replicas, rng.randint(1, 3)),
                          zk_version=rng.randint(0, 300), replicas=replicas, is_new=rng.random() < 0.1)
    known[tp] = s
    return s


def _plain(path) -> list[dict]:
    out = []
    for line in open(path):
        e = json.loads(line)
        for k in ("ts_ms", "mono_ns", "waited_ms", "duration_ms"):
            e.pop(k, None)
        out.append(e)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_servicer_answers_and_applies_as_the_core_does(tmp_path, seed):
    rng = random.Random(seed)
    state = BrokerState(ME)
    state.broker_epoch = 5
    events = EventLog(tmp_path / "events.jsonl", ME)
    servicer = BrokerServicer(state, events, controller=None)
    ref = BrokerState(ME)
    ref.broker_epoch = 5
    ref_events = []
    known: dict = {}
    epoch, last_um = 1, None
    for step in range(250):
        if rng.random() < 0.1:
            epoch += 1
        header = pb.ControllerHeader(controller_id=rng.randint(1, 4), broker_epoch=rng.choice([5, 5, 5, -1, 4]),
                                     controller_epoch=epoch - (rng.random() < 0.05))
        h = Header(header.controller_id, header.controller_epoch, header.broker_epoch)
        kind = rng.choice(["LeaderAndIsr", "UpdateMetadata", "UpdateMetadata", "StopReplica"])
        tps = rng.sample(TPS, rng.randint(0, len(TPS)))
        if kind == "LeaderAndIsr":
            request = pb.LeaderAndIsrRequest(header=header, partitions=[_state(rng, tp, known, epoch) for tp in tps])
            request = pb.LeaderAndIsrRequest.FromString(request.SerializeToString())
            got = servicer.LeaderAndIsr(request, None)
            out = ref.leader_and_isr(h, wire.partitions_from_pb(request.partitions))
            ref_events.extend(out.events)
            if out.error == errors.NONE:
                ref_events.append(("leader_and_isr_applied", None))
        elif kind == "UpdateMetadata":
            if last_um is not None and rng.random() < 0.3:
                request = pb.UpdateMetadataRequest.FromString(last_um)   # the same again
                request.header.CopyFrom(header)
            else:
                request = pb.UpdateMetadataRequest(header=header, partitions=[
                    _state(rng, tp, known, epoch) for tp in tps], live_brokers=[
                    pb.BrokerEndpoint(id=b, host="127.0.0.1", port=9000 + b, broker_epoch=5)
                    for b in rng.sample([1, 2, 3, 4], rng.randint(1, 4))])
                request = pb.UpdateMetadataRequest.FromString(request.SerializeToString())
            last_um = request.SerializeToString()
            got = servicer.UpdateMetadata(request, None)
            out = ref.update_metadata(h, wire.partitions_from_pb(request.partitions),
                                      [(b.id, b.host, b.port, b.broker_epoch) for b in request.live_brokers])
            ref_events.extend(out.events)
        else:
            request = pb.StopReplicaRequest(header=header, delete_partitions=rng.random() < 0.5,
                                            leader_epoch=rng.choice([-1, -2, 0, 1, 2, 3]),
                                            partitions=[pb.TopicPartition(topic=t, partition=p) for t, p in tps])
            got = servicer.StopReplica(request, None)
            out = ref.stop_replica(h, [(t, p) for t, p in tps], request.leader_epoch, request.delete_partitions)
            ref_events.extend(out.events)
        want = type(got)(error_code=out.error)
        if kind != "UpdateMetadata":
            want.partition_errors.extend(pb.PartitionError(topic=t, partition=p, error_code=c)
                                         for (t, p), c in sorted(out.partition_errors.items()) if c != errors.NONE)
        assert got == want, (step, kind)
        assert got.SerializeToString() == want.SerializeToString()
        assert (state.partitions, state.metadata, state.controller_view, state.topic_partitions, state.live_brokers,
                state.controller_epoch, state.controller_id) == \
               (ref.partitions, ref.metadata, ref.controller_view, ref.topic_partitions, ref.live_brokers,
                ref.controller_epoch, ref.controller_id), (step, kind)
    events.close()
    logged = _plain(tmp_path / "events.jsonl")
    assert [e["type"] for e in logged] == [name for name, _ in ref_events]
    for e, (name, fields) in zip(logged, ref_events):
        if fields is not None:
            assert e == json.loads(json.dumps({"broker": ME, "type": name, **fields})), e
