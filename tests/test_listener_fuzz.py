"""Fuzzing the Kafka listener in process: over 10,000 generated cases against the framing, the
dispatcher and the real handlers (over stand-ins for the broker's parts), plus one live case
against a real broker.

Every case must end in Kafka's error or a closed connection, never in a handler crash (a
``kafka_request`` event with UNKNOWN_SERVER_ERROR), and nothing malformed may be appended.
"""
from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from listener.app import make_dispatcher
from listener.protocol import REQUESTS, RESPONSES, SUPPORTED, BadRequest, error_name
from listener.records import CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE, UNSUPPORTED_COMPRESSION_TYPE
from listener.limits import Limits
from listener.server import Connection, KafkaListener
from node.replicas.hosted import ConsumerRead
from replication.broker_state import PartitionInfo
from zk.admin import TopicError
from proto import kafkasim_pb2 as pb
from tests.test_listener_codec import (ALL_VERSIONS, FakeGroups, FakeReplicas, FakeTxns, batch, frame, make_ctx, reseal,
                                       sample_request)
from tests.test_listener_payloads import payload as PAYLOAD
from zk.producer_ids import ProducerIds


def fuzz(n: int) -> settings:
    """``n`` generated cases, no deadline (the machine is shared), no example database."""
    return settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), database=None,
                    phases=(Phase.explicit, Phase.generate, Phase.shrink))


CRASH = error_name(-1)
NOT_LEADER_OR_FOLLOWER = 6
LOOP = asyncio.new_event_loop()
CONN = Connection(("127.0.0.1", 1))


class FuzzReplicas(FakeReplicas):
    """Fetch answers at once (a fuzzed min_bytes / max_wait_ms must not long-poll the suite)."""

    def consumer_read(self, tp, offset, max_bytes, current_leader_epoch=-1, last_fetched_epoch=-1, committed=False):
        return ConsumerRead(NOT_LEADER_OR_FOLLOWER)

    def list_offsets(self, req, committed=False):
        return pb.ListOffsetsResponse(partitions=[pb.ListOffsetsPartition(
            topic=p.topic, partition=p.partition, offset=3, leader_epoch=4) for p in req.partitions])

    def delete_records(self, tp, offset):
        return NOT_LEADER_OR_FOLLOWER, -1, -1


class FuzzZk:
    """ZooKeeper as topic administration sees it: one broker; every write refused."""

    def read_brokers(self):
        return [1]

    def allocate_producer_id_block(self, broker, size):
        return 5000, 5000 + size - 1

    def __getattr__(self, name):
        def refuse(*args, **kwargs):
            raise TopicError(f"{name}: no ZooKeeper in the fuzz")
        return refuse


EVENTS: list[dict] = []
CTX = make_ctx()
CTX.groups, CTX.replicas, CTX.zk, CTX.txns = FakeGroups(), FuzzReplicas(), FuzzZk(), FakeTxns()
CTX.producer_ids = ProducerIds(CTX.zk, 1).next_id
DISPATCH = make_dispatcher(CTX, lambda type_, **f: EVENTS.append(f))


def run(data: bytes) -> tuple[str, bytes | None]:
    """Dispatch one request frame: ('closed' | 'silent' (acks=0) | 'answered', the answer).  Every outcome is an
    event, none a handler crash, and an answer is a well-formed frame for that request."""
    seen = len(EVENTS)
    try:
        out = LOOP.run_until_complete(DISPATCH.handle(data, CONN))
    except BadRequest:
        result, out = "closed", None
    else:
        result = "silent" if out is None else "answered"
    new = EVENTS[seen:]
    assert len(new) == 1 and new[0]["error"] != CRASH, new
    if out is not None:
        api, version, corr = struct.unpack_from(">hhi", data)
        size, got = struct.unpack_from(">ii", out)
        assert (size, got) == (len(out) - 4, corr)
        if not (api == 18 and version > SUPPORTED[18][1]):
            RESPONSES[api].decode(out, version=version, header=True, framed=True)
    return result, out


def nothing_appended() -> None:
    assert CTX.replicas.appended == []


def header(api: int, version: int, corr: int = 7, client_id: bytes = b"fz") -> bytes:
    flexible = api in REQUESTS and REQUESTS[api].flexible_version_q(version)
    return struct.pack(">hhih", api, version, corr, len(client_id)) + client_id + (b"\0" if flexible else b"")


# ---------------------------------------------------------------- frames (10,500 cases in all)

@fuzz(2500)
@given(st.one_of(st.binary(max_size=80),
                 st.tuples(st.sampled_from(ALL_VERSIONS), st.binary(max_size=80)).map(
                     lambda t: header(*t[0]) + t[1])))
def test_random_bytes_get_an_error_or_a_close(data: bytes) -> None:
    run(data)
    nothing_appended()


WHOLE = {av: frame(sample_request(*av), 7) for av in ALL_VERSIONS}


@fuzz(2000)
@given(st.sampled_from(ALL_VERSIONS), st.data())
def test_truncated_requests_get_an_error_or_a_close(api_version: tuple[int, int], data) -> None:
    whole = WHOLE[api_version]
    cut = data.draw(st.integers(0, len(whole) - 1))
    run(whole[:cut])
    nothing_appended()


@fuzz(1000)
@given(st.integers(-(1 << 15), (1 << 15) - 1), st.integers(-(1 << 15), (1 << 15) - 1), st.binary(max_size=24))
def test_unknown_apis_and_unsupported_versions_close(api: int, version: int, tail: bytes) -> None:
    lo, hi = SUPPORTED.get(api, (0, -1))
    if lo <= version <= hi:
        version = hi + 1 + version % 7
    result, _ = run(struct.pack(">hhih", api, version, 7, 2) + b"fz" + tail)
    # ApiVersions above its maximum is answered (error 35, in a v0 body), as Kafka does
    assert result == ("answered" if api == 18 and version > hi else "closed"), (api, version)


@fuzz(2000)
@given(st.sampled_from(ALL_VERSIONS), st.binary(min_size=1, max_size=96))
def test_a_valid_header_with_a_garbage_body(api_version: tuple[int, int], body: bytes) -> None:
    run(header(*api_version) + body)
    nothing_appended()


def produce(records: bytes, version: int, acks: int) -> bytes:
    R = REQUESTS[0]
    return frame(R(version=version, transactional_id=None, acks=acks, timeout_ms=1000, topic_data=[
        R.TopicProduceData(name="t", partition_data=[R.TopicProduceData.PartitionProduceData(index=0,
                                                                                            records=records)])]), 7)


def mutate(raw: bytes, n: int, kind: int, pos: int, value: int, extra: bytes) -> tuple[bytes, int | None]:
    """A batch of ``n`` records broken one way: (the bytes, the error they must get, None: any rejection)."""
    b = bytearray(raw)
    flip = 1 + value % 255
    if kind == 0:                                   # the length field
        i = 8 + pos % 4
        return bytes(b[:i]) + bytes([b[i] ^ flip]) + bytes(b[i + 1:]), None
    if kind == 1:                                   # the CRC or a byte it covers: CRC mismatch
        i = 17 + pos % (len(b) - 17)
        return bytes(b[:i]) + bytes([b[i] ^ flip]) + bytes(b[i + 1:]), CORRUPT_MESSAGE
    if kind == 2:                                   # bad magic
        return reseal(b[:16] + bytearray([2 ^ flip]) + b[17:]), INVALID_RECORD
    if kind == 3:                                   # a lying record count
        count = value if value != n else n + 1
        return reseal(b[:57] + bytearray(struct.pack(">i", count)) + b[61:]), INVALID_RECORD
    if kind == 4:                                   # a lying lastOffsetDelta
        delta = value if value != n - 1 else n
        return reseal(b[:23] + bytearray(struct.pack(">i", delta)) + b[27:]), None
    if kind == 5:                                   # truncated
        return bytes(b[:pos % len(b)]), None
    if kind == 6:                                   # bytes after the batch
        return raw + extra, INVALID_RECORD
    return reseal(b[:22] + bytearray([5 + pos % 3]) + b[23:]), UNSUPPORTED_COMPRESSION_TYPE   # unknown codec


BATCHES = {(n, codec): batch(n, codec=codec) for n in range(1, 5) for codec in (0, 1)}


@fuzz(2000)
@given(st.integers(1, 4), st.sampled_from([0, 1]), st.integers(3, 9), st.sampled_from([-1, 0, 1]), st.integers(0, 7),
       st.integers(0, 1 << 16), st.integers(-(1 << 31), (1 << 31) - 1), st.binary(min_size=1, max_size=16))
def test_bad_batches_are_refused_and_nothing_is_appended(n: int, codec: int, version: int, acks: int, kind: int,
                                                         pos: int, value: int, extra: bytes) -> None:
    bad, code = mutate(BATCHES[(n, codec)], n, kind, pos, value, extra)
    result, out = run(produce(bad, version, acks))
    nothing_appended()
    if acks == 0:
        assert result == "closed"     # no response to carry the error: Kafka closes the connection
        return
    r = RESPONSES[0].decode(out, version=version, header=True, framed=True)
    got = r.responses[0].partition_responses[0].error_code
    assert got == code if code is not None else got in (CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE), got


def bomb(codec: int, size: int, count: int = 1) -> bytes:
    """A batch claiming ``count`` records whose records section is ``size`` zero bytes compressed with
    ``codec`` (CRC right): it decompresses to ``size`` bytes."""
    from kafkacommon.compression import compress
    b = bytearray(batch(count)[:61]) + compress(codec, b"\0" * size)
    b[21:23] = (int.from_bytes(b[21:23], "big") & ~7 | codec).to_bytes(2, "big")
    struct.pack_into(">i", b, 8, len(b) - 12)
    return reseal(b)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_a_zip_bomb_is_refused_once_decompression_passes_the_bound(codec: int) -> None:
    """Decompression is bounded: records that would decompress past the limit get CORRUPT_MESSAGE, the
    same records under the limit are decompressed (and refused only for not decoding)."""
    from listener.records import BatchRejected, check_client_batch
    for size, limit in ((50_000, 40_000), (50_000, 60_000)):
        with pytest.raises(BatchRejected) as e:
            check_client_batch(bomb(codec, size), 1 << 20, 9, decompressed_limit=limit)
        assert e.value.code == CORRUPT_MESSAGE
        assert ("decompresses to more than" in e.value.message) == (size > limit), e.value.message


def test_a_real_zip_bomb_through_the_dispatcher_appends_nothing() -> None:
    """A 4 kB zstd batch that would decompress to 101 MiB: refused at the listener's bound (100 MiB)."""
    import zstandard
    z, zero = zstandard.ZstdCompressor().compressobj(), bytes(1 << 20)
    records = b"".join([z.compress(zero) for _ in range(101)] + [z.flush()])
    b = bytearray(bomb(4, 1))[:61] + records
    struct.pack_into(">i", b, 8, len(b) - 12)
    data = reseal(b)
    assert len(data) < 20_000
    result, out = run(produce(data, 9, -1))
    r = RESPONSES[0].decode(out, version=9, header=True, framed=True)
    p = r.responses[0].partition_responses[0]
    assert (p.error_code, p.base_offset) == (CORRUPT_MESSAGE, -1) and "decompresses to more" in p.error_message
    nothing_appended()


class Writer:
    def __init__(self) -> None:
        self.out = bytearray()
        self.closed = False

    def get_extra_info(self, name):
        return ("127.0.0.1", 1)

    def write(self, data: bytes) -> None:
        self.out += data

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def api_versions_frame(corr: int) -> bytes:
    body = frame(REQUESTS[18](version=3, client_software_name="fz", client_software_version="1"), corr)
    return struct.pack(">i", len(body)) + body


SHELL = KafkaListener("127.0.0.1", 0, DISPATCH, Limits(max_request_bytes=1000), lambda *a, **k: None)   # never started: its shell only
ITEM = st.one_of(
    st.integers(0, 1000).map(lambda c: ("ok", api_versions_frame(c), c)),
    st.integers(-(1 << 31), -1).map(lambda s: ("bad", struct.pack(">i", s), None)),            # negative prefix
    st.integers(1001, (1 << 31) - 1).map(lambda s: ("bad", struct.pack(">i", s), None)),       # over the limit
    st.tuples(st.integers(12, 1000), st.binary(max_size=11)).map(                              # truncated: EOF
        lambda t: ("eof", struct.pack(">i", t[0]) + t[1], None)),
    st.binary(max_size=3).map(lambda x: ("eof", x, None)),                                     # half a prefix
    st.binary(max_size=40).map(lambda x: ("garbage", struct.pack(">i", len(x)) + x, None)),
)


@fuzz(1000)
@given(st.lists(ITEM, min_size=1, max_size=6))
def test_a_stream_of_frames_and_bad_prefixes(items) -> None:
    """The TCP shell over an in-memory stream: requests are answered in order up to the first
    negative or oversized prefix (closed) or the end of the stream; a garbage frame is answered
    or closes, and nothing after a close is read."""
    for i, (kind, _, _) in enumerate(items):
        if kind == "eof":   # the stream ends inside it: nothing may follow
            items = items[:i + 1]
            break
    writer = Writer()

    async def serve() -> None:
        reader = asyncio.StreamReader()
        for _, data, _ in items:
            reader.feed_data(data)
        reader.feed_eof()
        await SHELL.serve_connection(reader, writer)
    LOOP.run_until_complete(serve())
    answered = []
    pos = 0
    while pos < len(writer.out):
        (size,) = struct.unpack_from(">i", writer.out, pos)
        answered.append(struct.unpack_from(">i", writer.out, pos + 4)[0])
        pos += 4 + size
    assert pos == len(writer.out) and writer.closed
    want = []
    for kind, data, corr in items:
        if kind == "ok":
            want.append(corr)
            continue
        if kind == "garbage":   # may be answered (with its own correlation id) or close: compare up to it
            if len(answered) > len(want):
                want.append(answered[len(want)])
                continue
        break
    assert answered == want
    nothing_appended()


# ---------------------------------------------------------------- live: a real broker

def test_a_broker_shrugs_off_garbage_and_still_serves_a_real_client(make_cluster) -> None:
    """Raw sockets send garbage to a real broker's listener; then kafka-python still gets metadata,
    the partition is still empty, and the listener logged each close."""
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from node.events import read_events
    from util.waiting import wait_for
    from zk.admin import create_topic
    c = make_cluster(1, offsets__topic__num__partitions=1)
    create_topic(c.zk(), "fuzz-t", 1, 1, {})
    host, port = c.cfg.brokers[0].kafka_advertised
    # the topic reaches the broker's metadata asynchronously (the controller's watch, then UpdateMetadata), as in
    # Kafka: the bad batches below are to meet a partition the broker knows
    before = KafkaAdminClient(bootstrap_servers=f"{host}:{port}", client_id="before-fuzz")
    try:
        wait_for(lambda: "fuzz-t" in before.list_topics(), 30, "fuzz-t in the broker's metadata")
    finally:
        before.close()
    good = batch(2)
    sends = [b"\xff\xff\xff\xff" + b"x" * 8,                          # negative size
             struct.pack(">i", 200 << 20) + b"\0" * 16,               # above socket.request.max.bytes
             struct.pack(">i", 100) + b"\0" * 10,                     # truncated, then the client goes
             struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, 0),   # unknown API
             struct.pack(">i", 10) + struct.pack(">hhih", 3, 99, 1, 0),    # unsupported version
             struct.pack(">i", 20) + header(3, 9) + b"\xff" * 9,     # a valid header, a garbage body
             b"\x00\x00"]                                             # half a prefix
    for i, mutated in enumerate([good[:40] + bytes([good[40] ^ 1]) + good[41:],        # bad CRC
                                 reseal(bytearray(good[:16]) + b"\x01" + good[17:]),   # bad magic
                                 reseal(bytearray(good[:57]) + struct.pack(">i", 9) + good[61:])]):  # lying count
        for acks in (1, 0):
            body = produce(mutated, 9, acks)
            sends.append(struct.pack(">i", len(body)) + body)
    for data in sends:
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(10)
            while s.recv(65536):     # read to the broker's close (or its answer, then EOF)
                pass
    admin = KafkaAdminClient(bootstrap_servers=f"{host}:{port}", client_id="after-fuzz")
    try:
        assert "fuzz-t" in admin.list_topics()
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=f"{host}:{port}", client_id="after-fuzz")
    try:
        tp = TopicPartition("fuzz-t", 0)
        assert consumer.end_offsets([tp]) == {tp: 0}      # none of the bad batches was appended
    finally:
        consumer.close()
    events = Path(c.cfg.run_dir) / "events" / "broker-1.jsonl"

    def closes() -> list[dict]:
        return [e for e in read_events(events) if e["type"] == "kafka_request" and e.get("closed")]
    wait_for(lambda: len(closes()) >= 8, 10, "the listener's close events")
    assert not [e for e in read_events(events) if e["type"] == "kafka_request" and e["error"] == CRASH]


class PayloadReplicas(FuzzReplicas):
    """Fetch answers each partition with the fuzzed bytes given for it (any bytes: the encoder does not parse them)."""

    def __init__(self, payloads: dict[int, bytes]) -> None:
        super().__init__()
        self.payloads = payloads

    def consumer_read(self, tp, offset, max_bytes, current_leader_epoch=-1, last_fetched_epoch=-1, committed=False):
        return ConsumerRead(0, 1, 0, 4, self.payloads[tp[1]])


@fuzz(1500)
@given(st.sampled_from([4, 11, 12]), st.lists(PAYLOAD, min_size=1, max_size=6))
def test_adversarial_record_bytes_never_change_a_fetch_answers_framing(version: int, payloads: list[bytes]) -> None:
    """The poison-pill payloads (tests/test_listener_payloads.py) through the dispatcher's Fetch, several partitions
    in one answer: the answer decodes, and each partition's bytes are the ones read, byte for byte."""
    from dataclasses import replace
    from listener.protocol import joined
    ctx = make_ctx()
    ctx.state.topic_partitions = {"t": len(payloads)}
    ctx.state.metadata = {("t", p): PartitionInfo("t", p, 1, 4, (1,), (1,), 0, 1) for p in range(len(payloads))}
    d = make_dispatcher(replace(ctx, replicas=PayloadReplicas(dict(enumerate(payloads)))), lambda *a, **k: None)
    R = REQUESTS[1]
    req = R(version=version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 26, isolation_level=0,
            session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
            topics=[R.FetchTopic(topic="t", partitions=[R.FetchTopic.FetchPartition(
                partition=p, fetch_offset=0, partition_max_bytes=1 << 24, current_leader_epoch=-1,
                log_start_offset=-1) for p in range(len(payloads))])])
    out = LOOP.run_until_complete(d.handle(frame(req, 5), CONN))
    r = RESPONSES[1].decode(joined(out), version=version, header=True, framed=True)
    assert {p.partition_index: bytes(p.records) for p in r.responses[0].partitions} == dict(enumerate(payloads))


def test_the_admin_apis_answer_a_zookeeper_failure_per_resource() -> None:
    """CreatePartitions, AlterConfigs, IncrementalAlterConfigs and DescribeConfigs whose ZooKeeper I/O fails (the
    fuzz's ZooKeeper refuses everything) answer with the resource's error; nothing crashes, nothing closes."""
    CTX.is_controller = lambda: True
    try:
        for api in (32, 33, 37, 44):
            lo, hi = SUPPORTED[api]
            for version in range(lo, hi + 1):
                result, _out = run(frame(sample_request(api, version), 7))
                assert result == "answered", (api, version)
    finally:
        CTX.is_controller = lambda: False
