"""The controller's requests, encoded from their commands (node/net/wire.py's command_body and header_bytes,
node/net/channel.py's SharedBuild): each parses as the message command_to_pb builds."""
from __future__ import annotations

from controller.plan import LeaderAndIsrCmd, PartitionView, StopReplicaCmd, UpdateMetadataCmd
from kafkacommon.metadata import BrokerRegistration, LeaderAndIsr
from node.net import wire
from node.net.channel import SharedBuild
from proto import kafkasim_pb2 as pb

BROKERS = (BrokerRegistration(1, "127.0.0.1", 9001, 0, epoch=7), BrokerRegistration(2, "127.0.0.1", 9002, 0, epoch=9))
# a long ISR list and a long topic name: lengths over 127 bytes need a two-byte length
VIEWS = tuple(PartitionView("t" * (150 if p == 3 else 1), p, LeaderAndIsr(1 + p % 2, p, tuple(range(1, 2 + p)), 3),
                            p * 1000, (1, 2), is_new=p == 2) for p in range(5))


def _parsed(cmd, header, data: bytes):
    return type(wire.command_to_pb(cmd, header)).FromString(data)


def test_each_command_parses_as_its_message():
    header = pb.ControllerHeader(controller_id=1, controller_epoch=4, broker_epoch=9)
    for cmd in (LeaderAndIsrCmd(VIEWS, BROKERS), UpdateMetadataCmd(VIEWS, BROKERS), UpdateMetadataCmd((), BROKERS),
                LeaderAndIsrCmd(VIEWS[:1], ()), StopReplicaCmd((("t", 1), ("u", 2)), delete=True)):
        want = wire.command_to_pb(cmd, header)
        for cache in (None, {}):
            got = _parsed(cmd, header, wire.header_bytes(cmd, header) + wire.command_body(cmd, cache))
            assert got == want, cmd


def test_shared_build_gives_each_broker_its_header_and_keeps_the_states():
    states: dict = {}
    shared = SharedBuild(states)
    cmd = UpdateMetadataCmd(VIEWS, BROKERS)
    for b in BROKERS:
        header = pb.ControllerHeader(controller_id=1, controller_epoch=4, broker_epoch=b.epoch)
        got = _parsed(cmd, header, shared.build(cmd, header))
        assert got == wire.command_to_pb(cmd, header)
        assert got.header.broker_epoch == b.epoch
    assert set(states) == set(VIEWS)
    # a later send of the same states reuses them
    again = LeaderAndIsrCmd(VIEWS[1:], BROKERS[:1])
    header = pb.ControllerHeader(controller_id=1, controller_epoch=5, broker_epoch=7)
    assert _parsed(again, header, SharedBuild(states).build(again, header)) == wire.command_to_pb(again, header)
