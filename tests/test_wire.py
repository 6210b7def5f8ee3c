"""The controller's requests, encoded from their commands (node/net/wire.py's command_body and header_bytes,
node/net/channel.py's SharedBuild): each parses as the message command_to_pb builds."""
from __future__ import annotations

import pytest

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


# ------------------------------------------------------------------ the broker's side: requests split, states decoded
# once, answers encoded once (node/net/wire.py's split_request, without_header, StateDecoder, ErrorAnswers)

def _requests():
    header = pb.ControllerHeader(controller_id=1, controller_epoch=4, broker_epoch=9)
    for cmd in (LeaderAndIsrCmd(VIEWS, BROKERS), UpdateMetadataCmd(VIEWS, BROKERS), UpdateMetadataCmd((), BROKERS),
                LeaderAndIsrCmd(VIEWS[:1], ())):
        yield wire.command_to_pb(cmd, header)
        yield wire.command_to_pb(cmd, None)
    # a header of its defaults is encoded empty; fields in any order (the header last) and unknown ones
    yield pb.LeaderAndIsrRequest(header=pb.ControllerHeader(), partitions=[wire.partition_to_pb(VIEWS[3])])
    r = pb.UpdateMetadataRequest(partitions=[wire.partition_to_pb(v) for v in VIEWS])
    late = pb.UpdateMetadataRequest(header=pb.ControllerHeader(controller_id=300, controller_epoch=2 ** 31 - 1,
                                                               broker_epoch=-1))
    unknown = b"\xf8\x07\x05" + b"\x82\x08\x02ab" + b"\x8d\x08" + b"\x01\x02\x03\x04" + b"\x89\x08" + bytes(8)
    yield pb.UpdateMetadataRequest.FromString(r.SerializeToString() + unknown + late.SerializeToString())


def _headless(request):
    body = type(request)()
    body.CopyFrom(request)
    body.ClearField("header")
    return body


def test_a_request_splits_into_its_partitions_and_the_rest():
    for request in _requests():
        data = request.SerializeToString()
        elements, rest = wire.split_request(data)
        assert [pb.PartitionState.FromString(e) for e in elements] == list(request.partitions)
        assert type(request).FromString(rest) == _headless(request)
        assert wire.without_header(request) == rest
        assert wire.split_request(rest)[0] == elements
    # cut short (in an element, in a length, in a key or a length of more than one byte); a group (wire type 3)
    for bad in (b"\x12\x05ab", b"\x12", b"\x80", b"\x12\x80", b"\x0b"):
        with pytest.raises(ValueError):
            wire.split_request(bad)


def test_states_are_decoded_once_each_as_a_fresh_decode_gives_them():
    decoder = wire.StateDecoder(size=4)
    request = wire.command_to_pb(LeaderAndIsrCmd(VIEWS, BROKERS), None)
    want = wire.partitions_from_pb(request.partitions)
    first, elements, rest = decoder.request(request)
    assert first == want and rest == wire.without_header(request)
    again = decoder.decode(elements)
    assert again == want and all(a is b for a, b in zip(first, again))
    # past its size the memo starts afresh, keeping the last generation: the values stay the same
    for v in VIEWS:
        other = wire.partition_to_pb(PartitionView(v.topic, v.partition, v.state, v.zk_version + 1, v.replicas))
        decoder.decode([other.SerializeToString()])
    assert decoder.decode(elements) == want
    assert decoder.decode(elements + elements[:2]) == want + want[:2]


@pytest.mark.parametrize("error", [0, 11, -1])
def test_an_answers_errors_encode_as_the_messages_they_stand_for(error):
    answers = wire.ErrorAnswers(size=3)
    codes = {("t", 2): 0, ("u", 0): 11, ("t", 1): 3, ("t" * 150, 2 ** 31 - 1): 56, ("t", 0): -1, ("a", 7): 0}
    for _ in range(3):
        for kind in (pb.LeaderAndIsrResponse, pb.StopReplicaResponse):
            want = kind(error_code=error, partition_errors=[
                pb.PartitionError(topic=t, partition=p, error_code=c) for (t, p), c in sorted(codes.items()) if c])
            got = kind.FromString(answers.encode(error, codes, 0))
            assert got == want
            assert got.SerializeToString() == want.SerializeToString()
        codes[("t", 2)] = 74
    assert kind.FromString(answers.encode(error, {}, 0)) == kind(error_code=error)
