"""A new controller decides from its metadata cache; stale entries must never win.

The test moves a partition's state in ZooKeeper behind the brokers' backs (as
if an UpdateMetadata had been lost), so every broker's cache holds an old
zkVersion for it, then stops the controller.
"""
from __future__ import annotations

import signal

import grpc
import pytest

from kafkacommon.metadata import LeaderAndIsr
from helpers import events, offsets_partitions
from util.waiting import wait_for
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg
from zk import codecs, paths

TOPIC = "__consumer_offsets"


def _cached_partitions(cluster, broker: int) -> int:
    spec = cluster.cfg.broker(broker)
    with grpc.insecure_channel(f"{spec.host}:{spec.port}") as ch:
        return len(pbg.BrokerStub(ch).DescribeBroker(pb.DescribeBrokerRequest(), timeout=5).partitions)


def _rogue_write(cluster, partition: int, leader: int | None = None) -> int:
    """Rewrite a partition's state directly (optionally with a new leader); return its new zkVersion."""
    zk = cluster.zk()
    path = paths.partition_state(TOPIC, partition)
    data, stat = zk.get(path)
    state = codecs.decode_partition_state(path, data)
    if leader is not None:
        state = LeaderAndIsr(leader, state.leader_epoch + 1, state.isr, state.controller_epoch)
    return zk.kz.set(path, codecs.encode_partition_state(state), stat.version).version


@pytest.mark.parametrize("stale_written", [True, False], ids=["stale-and-rewritten", "stale-not-rewritten"])
def test_stale_cache_entries_are_caught(make_cluster, stale_written):
    # without controlled shutdown: the old controller must leave the work to the new one
    cluster = make_cluster(4, **{"controlled.shutdown.enable": False})
    before = cluster.view()
    ctl = before.controller_id
    wait_for(lambda: events(cluster, broker=ctl, type_="controller_failover_done"), 10, "the first failover")
    # every broker's metadata cache covers every partition (UpdateMetadata delivered) before we begin
    for b in before.brokers:
        wait_for(lambda b=b: _cached_partitions(cluster, b) == 50, 10, f"broker {b}'s metadata cache")
    parts = offsets_partitions(before)
    # stale, and not rewritten by the next controller: a partition the dead broker does not replicate,
    # made leaderless behind the controller's back (the verification read must elect a leader)
    quiet = next(p for p, s in parts.items() if ctl not in s["replicas"])
    _rogue_write(cluster, quiet, leader=-1)
    if stale_written:
        # stale, and rewritten: a partition that loses the dead broker from its ISR
        loud = next(p for p, s in parts.items() if ctl in s["replicas"] and s["leader"] != ctl)
        loud_version = _rogue_write(cluster, loud)
    cluster.signal_broker(ctl, signal.SIGTERM)

    def settled():
        v = cluster.view()
        if v.controller_id in (None, ctl):
            return None
        ps = offsets_partitions(v)
        return v if all(s["leader"] >= 0 and ctl not in s["isr"] for s in ps.values()) else None

    after = wait_for(settled, 10.0, "every partition led again, without the old controller")
    new = after.controller_id
    done = wait_for(lambda: events(cluster, broker=new, type_="controller_failover_done",
                                   epoch=after.controller_epoch), 5, "the new controller's failover")
    assert done[0]["states_from_cache"] is True
    assert offsets_partitions(after)[quiet]["leader"] in parts[quiet]["replicas"]
    if stale_written:
        assert events(cluster, broker=new, type_="zk_write_conflict"), "the stale zkVersion must be refused"
        assert offsets_partitions(after)[loud]["zk_version"] > loud_version
    else:
        verified = wait_for(lambda: events(cluster, broker=new, type_="controller_cache_verified"),
                            5, "the verification read")
        assert verified[0]["stale"] >= 1
        assert events(cluster, broker=new, type_="zk_write_conflict") == []
