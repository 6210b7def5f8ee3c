"""The Kafka listener's framing, dispatch and batch checks, in process (fast).

Requests are built with kafka-python's client-side classes (the listener decodes with the same
generated codecs); malformed frames come from hypothesis.  The TCP tests run a real listener on
loopback with the real handlers over a stand-in broker (no cluster: that is test_kafka_clients.py).
"""
from __future__ import annotations

import asyncio
import socket
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace as dataclass_replace
from types import SimpleNamespace

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from coordinator import messages as m
from listener.app import make_dispatcher
from listener.context import ListenerContext
from listener.protocol import REQUESTS, RESPONSES, SUPPORTED, BadRequest, api_name, parse_request
from listener.records import (CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE, UNSUPPORTED_COMPRESSION_TYPE,
                              BatchRejected, check_client_batch)
from listener.limits import Limits
from transactions.messages import AddPartitionsToTxnResponse, InitProducerIdResponse, TxnErrorResponse
from zk.producer_ids import ProducerIds
from listener.server import Connection, KafkaListener
from node.replicas.hosted import ConsumerRead
from replication.broker_state import PartitionInfo
from node.storage import PartitionLog
from kafkacommon.record_batch import crc32c
from proto import kafkasim_pb2 as pb


class FakeReplicas:
    """The replica manager's listener entry points over an in-memory list of appended batches."""

    def __init__(self) -> None:
        self.appended: list[bytes] = []

    def append_batch(self, tp, batch, count, max_ts, acks, timeout_ms, on_done, producer=None, transactional=False):
        base = sum(int.from_bytes(b[57:61], "big") for b in self.appended)
        self.appended.append(batch)
        return 0, base, base + count - 1, False, -1   # error, base, last, pending, log_append_time

    def topic_setting(self, tp, key, default):
        return default

    def log_start_offset(self, tp):
        return 0

    def describe_log_dirs(self, partitions=None):
        return [("/d", 0, [])]


def make_ctx() -> ListenerContext:
    state = SimpleNamespace(live_brokers={1: ("127.0.0.1", 1, 1)}, controller_id=1, topic_partitions={"t": 1},
                            metadata={("t", 0): PartitionInfo("t", 0, 1, 4, (1,), (1,), 0, 1)})
    from node.config import default_config
    from node.dynamic_config import DynamicBrokerConfig
    return ListenerContext(1, state, FakeReplicas(), groups=None, txns=None, producer_ids=lambda: 0, zk=None,
                           endpoint_of=lambda b: ("127.0.0.1", 9092) if b == 1 else None, rack_of=lambda b: None,
                           cluster_id="test-cluster", pool=ThreadPoolExecutor(4), auto_create_topics=False,
                           broker_config=DynamicBrokerConfig(default_config(), 1))


EVENTS: list[tuple[str, dict]] = []
DISPATCH = make_dispatcher(make_ctx(), lambda type_, **f: EVENTS.append((type_, f)))
CONN = Connection(("127.0.0.1", 1))


def frame(msg, correlation_id: int = 1, client_id: str = "test") -> bytes:
    msg.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(msg.encode(header=True))


def handle(data: bytes) -> bytes | None:
    return asyncio.run(DISPATCH.handle(data, CONN))


def batch(n: int = 3, codec: int = 0, headers=()) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=1000 + i, key=b"k%d" % i, value=b"v%d" % i, headers=list(headers))
    return bytes(b.build())


def reseal(data: bytearray) -> bytes:
    struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
    return bytes(data)


# ---------------------------------------------------------------- versions and dispatch

@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions_lists_exactly_the_supported_ranges(version: int) -> None:
    out = handle(frame(ApiVersionsRequest(version=version, client_software_name="t", client_software_version="1")))
    r = ApiVersionsResponse.decode(out, version=version, header=True, framed=True)
    assert r.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in r.api_keys} == SUPPORTED
    if version >= 3:   # Kafka 2.8.2 (conformance ApiVersions.v3.advertised): no finalized features, epoch 0
        assert r.finalized_features_epoch == 0 and list(r.finalized_features) == []


def test_api_versions_above_the_maximum_answers_error_35_in_a_v0_body() -> None:
    out = handle(frame(ApiVersionsRequest(version=4, client_software_name="t", client_software_version="1"), 9))
    (size, corr) = struct.unpack_from(">ii", out)
    assert size == len(out) - 4 and corr == 9   # response header v0: no tagged fields
    r = ApiVersionsResponse.decode(out[8:], version=0)
    assert r.error_code == 35
    # Kafka 2.8.2 (conformance ApiVersions.v4.unsupported_version): only ApiVersions' own range
    assert {k.api_key: (k.min_version, k.max_version) for k in r.api_keys} == {18: SUPPORTED[18]}


def test_metadata_v0_and_v11() -> None:
    for v in (0, 11):
        out = handle(frame(MetadataRequest(version=v, topics=[MetadataRequest.MetadataRequestTopic(name="t"),
                                                              MetadataRequest.MetadataRequestTopic(name="nope")])))
        r = MetadataResponse.decode(out, version=v, header=True, framed=True)
        assert [(b.node_id, b.host, b.port) for b in r.brokers] == [(1, "127.0.0.1", 9092)]
        t, nope = r.topics
        assert (t.name, t.error_code, nope.error_code) == ("t", 0, 3)
        p = t.partitions[0]
        assert (p.leader_id, p.replica_nodes, p.isr_nodes) == (1, [1], [1])
        if v == 11:
            assert (r.cluster_id, r.controller_id, p.leader_epoch) == ("test-cluster", 1, 4)


def test_metadata_for_an_unknown_topic_starts_its_creation_when_allowed() -> None:
    ctx = make_ctx()
    ctx.auto_create_topics = True
    created = []
    ctx.pool = SimpleNamespace(submit=lambda fn: created.append(fn))
    d = make_dispatcher(ctx, lambda *a, **k: None)
    T = MetadataRequest.MetadataRequestTopic
    for v, allow, name, code in ((4, False, "a1", 3), (4, True, "a2", 5), (1, False, "a3", 5),
                                 (9, True, "bad name!", 3), (9, True, "__consumer_offsets", 3)):
        req = MetadataRequest(version=v, topics=[T(name=name)], allow_auto_topic_creation=allow)
        r = MetadataResponse.decode(asyncio.run(d.handle(frame(req), CONN)), version=v, header=True, framed=True)
        assert r.topics[0].error_code == code, (v, allow, name)
    assert len(created) == 2


@pytest.mark.parametrize("api_key,version", [(0, 2), (0, 10), (1, 3), (3, 12), (18, -1)])
def test_unsupported_versions_close_the_connection(api_key: int, version: int) -> None:
    with pytest.raises(BadRequest):
        handle(struct.pack(">hhih", api_key, version, 5, 1) + b"x" + b"\0" * 16)
    type_, fields = EVENTS[-1]
    assert type_ == "kafka_request" and fields["closed"] and fields["api_version"] == version
    assert (fields["client_id"], fields["correlation_id"], fields["error"]) == ("x", 5, "INVALID_REQUEST")


@pytest.mark.parametrize("api_key", [17, 27, 29, 34, 57, 999, -1])
def test_unknown_or_unimplemented_apis_close_the_connection(api_key: int) -> None:
    with pytest.raises(BadRequest, match="unsupported API key"):
        handle(struct.pack(">hhih", api_key, 0, 5, 1) + b"x")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(api=st.sampled_from(sorted(SUPPORTED)), version_pick=st.integers(0, 20), tail=st.binary(max_size=64))
def test_garbage_bodies_are_refused_or_answered_never_crash(api: int, version_pick: int, tail: bytes) -> None:
    lo, hi = SUPPORTED[api]
    version = lo + version_pick % (hi - lo + 1)
    data = struct.pack(">hhih", api, version, 7, 3) + b"abc" + tail
    if api in (8, 9, 11, 12, 13, 14, 15, 16, 42, 19, 20, 10):
        return  # these reach the group coordinator or ZooKeeper: covered with a real cluster
    try:
        out = handle(data)
    except BadRequest:
        return
    if out is not None:
        assert struct.unpack_from(">ii", out) == (len(out) - 4, 7)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=40))
def test_random_frames_raise_only_bad_request(data: bytes) -> None:
    if len(data) >= 2 and struct.unpack_from(">h", data)[0] in (8, 9, 10, 11, 12, 13, 14, 15, 16, 19, 20, 42):
        data = b"\x7f" + data[1:]   # coordinator and admin APIs need a cluster
    try:
        out = handle(data)
    except BadRequest:
        return
    assert out is None or struct.unpack_from(">i", out)[0] == len(out) - 4


# ---------------------------------------------------------------- batch checks

def test_a_valid_batch_passes_and_keeps_its_bytes(tmp_path) -> None:
    raw = batch(3, codec=1, headers=[("h", b"x")])       # gzip
    checked = check_client_batch(raw, 1 << 20, 9)
    assert checked.record_count == 3 and checked.data == raw
    with PartitionLog(tmp_path, "t", 0) as log:
        log.append_as_leader([(b"a", b"b")], 2, 5)
        base, last = log.append_batch_as_leader(checked.data, 3, checked.max_timestamp, 7, 0)
        stored = log.read(base, 1 << 20)
    assert (base, last) == (1, 3)
    assert stored[8:12] == raw[8:12] and stored[16:] == raw[16:]         # all but offset and epoch
    assert struct.unpack_from(">qii", stored) == (1, len(raw) - 12, 7)


@pytest.mark.parametrize("mutate,code", [
    (lambda b: b[:-1], CORRUPT_MESSAGE),                                   # truncated
    (lambda b: b[:30], CORRUPT_MESSAGE),                                   # shorter than a header
    (lambda b: b[:40] + bytes([b[40] ^ 1]) + b[41:], CORRUPT_MESSAGE),      # CRC mismatch
    (lambda b: b + b, INVALID_RECORD),                                     # two batches
    (lambda b: b[:16] + b"\x01" + b[17:], INVALID_RECORD),                 # magic 1
    (lambda b: reseal(bytearray(b[:22]) + bytes([5]) + b[23:]), UNSUPPORTED_COMPRESSION_TYPE),
    (lambda b: reseal(bytearray(b[:22]) + bytes([4]) + b[23:]), UNSUPPORTED_COMPRESSION_TYPE),  # zstd before v7
    (lambda b: reseal(bytearray(b[:22]) + bytes([0x20]) + b[23:]), INVALID_RECORD),   # control batch
    (lambda b: reseal(bytearray(b[:23]) + struct.pack(">i", 5) + b[27:]), INVALID_RECORD),   # lastOffsetDelta
    (lambda b: reseal(bytearray(b[:57]) + struct.pack(">i", 2) + b[61:]), INVALID_RECORD),   # record count
    (lambda b: reseal(bytearray(b[:-1])), CORRUPT_MESSAGE),               # a record cut short
    (lambda b: b"", INVALID_RECORD),
])
def test_bad_batches_are_refused(mutate, code: int) -> None:
    with pytest.raises(BatchRejected) as e:
        check_client_batch(mutate(batch(3)), 1 << 20, 6)
    assert e.value.code == code, e.value.message


def test_a_batch_over_max_message_bytes_is_too_large() -> None:
    raw = batch(3)
    check_client_batch(raw, len(raw), 9)
    with pytest.raises(BatchRejected) as e:
        check_client_batch(raw, len(raw) - 1, 9)
    assert e.value.code == MESSAGE_TOO_LARGE


def test_produce_with_a_bad_batch_appends_nothing() -> None:
    ctx = make_ctx()
    d = make_dispatcher(ctx, lambda *a, **k: None)
    good, bad = batch(2), bytearray(batch(2))
    bad[-1] ^= 0xFF
    req = ProduceRequest(version=9, transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=bytes(bad))])])
    r = ProduceResponse.decode(asyncio.run(d.handle(frame(req), CONN)), version=9, header=True, framed=True)
    assert r.responses[0].partition_responses[0].error_code == CORRUPT_MESSAGE
    assert ctx.replicas.appended == []
    req.topic_data[0].partition_data[0].records = good
    r = ProduceResponse.decode(asyncio.run(d.handle(frame(req), CONN)), version=9, header=True, framed=True)
    assert (r.responses[0].partition_responses[0].error_code, r.responses[0].partition_responses[0].base_offset) \
        == (0, 0)
    assert ctx.replicas.appended == [good]


# ---------------------------------------------------------------- over TCP

@pytest.fixture
def listener():
    lst = KafkaListener("127.0.0.1", 0, make_dispatcher(make_ctx(), lambda *a, **k: None),
                        Limits(max_request_bytes=1000), lambda *a, **k: None)
    lst.start()
    yield lst
    lst.stop()


def _connect(lst: KafkaListener) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", lst.port), timeout=5)
    return s


def _read_frame(s: socket.socket) -> bytes:
    head = _recv(s, 4)
    return head + _recv(s, struct.unpack(">i", head)[0])


def _recv(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def _framed(msg, corr: int) -> bytes:
    body = frame(msg, corr)
    return struct.pack(">i", len(body)) + body


def _closed(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def _api_versions_works(lst: KafkaListener) -> bool:
    with _connect(lst) as s:
        s.sendall(_framed(ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1"), 42))
        r = ApiVersionsResponse.decode(_read_frame(s), version=3, header=True, framed=True)
        return r.header.correlation_id == 42 and r.error_code == 0


def test_pipelined_requests_are_answered_in_order_and_acks0_produce_gets_nothing(listener) -> None:
    acks0 = ProduceRequest(version=7, transactional_id=None, acks=0, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch(1))])])
    av = lambda: ApiVersionsRequest(version=2)   # noqa: E731
    md = MetadataRequest(version=4, topics=None, allow_auto_topic_creation=False)
    with _connect(listener) as s:
        s.sendall(_framed(av(), 1) + _framed(acks0, 2) + _framed(md, 3) + _framed(av(), 4))
        corrs = [struct.unpack_from(">i", _read_frame(s), 4)[0] for _ in range(3)]
    assert corrs == [1, 3, 4]


@pytest.mark.parametrize("prefix", [struct.pack(">i", -1), struct.pack(">i", 1001), struct.pack(">i", 2**31 - 1)])
def test_a_bad_size_prefix_closes_only_that_connection(listener, prefix: bytes) -> None:
    with _connect(listener) as s:
        s.sendall(prefix + b"\0" * 8)
        assert _closed(s)
    assert _api_versions_works(listener)


def test_truncated_frames_and_garbage_leave_the_listener_serving(listener) -> None:
    with _connect(listener) as s:                    # a frame cut short, then the client goes
        s.sendall(struct.pack(">i", 100) + b"\0" * 10)
    with _connect(listener) as s:                    # garbage that does not decode
        s.sendall(struct.pack(">i", 12) + struct.pack(">hhih", 3, 11, 1, 200) + b"xx")
        assert _closed(s)
    with _connect(listener) as s:                    # a half size prefix
        s.sendall(b"\0\0")
    assert _api_versions_works(listener)


# ---------------------------------------------------------------- every advertised version

class FakeGroups:
    """The GroupsDoor's methods, answering with one of everything (to encode nested fields)."""

    def find_coordinator(self, r):
        return m.FindCoordinatorResponse(error_code=0, node_id=1, host="ignored", port=1)

    async def join_group(self, r):
        assert r.client_host == "/127.0.0.1"   # the connection's peer, as Kafka shows a client host
        return m.JoinGroupResponse(error_code=0, generation_id=1, protocol_type="consumer", protocol_name="range",
                                   leader="m", member_id="m", members=[m.JoinMember("m", None, b"x")])

    async def sync_group(self, r):
        return m.SyncGroupResponse(error_code=0, protocol_type="consumer", protocol_name="range", assignment=b"a")

    async def heartbeat(self, r):
        return m.HeartbeatResponse(error_code=27)

    async def leave_group(self, r):
        return m.LeaveGroupResponse(error_code=0, members=[("m", None, 25)])

    async def offset_commit(self, r):
        return m.OffsetCommitResponse(partitions=[("t", 0, 0)])

    async def txn_offset_commit(self, r):
        return m.OffsetCommitResponse(partitions=[(o.topic, o.partition, 0) for o in r.offsets])

    async def offset_fetch(self, r):
        return m.OffsetFetchResponse(error_code=0, partitions=[m.FetchedOffset("t", 0, 5, -1, "", 0)])

    async def describe_groups(self, r):
        return m.DescribeGroupsResponse(groups=[m.DescribedGroup(0, "g", "Stable", "", "", members=[
            m.DescribedMember("m", None, "c", "/h", b"", b"")])])

    async def list_groups(self, r):
        return m.ListGroupsResponse(error_code=0, groups=[("g", "consumer", "Stable")])

    async def delete_groups(self, r):
        return m.DeleteGroupsResponse(results=[("g", 69)])

    async def offset_delete(self, r):
        # the unknown partition (t-5) is answered by the listener itself
        return m.OffsetDeleteResponse(0, [(t, p, 86) for t, p in r.partitions])   # GROUP_SUBSCRIBED_TO_TOPIC


class FakeController:
    """The controller shell's admin requests, answering with one of everything."""

    def elect_leaders_request(self, tps, election_type, timeout_s):
        return {tp: (84, None, -1) if election_type == 0 else (83, "none live", -1) for tp in tps}

    def alter_reassignments(self, requested, timeout_s):
        return 0, {tp: (0, None) if r else (39, "Empty replica list") for tp, r in requested.items()}

    def list_reassignments(self, tps, timeout_s):
        return 0, {("t", 0): ((2, 1), (2,), (1,))}


class FakeTxns:
    """The TxnDoor's methods: every partition known, every answer NONE (or a fenced producer)."""

    def find_coordinator(self, key):
        return m.FindCoordinatorResponse(error_code=0, node_id=1, host="ignored", port=1)

    async def init_producer_id(self, r):
        return InitProducerIdResponse(0, 77, 3)

    async def add_partitions(self, r):
        return AddPartitionsToTxnResponse(tuple((tp, 0) for tp in r.partitions))

    async def add_offsets(self, r):
        return TxnErrorResponse(90)         # PRODUCER_FENCED: INVALID_PRODUCER_EPOCH before v2

    async def end_txn(self, r):
        return TxnErrorResponse(0)


class FetchReplicas(FakeReplicas):
    def delete_records(self, tp, offset):
        return 0, offset, offset   # error, requested offset, low watermark (reached at once)

    def consumer_read(self, tp, offset, max_bytes, current_leader_epoch=-1, last_fetched_epoch=-1, committed=False):
        return ConsumerRead(0, 3, 0, 4, batch(3))    # error, high watermark, log start, leader epoch, records

    def list_offsets(self, req, committed=False):
        return pb.ListOffsetsResponse(partitions=[pb.ListOffsetsPartition(
            topic=p.topic, partition=p.partition, offset=3, leader_epoch=4) for p in req.partitions])

    def end_offset_for_epoch(self, tp, leader_only):
        """A leader in epoch 4 whose epochs 1, 3 and 4 start at offsets 0, 10 and 20; LEO 30."""
        starts = [(1, 0), (3, 10), (4, 20)]

        def lookup(epoch):
            if epoch < 0 or epoch > 4:
                return -1, -1
            if epoch == 4:
                return 4, 30
            later = [i for i, (e, _) in enumerate(starts) if e > epoch][0]
            return (starts[later - 1][0] if later else epoch), starts[later][1]
        return 0, 4, lookup

    def describe_log_dirs(self, partitions=None):
        """Two directories: /d/0 offline, /d/1 with t-0 (and t-1, not asked for)."""
        rows = [(0, 1234, 0), (1, 99, -1)]
        return [("/d/0", 56, []),
                ("/d/1", 0, [("t", [r for r in rows if partitions is None or ("t", r[0]) in partitions])])]


def sample_request(api: int, v: int):
    """A request at version ``v`` with defaults, plus one topic-partition where the API has them."""
    R = REQUESTS[api]
    req = R(version=v)
    if api == 0:
        req.acks = -1
        req.topic_data = [R.TopicProduceData(name="t", partition_data=[
            R.TopicProduceData.PartitionProduceData(index=0, records=batch(2))])]
    elif api == 1:
        req.max_wait_ms, req.min_bytes = 0, 1
        req.topics = [R.FetchTopic(topic="t", partitions=[R.FetchTopic.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20, current_leader_epoch=-1)])]
    elif api == 2:
        req.topics = [R.ListOffsetsTopic(name="t", partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, timestamp=-1)])]
    elif api == 8:
        req.topics = [R.OffsetCommitRequestTopic(name="t", partitions=[
            R.OffsetCommitRequestTopic.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])]
    elif api == 9:
        req.topics = [R.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]
    elif api == 11:
        req.protocols = [R.JoinGroupRequestProtocol(name="range", metadata=b"x")]
    elif api == 14:
        req.assignments = [R.SyncGroupRequestAssignment(member_id="m", assignment=b"a")]
    elif api == 15:
        req.groups = ["g"]
    elif api == 42:
        req.groups_names = ["g"]
    elif api == 22:
        req.transactional_id = None
    elif api == 24:
        req.v3_and_below_transactional_id = "tx"
        req.v3_and_below_topics = [R.AddPartitionsToTxnTopic(name="t", partitions=[0])]
    elif api in (25, 26):
        req.transactional_id = "tx"
        if api == 25:
            req.group_id = "g"
    elif api == 28:
        req.transactional_id, req.group_id = "tx", "g"
        req.topics = [R.TxnOffsetCommitRequestTopic(name="t", partitions=[
            R.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=5),
            R.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(partition_index=9, committed_offset=5)])]
    elif api == 23:
        req.topics = [R.OffsetForLeaderTopic(topic="t", partitions=[R.OffsetForLeaderTopic.OffsetForLeaderPartition(
            partition=0, current_leader_epoch=4, leader_epoch=2)])]
    elif api == 32:
        req.resources = [R.DescribeConfigsResource(resource_type=2, resource_name="t", configuration_keys=None),
                         R.DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=None)]
    elif api == 35:
        req.topics = [R.DescribableLogDirTopic(topic="t", partitions=[0])]
    elif api == 33:
        req.resources = [R.AlterConfigsResource(resource_type=2, resource_name="t", configs=[
            R.AlterConfigsResource.AlterableConfig(name="retention.ms", value="1000")])]
    elif api == 44:
        req.resources = [R.AlterConfigsResource(resource_type=2, resource_name="t", configs=[
            R.AlterConfigsResource.AlterableConfig(name="retention.ms", config_operation=0, value="1000")])]
    elif api == 37:
        req.topics, req.timeout_ms = [R.CreatePartitionsTopic(name="t", count=2, assignments=None)], 1000
    elif api == 21:
        req.topics, req.timeout_ms = [R.DeleteRecordsTopic(name="t", partitions=[
            R.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=2)])], 1000
    elif api == 43:
        req.topic_partitions, req.timeout_ms = [R.TopicPartitions(topic="t", partitions=[0])], 1000
        if v >= 1:
            req.election_type = 1
    elif api == 45:
        req.topics, req.timeout_ms = [R.ReassignableTopic(name="t", partitions=[
            R.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=[2, 1]),
            R.ReassignableTopic.ReassignablePartition(partition_index=1, replicas=None)])], 1000
    elif api == 46:
        req.topics, req.timeout_ms = None, 1000
    elif api == 47:
        req.group_id = "g"
        req.topics = [R.OffsetDeleteRequestTopic(name="t", partitions=[
            R.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0),
            R.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=5)])]
    return req


ALL_VERSIONS = [(k, v) for k, (lo, hi) in sorted(SUPPORTED.items()) for v in range(lo, hi + 1)]


@pytest.mark.parametrize("api,version", ALL_VERSIONS, ids=[f"{api_name(k)}-v{v}" for k, v in ALL_VERSIONS])
def test_every_advertised_version_is_answered_in_that_version(api: int, version: int) -> None:
    ctx = make_ctx()
    ctx.groups, ctx.replicas, ctx.txns = FakeGroups(), FetchReplicas(), FakeTxns()
    if api in (43, 45, 46):
        ctx.controller, ctx.is_controller = FakeController(), lambda: True
    written: list = []
    ctx.zk = SimpleNamespace(allocate_producer_id_block=lambda broker, size: (5000, 5000 + size - 1),
                             read_entity_config=lambda path: {"cleanup.policy": "compact"} if path == "topics/t" else {},
                             change_entity_config=lambda path, config: written.append((path, config)),
                             exists=lambda path: object())
    ctx.producer_ids = ProducerIds(ctx.zk, 1).next_id
    ctx.topic_config = lambda topic: {"cleanup.policy": "compact"}
    from node.config import default_config, parse_config
    from node.dynamic_config import DynamicBrokerConfig
    raw = yaml.safe_load(default_config().to_yaml())
    raw["min.insync.replicas"] = 7
    ctx.broker_config = DynamicBrokerConfig(parse_config(raw), 1)
    d = make_dispatcher(ctx, lambda *a, **k: None)
    out = asyncio.run(d.handle(frame(sample_request(api, version), 77), CONN))
    r = RESPONSES[api].decode(out, version=version, header=True, framed=True)
    assert r.header.correlation_id == 77
    if api == 1:
        (p,) = r.responses[0].partitions
        assert (p.error_code, p.high_watermark, bytes(p.records)) == (0, 3, batch(3))
    elif api == 0:
        assert r.responses[0].partition_responses[0].error_code == 0
    elif api == 2:
        assert r.topics[0].partitions[0].offset == 3
    elif api == 9:
        assert r.topics[0].partitions[0].committed_offset == 5
    elif api == 15:
        assert r.groups[0].members[0].client_host == "/h"
    elif api == 22:
        assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 5000, 0)
    elif api == 24:
        (t,) = r.results_by_topic_v3_and_below
        assert [(x.partition_index, x.partition_error_code) for x in t.results_by_partition] == [(0, 0)]
    elif api == 25:
        assert r.error_code == (47 if version < 2 else 90)
    elif api == 28:
        got = {(t.name, x.partition_index): x.error_code for t in r.topics for x in t.partitions}
        assert got == {("t", 0): 0, ("t", 9): 3}     # partition 9 is not in the metadata cache
    elif api == 23:
        p = r.topics[0].partitions[0]
        assert (p.error_code, p.end_offset, p.leader_epoch if version >= 1 else 1) == (0, 10, 1)
    elif api == 32:
        topic, broker = r.results
        got = {c.name: (c.value, c.read_only, c.config_source) for c in topic.configs}
        assert len(got) == 26   # Kafka 2.8's LogConfig keys
        assert got["cleanup.policy"] == ("compact", False, 1) and got["min.insync.replicas"] == ("7", False, 4)
        mine = {c.name: (c.value, c.read_only) for c in broker.configs}
        assert mine["min.insync.replicas"] == ("7", False) and mine["delete.topic.enable"] == ("true", True)
    elif api in (33, 44):
        assert [(x.error_code, x.resource_name) for x in r.responses] == [(0, "t")]
        assert written == [("topics/t", {"cleanup.policy": "compact", "retention.ms": "1000"} if api == 44
                            else {"retention.ms": "1000"})]
    elif api == 37:
        assert [(x.name, x.error_code) for x in r.results] == [("t", 41)]   # NOT_CONTROLLER: not the controller
    elif api == 21:
        assert [(t.name, p.partition_index, p.low_watermark, p.error_code)
                for t in r.topics for p in t.partitions] == [("t", 0, 2, 0)]
    elif api == 43:
        got = [(t.topic, p.partition_id, p.error_code, p.error_message)
               for t in r.replica_election_results for p in t.partition_result]
        assert got == ([("t", 0, 83, "none live")] if version >= 1 else [("t", 0, 84, None)])
    elif api == 45:
        assert r.error_code == 0 and [(t.name, p.partition_index, p.error_code) for t in r.responses
                                      for p in t.partitions] == [("t", 0, 0), ("t", 1, 39)]
    elif api == 46:
        (p,) = r.topics[0].partitions
        assert (r.topics[0].name, p.replicas, p.adding_replicas, p.removing_replicas) == ("t", [2, 1], [2], [1])
    elif api == 47:
        assert r.error_code == 0 and [(t.name, p.partition_index, p.error_code) for t in r.topics
                                      for p in t.partitions] == [("t", 0, 86), ("t", 5, 3)]
    elif api == 10 and version >= 1:   # Kafka 2.8.2 (conformance FindCoordinator.group): Errors.NONE.message()
        assert (r.error_code, r.error_message) == (0, "NONE")
    elif api == 35:
        offline, online = r.results
        assert (offline.log_dir, offline.error_code, offline.topics) == ("/d/0", 56, [])
        (t,) = online.topics
        assert (online.error_code, t.name, [(p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
                                            for p in t.partitions]) == (0, "t", [(0, 1234, 0, False)])


def test_controller_admin_answers_carry_kafkas_messages() -> None:
    """As Kafka 2.8.2 answers (conformance AlterPartitionReassignments.*, ListPartitionReassignments.*): the
    reassignment APIs' top-level message is '' for NONE and the error's default message otherwise.  An unknown
    election type is INVALID_REQUEST for each partition (Kafka 2.8.2: UNKNOWN_SERVER_ERROR, docs/deviations.md)."""
    def ask(api: int, version: int, controller: bool, **fields):
        ctx = make_ctx()
        ctx.controller, ctx.is_controller = FakeController(), (lambda: controller)
        req = sample_request(api, version)
        for k, v in fields.items():
            setattr(req, k, v)
        out = asyncio.run(make_dispatcher(ctx, lambda *a, **k: None).handle(frame(req, 9), CONN))
        return RESPONSES[api].decode(out, version=version, header=True, framed=True)
    r = ask(43, 2, True, election_type=5)
    assert r.error_code == 0 and [(p.error_code, p.error_message) for t in r.replica_election_results
                                  for p in t.partition_result] == [(42, "Unknown election type 5")]
    assert (ask(45, 0, True).error_message, ask(46, 0, True).error_message) == ("", "")
    for api in (45, 46):
        r = ask(api, 0, False)
        assert (r.error_code, r.error_message) == (41, "This is not the correct controller for this cluster.")


@pytest.mark.parametrize("version", range(0, 5))
def test_offset_for_leader_epoch_answers_each_epochs_end_after_fencing(version: int) -> None:
    """Kafka 2.8's leader answer: the largest epoch <= the asked one with its end offset (the LEO for
    the current epoch, -1/-1 above it); from v2 a stale or future current_leader_epoch is fenced."""
    ctx = make_ctx()
    ctx.replicas = FetchReplicas()
    d = make_dispatcher(ctx, lambda *a, **k: None)
    R = REQUESTS[23]
    asks = [("t", 0, -1, 0), ("t", 0, -1, 2), ("t", 0, -1, 4), ("t", 0, -1, 5), ("t", 0, 3, 4), ("t", 0, 5, 4),
            ("nope", 0, -1, 1)]
    req = R(version=version, topics=[R.OffsetForLeaderTopic(topic=t, partitions=[
        R.OffsetForLeaderTopic.OffsetForLeaderPartition(partition=p, current_leader_epoch=c, leader_epoch=e)])
        for t, p, c, e in asks])
    r = RESPONSES[23].decode(asyncio.run(d.handle(frame(req), CONN)), version=version, header=True, framed=True)
    got = [(p.error_code, p.leader_epoch if version >= 1 else None, p.end_offset)
           for t in r.topics for p in t.partitions]
    fenced = version >= 2
    e = (lambda x: x if version >= 1 else None)
    assert got == [(0, e(0), 0), (0, e(1), 10), (0, e(4), 30), (0, e(-1), -1),
                   (74, e(-1), -1) if fenced else (0, e(4), 30), (75, e(-1), -1) if fenced else (0, e(4), 30),
                   (3, e(-1), -1)]


def test_a_taken_port_fails_the_start_and_stops_the_listener_thread() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        lst = KafkaListener("127.0.0.1", taken.getsockname()[1], DISPATCH, Limits(max_request_bytes=1000),
                            lambda *a, **k: None)
        with pytest.raises(OSError):
            lst.start()
        assert not lst.running


def test_list_offsets_by_timestamp_on_a_real_log(tmp_path) -> None:
    from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse
    from node.events import EventLog
    from node.replicas.replica_manager import ReplicaManager
    from replication.partition_types import ReplicaSettings
    rm = ReplicaManager(1, tmp_path / "logs", ReplicaSettings(), EventLog(tmp_path / "events.jsonl", 1),
                        broker_epoch=lambda: 5, endpoint_of=lambda b: None, controller_endpoint=lambda: None,
                        fetch_wait_ms=100, segment_bytes=1 << 20, checkpoint_interval_ms=60_000)
    try:
        rm.become_leader(PartitionInfo("t", 0, 1, 4, (1,), (1,), 0, 1))
        for base_ts in (1000, 2000, 3000):   # three batches of 3 records, timestamps base_ts + 0..2
            b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
            for i in range(3):
                b.append(i, base_ts + i, b"k", b"v", [])
            c = check_client_batch(bytes(b.build()), 1 << 20, 9)
            rm.append_batch(("t", 0), c.data, c.record_count, c.max_timestamp, 1, 1000, lambda code: None)
        ctx = make_ctx()
        ctx.replicas = rm
        d = make_dispatcher(ctx, lambda *a, **k: None)
        R = ListOffsetsRequest
        for ts, want in ((0, (0, 1000)), (1002, (2, 1002)), (1500, (3, 2000)), (3002, (8, 3002)), (3003, (-1, -1)),
                         (-2, (0, -1)), (-1, (9, -1))):
            req = R(version=6, replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(name="t", partitions=[
                R.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=ts, current_leader_epoch=-1)])])
            r = ListOffsetsResponse.decode(asyncio.run(d.handle(frame(req), CONN)), version=6, header=True,
                                           framed=True)
            p = r.topics[0].partitions[0]
            assert (p.error_code, (p.offset, p.timestamp), p.leader_epoch) == (0, want, 4), ts
    finally:
        rm.close()


@pytest.mark.parametrize("version", [4, 11, 12])
def test_fetch_from_a_real_log_passes_its_batches_through(tmp_path, version: int) -> None:
    """The consumer read path: whole batches as the log holds them (large ones spliced in after the
    generated encoder), up to the partition's max bytes (the first batch always), and
    OFFSET_OUT_OF_RANGE with the high watermark past the log end."""
    from listener.protocol import joined
    FetchResponse = RESPONSES[1]
    from node.events import EventLog
    from node.replicas.replica_manager import ReplicaManager
    from replication.partition_types import ReplicaSettings
    rm = ReplicaManager(1, tmp_path / "logs", ReplicaSettings(), EventLog(tmp_path / "events.jsonl", 1),
                        broker_epoch=lambda: 5, endpoint_of=lambda b: None, controller_endpoint=lambda: None,
                        fetch_wait_ms=100, segment_bytes=1 << 20, checkpoint_interval_ms=60_000)
    try:
        rm.become_leader(PartitionInfo("t", 0, 1, 4, (1,), (1,), 0, 1))
        sizes = []
        for n in (1, 2, 3):   # batches of 20, 40 and 60 kB: above the splice threshold (32 KiB)
            b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
            for i in range(n):
                b.append(i, 1000 + i, b"k", b"v" * 20_000, [])
            c = check_client_batch(bytes(b.build()), 1 << 20, 9)
            rm.append_batch(("t", 0), c.data, c.record_count, c.max_timestamp, 1, 1000, lambda code: None)
            sizes.append(len(c.data))
        log = rm.read_log(("t", 0), 0, 1 << 20)[0]
        d = make_dispatcher(dataclass_replace(make_ctx(), replicas=rm), lambda *a, **k: None)
        R = REQUESTS[1]

        def fetch(offset: int, max_bytes: int):
            req = R(version=version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 24, isolation_level=0,
                    session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                    topics=[R.FetchTopic(topic="t", partitions=[R.FetchTopic.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=max_bytes, current_leader_epoch=-1,
                        log_start_offset=-1)])])
            out = asyncio.run(d.handle(frame(req, 9), CONN))
            r = FetchResponse.decode(joined(out), version=version, header=True, framed=True)
            assert r.header.correlation_id == 9
            return r.responses[0].partitions[0]
        p = fetch(0, 1 << 20)
        assert (p.error_code, p.high_watermark, bytes(p.records)) == (0, 6, log) and len(log) == sum(sizes)
        assert bytes(fetch(0, 10).records) == log[:sizes[0]]              # the first batch always goes
        assert bytes(fetch(1, sizes[1] + 10).records) == log[sizes[0]:sizes[0] + sizes[1]]
        p = fetch(7, 1 << 20)
        assert (p.error_code, p.high_watermark, bytes(p.records)) == (1, -1, b"")  # OFFSET_OUT_OF_RANGE: as Kafka 2.8.2, offsets unknown
    finally:
        rm.close()


def test_a_failed_acks0_produce_closes_the_connection(listener) -> None:
    bad = bytearray(batch(1))
    bad[-1] ^= 0xFF
    acks0 = ProduceRequest(version=7, transactional_id=None, acks=0, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=bytes(bad))])])
    with _connect(listener) as s:
        s.sendall(_framed(acks0, 1) + _framed(ApiVersionsRequest(version=2), 2))
        assert _closed(s)
    assert _api_versions_works(listener)


def test_fetch_keeps_to_the_response_max_bytes_but_always_returns_the_first_batch() -> None:
    from kafka.protocol.consumer import FetchRequest, FetchResponse
    ctx = make_ctx()
    ctx.replicas = FetchReplicas()
    ctx.state.metadata[("t", 1)] = PartitionInfo("t", 1, 1, 4, (1,), (1,), 0, 1)
    d = make_dispatcher(ctx, lambda *a, **k: None)
    size = len(batch(3))
    R = FetchRequest
    for max_bytes, sizes in ((1, [size, 0]), (size + 10, [size, 0]), (2 * size, [size, size])):
        req = R(version=11, replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                session_id=0, session_epoch=-1, topics=[R.FetchTopic(topic="t", partitions=[
                    R.FetchTopic.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20,
                                                current_leader_epoch=-1) for p in (0, 1)])],
                forgotten_topics_data=[], rack_id="")
        r = FetchResponse.decode(asyncio.run(d.handle(frame(req), CONN)), version=11, header=True, framed=True)
        assert [len(p.records or b"") for p in r.responses[0].partitions] == sizes, max_bytes


def test_many_connections_are_served_at_once(listener) -> None:
    socks = [_connect(listener) for _ in range(64)]
    try:
        for i, s in enumerate(socks):
            s.sendall(_framed(ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1"),
                              i))
        for i, s in enumerate(socks):
            r = ApiVersionsResponse.decode(_read_frame(s), version=3, header=True, framed=True)
            assert (r.header.correlation_id, r.error_code) == (i, 0)
    finally:
        for s in socks:
            s.close()


# ---------------------------------------------------------------- as Kafka 2.8.2 answers (kafkasim conformance)

def _dispatch(replicas, groups=None, topics_on_ctx=None):
    ctx = make_ctx()
    ctx.replicas = replicas
    ctx.groups = groups or FakeGroups()
    return make_dispatcher(ctx, lambda *a, **k: None)


def test_offset_commit_to_an_unknown_topic_is_unknown_topic_or_partition_and_not_committed() -> None:
    seen = []

    class Groups(FakeGroups):
        async def offset_commit(self, r):
            seen.append([(o.topic, o.partition) for o in r.offsets])
            return m.OffsetCommitResponse(partitions=[(o.topic, o.partition, 0) for o in r.offsets])

    R = REQUESTS[8]
    req = R(version=7, group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=[R.OffsetCommitRequestTopic(name=n, partitions=[R.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")])
                for n in ("t", "nope")])
    d = _dispatch(FakeReplicas(), Groups())
    r = RESPONSES[8].decode(asyncio.run(d.handle(frame(req), CONN)), version=7, header=True, framed=True)
    got = {t.name: t.partitions[0].error_code for t in r.topics}
    assert got == {"t": 0, "nope": 3} and seen == [[("t", 0)]]
    only_unknown = R(version=7, group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                     topics=[req.topics[1]])
    r = RESPONSES[8].decode(asyncio.run(d.handle(frame(only_unknown), CONN)), version=7, header=True, framed=True)
    assert [(t.name, t.partitions[0].error_code) for t in r.topics] == [("nope", 3)] and len(seen) == 1


def test_fetch_out_of_range_answers_every_offset_unknown() -> None:
    class OutOfRange(FetchReplicas):
        def consumer_read(self, tp, offset, max_bytes, current_leader_epoch=-1, last_fetched_epoch=-1,
                          read_committed=False):
            return ConsumerRead(1, 3, 0, 4, b"")

    R = REQUESTS[1]
    req = R(version=11, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
            session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
            topics=[R.FetchTopic(topic="t", partitions=[R.FetchTopic.FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=100, log_start_offset=-1,
                partition_max_bytes=1 << 20)])])
    out = asyncio.run(_dispatch(OutOfRange()).handle(frame(req), CONN))
    (p,) = RESPONSES[1].decode(out, version=11, header=True, framed=True).responses[0].partitions
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (1, -1, -1, -1)


def test_produce_over_max_message_bytes_has_no_error_message() -> None:
    class Small(FakeReplicas):
        def topic_setting(self, tp, key, default):
            return 50 if key == "max.message.bytes" else default

    req = ProduceRequest(version=9, transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch(3))])])
    out = asyncio.run(_dispatch(Small()).handle(frame(req), CONN))
    p = ProduceResponse.decode(out, version=9, header=True, framed=True).responses[0].partition_responses[0]
    assert (p.error_code, p.error_message) == (MESSAGE_TOO_LARGE, None)


def test_a_null_where_the_version_allows_none_closes_the_connection() -> None:
    """kafka-python decodes a null length anywhere; Kafka's reader refuses a null non-nullable string or array
    (the request does not parse: the connection closes), nested ones too, and takes a nullable one."""
    # DescribeGroups v5 (flexible): groups a null compact array; OffsetForLeaderEpoch v0: topics a null array
    for data, field in ((b"\x00\x0f\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", "groups"),
                        (b"\x00\x17\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\xff\xff\xff\xff", "topics")):
        with pytest.raises(BadRequest, match=f"non-nullable field {field} was serialized as null"):
            parse_request(data)
    # JoinGroup v1: protocols[0].name null (a string of length -1)
    body = (struct.pack(">h", 1) + b"g" + struct.pack(">iih", 6000, 6000, 0) + struct.pack(">h", 8) + b"consumer"
            + struct.pack(">ihi", 1, -1, 0))
    with pytest.raises(BadRequest, match=r"protocols\[0\]\.name"):
        parse_request(struct.pack(">hhih", 11, 1, 5, 1) + b"x" + body)
    # Metadata v1's topics may be null (every topic): it parses
    assert parse_request(struct.pack(">hhih", 3, 1, 5, 1) + b"x" + b"\xff\xff\xff\xff").body.topics is None



def test_the_packed_response_header_is_kafka_pythons() -> None:
    """listener.protocol packs the response header itself beside the generated body encoder: the frame is byte for
    byte kafka-python's ``encode(header=True, framed=True)`` for every response and version (ApiVersions' v0
    header included), its fields left at their defaults; OffsetCommit's also with topics and partitions."""
    from listener.protocol import Request, build, encode_response
    checked = 0
    for cls in RESPONSES.values():
        for version in range(cls.min_version, cls.max_version + 1):
            values: dict = {}
            if cls.API_KEY == 8:
                values = dict(topics=[dict(name=n, partitions=[dict(partition_index=i, error_code=c)
                                                               for i, c in ((0, 0), (3, 25))]) for n in ("t", "ü")])
                if version >= 3:
                    values["throttle_time_ms"] = 7
            want = build(cls, values, version)
            want.with_header(correlation_id=-12345)
            got = encode_response(Request(cls.API_KEY, version, -12345, "c", None), values, version)
            assert got == bytes(want.encode(header=True, framed=True)), (cls.__name__, version)
            checked += 1
    assert checked > 200
