"""No record content can change how a response is framed (the old in-band marker's poison pill).

The listener used to splice large byte fields back into a response at an in-band marker
(``\\x00KSIMBLOB`` + an index).  A small record holding those bytes, fetched beside a large one,
either made the encoder raise (the connection closed on every fetch) or corrupted the answer.
These tests feed adversarial payloads (the old marker, parts of it, the placeholders' own bytes,
random bytes, sizes either side of every threshold) through the response encoder and through a
real log and the real Fetch handler, and check every fetched record equals the produced one,
byte for byte.  The cluster tier does the same with a real client (test_kafka_clients.py).
"""
from __future__ import annotations

import asyncio
from dataclasses import replace as dataclass_replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder, DefaultRecordBatch

from listener.app import make_dispatcher
from listener.protocol import REQUESTS, RESPONSES, Request, encode_response, joined
from listener.records import check_client_batch
from replication.broker_state import PartitionInfo
from tests.test_listener_codec import CONN, frame, make_ctx

OLD_MARKER = b"\x00KSIMBLOB"
THRESHOLD = 1 << 15     # the size from which a byte field is spliced in rather than encoded
# the old marker with each index, its prefix as the encoder wrote it (int32 16, varint 17), its parts,
# and the placeholders' bytes (an index in 16 bytes, and the same XORed with 0xFF)
ADVERSARIAL = [
    OLD_MARKER + i.to_bytes(7, "big") for i in range(3)
] + [
    b"\x00\x00\x00\x10" + OLD_MARKER + bytes(7), b"\x11" + OLD_MARKER + bytes(7), OLD_MARKER, OLD_MARKER[:5],
    OLD_MARKER[3:], bytes(16), b"\xff" * 16, (1).to_bytes(16, "big"), bytes(b ^ 0xFF for b in (1).to_bytes(16, "big")),
    (OLD_MARKER + bytes(7)) * 4, b"",
]
SIZES = sorted({0, 1, 15, 16, 17, 126, 127, 128, 129, 16383, 16384, THRESHOLD - 1, THRESHOLD, THRESHOLD + 1,
                2 * THRESHOLD})
FETCH_VERSIONS = [4, 11, 12]    # Fetch v12 is flexible (compact bytes, a varint length)


def filled(size: int, pattern: bytes) -> bytes:
    """``size`` bytes of ``pattern`` repeated (random bytes when the pattern is empty are the caller's)."""
    if not pattern:
        return bytes(size)
    return (pattern * (size // len(pattern) + 1))[:size]


payload = st.one_of(
    st.sampled_from(ADVERSARIAL),
    st.builds(filled, st.sampled_from(SIZES), st.sampled_from(ADVERSARIAL)),
    st.binary(max_size=300),
    st.builds(lambda n, b: (b * (n // max(len(b), 1) + 1))[:n] if b else bytes(n), st.sampled_from(SIZES),
              st.binary(min_size=1, max_size=40)),
)


def fetch_response(version: int, records: list[bytes]) -> bytes:
    req = Request(1, version, 7, "c", None)
    values = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": i, "error_code": 0, "high_watermark": len(records), "records": r}
        for i, r in enumerate(records)]}]}
    return joined(encode_response(req, values))


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.sampled_from(FETCH_VERSIONS), st.lists(payload, min_size=1, max_size=5))
def test_any_byte_fields_round_trip_through_a_fetch_response(version: int, records: list[bytes]) -> None:
    out = fetch_response(version, records)
    r = RESPONSES[1].decode(out, version=version, header=True, framed=True)
    assert r.header.correlation_id == 7
    assert [bytes(p.records) for p in r.responses[0].partitions] == records


def test_the_old_markers_poison_pill_beside_a_large_partition() -> None:
    """The reproduction of the bug: the marker in a small partition's bytes and a spliced partition beside it
    (the old encoder raised for index 1 and corrupted the answer for index 0)."""
    big = b"B" * THRESHOLD
    for version in FETCH_VERSIONS:
        for small in (OLD_MARKER + bytes(7), OLD_MARKER + (1).to_bytes(7, "big")):
            for records in ([small, big], [big, small], [small, big, small, big]):
                r = RESPONSES[1].decode(fetch_response(version, records), version=version, header=True, framed=True)
                assert [bytes(p.records) for p in r.responses[0].partitions] == records


def record_batch(values: list[bytes]) -> bytes:
    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 22)
    for i, v in enumerate(values):
        b.append(i, 1000 + i, b"k", v, [])
    return bytes(b.build())


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.sampled_from(FETCH_VERSIONS), st.lists(st.lists(payload, min_size=1, max_size=3), min_size=2, max_size=4))
def test_records_fetched_from_a_real_log_equal_the_produced_ones(tmp_path_factory, version: int,
                                                                  parts: list[list[bytes]]) -> None:
    """Produced into real logs (one partition per list of values), fetched through the real Fetch handler in one
    request: every record's value comes back as produced, byte for byte."""
    from node.events import EventLog
    from node.replicas.replica_manager import ReplicaManager
    from replication.partition_types import ReplicaSettings
    tmp = tmp_path_factory.mktemp("payloads")
    rm = ReplicaManager(1, tmp / "logs", ReplicaSettings(), EventLog(tmp / "events.jsonl", 1),
                        broker_epoch=lambda: 5, endpoint_of=lambda b: None, controller_endpoint=lambda: None,
                        fetch_wait_ms=100, segment_bytes=1 << 22, checkpoint_interval_ms=60_000)
    try:
        for p, values in enumerate(parts):
            rm.become_leader(PartitionInfo("t", p, 1, 4, (1,), (1,), 0, 1))
            c = check_client_batch(record_batch(values), 1 << 22, 9)
            rm.append_batch(("t", p), c.data, c.record_count, c.max_timestamp, 1, 1000, lambda code: None)
        ctx = make_ctx()
        ctx.state.topic_partitions = {"t": len(parts)}
        ctx.state.metadata = {("t", p): PartitionInfo("t", p, 1, 4, (1,), (1,), 0, 1) for p in range(len(parts))}
        d = make_dispatcher(dataclass_replace(ctx, replicas=rm), lambda *a, **k: None)
        R = REQUESTS[1]
        req = R(version=version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 26, isolation_level=0,
                session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                topics=[R.FetchTopic(topic="t", partitions=[R.FetchTopic.FetchPartition(
                    partition=p, fetch_offset=0, partition_max_bytes=1 << 24, current_leader_epoch=-1,
                    log_start_offset=-1) for p in range(len(parts))])])
        out = asyncio.run(d.handle(frame(req, 9), CONN))
        r = RESPONSES[1].decode(joined(out), version=version, header=True, framed=True)
        got = {}
        for p in r.responses[0].partitions:
            assert p.error_code == 0
            got[p.partition_index] = [rec.value for rec in DefaultRecordBatch(bytes(p.records))]
        assert got == {p: values for p, values in enumerate(parts)}
    finally:
        rm.close()
