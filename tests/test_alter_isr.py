"""AlterIsr over gRPC to the real controller, the test playing a partition's leader."""
from __future__ import annotations

import signal

import grpc

from helpers import offsets_partitions
from kafkacommon import errors
from util.waiting import wait_for
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg

TOPIC = "__consumer_offsets"


def alter(cluster, target: int, broker: int, epoch: int, partition: int, leader_epoch: int, isr, version: int):
    spec = cluster.cfg.broker(target)
    with grpc.insecure_channel(f"{spec.host}:{spec.port}") as ch:
        return pbg.BrokerStub(ch).AlterIsr(pb.AlterIsrRequest(broker_id=broker, broker_epoch=epoch, partitions=[
            pb.AlterIsrPartition(topic=TOPIC, partition=partition, leader_epoch=leader_epoch, new_isr=list(isr),
                                 current_isr_version=version)]), timeout=10)


def test_a_leader_shrinks_and_expands_an_isr_through_the_controller(make_cluster):
    # Long sessions: the follower is paused through the test (see below) and must stay registered.
    cluster = make_cluster(3, zookeeper__session__timeout__ms=30000)
    view = cluster.view()
    ctl = view.controller_id
    p, s = next((p, s) for p, s in offsets_partitions(view).items() if s["leader"] != ctl)
    leader, follower = s["leader"], next(b for b in s["isr"] if b not in (s["leader"], ctl))
    epoch = view.brokers[leader]["epoch"]
    shrunk = [b for b in s["isr"] if b != follower]
    # The real leader re-expands the ISR by itself on the follower's next fetch once it learns of a
    # shrink the follower did not earn (Kafka's behaviour), racing the test's own AlterIsr calls:
    # the follower is paused so that it does not fetch.
    cluster.signal_broker(follower, signal.SIGSTOP)
    try:
        _shrink_and_expand(cluster, ctl, leader, epoch, p, s, shrunk)
    finally:
        cluster.signal_broker(follower, signal.SIGCONT)


def _shrink_and_expand(cluster, ctl: int, leader: int, epoch: int, p: int, s: dict, shrunk: list[int]) -> None:

    r = alter(cluster, ctl, leader, epoch, p, s["leader_epoch"], shrunk, s["zk_version"])
    assert r.error_code == errors.NONE
    [res] = r.partitions
    assert (res.error_code, list(res.isr), res.leader_epoch, res.current_isr_version) == (
        errors.NONE, shrunk, s["leader_epoch"], s["zk_version"] + 1)
    after = offsets_partitions(cluster.view())[p]
    assert (after["isr"], after["leader_epoch"], after["zk_version"]) == (shrunk, s["leader_epoch"], s["zk_version"] + 1)

    # the old version is refused now, and nothing changes
    r = alter(cluster, ctl, leader, epoch, p, s["leader_epoch"], s["isr"], s["zk_version"])
    assert r.partitions[0].error_code == errors.INVALID_UPDATE_VERSION
    # a stale broker epoch and an older leader epoch are fenced
    assert alter(cluster, ctl, leader, epoch - 1, p, s["leader_epoch"], s["isr"],
                 s["zk_version"] + 1).error_code == errors.STALE_BROKER_EPOCH
    if s["leader_epoch"] > 0:
        assert alter(cluster, ctl, leader, epoch, p, s["leader_epoch"] - 1, s["isr"],
                     s["zk_version"] + 1).partitions[0].error_code == errors.FENCED_LEADER_EPOCH
    # a broker that is not the controller says so
    other = leader  # not the controller, and not paused
    assert alter(cluster, other, leader, epoch, p, s["leader_epoch"], s["isr"],
                 s["zk_version"] + 1).error_code == errors.NOT_CONTROLLER

    # expand back to the full ISR with the current version
    r = alter(cluster, ctl, leader, epoch, p, s["leader_epoch"], s["isr"], s["zk_version"] + 1)
    assert r.partitions[0].error_code == errors.NONE
    final = wait_for(lambda: (v := offsets_partitions(cluster.view())[p]) and v["isr"] == s["isr"] and v,
                     5, "the expanded ISR in ZooKeeper")
    assert final["zk_version"] == s["zk_version"] + 2 and final["leader_epoch"] == s["leader_epoch"]
