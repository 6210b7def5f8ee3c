"""zk/codecs.py: Kafka 2.8's znode JSON, round trips, and CodecError on malformed data."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from kafkacommon.metadata import LeaderAndIsr
from zk.codecs import (
    BrokerRegistration, CodecError, ControllerZNode, TopicAssignment,
    decode_broker, decode_controller, decode_controller_epoch, decode_partition_state, decode_partition_states,
    decode_state_contents,
    decode_config_change, decode_entity_config, decode_topic,
    encode_broker, encode_config_change, encode_controller, encode_controller_epoch, encode_entity_config,
    encode_partition_state, encode_topic,
)

STATE_PATH = "/brokers/topics/t/partitions/3/state"
INT32 = st.integers(-(2**31), 2**31 - 1)
MS = st.integers(0, 2**53)
BROKER_ID = st.integers(0, 2**31 - 1)


# ------------------------------------------------------------------ Kafka's exact layout

def test_controller_znode_layout():
    assert json.loads(encode_controller(3, 1_700_000_000_123)) == \
        {"version": 1, "brokerid": 3, "timestamp": "1700000000123"}


def test_controller_epoch_is_a_plain_integer_string():
    assert encode_controller_epoch(0) == b"0"
    assert encode_controller_epoch(17) == b"17"


def test_broker_registration_layout_is_kafkas_json_v5_with_the_grpc_address_beside_it():
    reg = BrokerRegistration(2, "10.0.0.2", 9092, 1_617_183_932_000, rack="r1", epoch=12345,
                             listeners=(("PLAINTEXT", "10.0.0.2", 19092), ("EXTERNAL", "lab.example", 29092)),
                             protocols=(("PLAINTEXT", "PLAINTEXT"), ("EXTERNAL", "PLAINTEXT")))
    # Kafka's BrokerIdZNode.encode: endpoints are the Kafka listeners, host/port the first PLAINTEXT one
    assert json.loads(encode_broker(reg)) == {
        "version": 5, "host": "10.0.0.2", "port": 19092, "jmx_port": -1, "timestamp": "1617183932000",
        "endpoints": ["PLAINTEXT://10.0.0.2:19092", "EXTERNAL://lab.example:29092"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "EXTERNAL": "PLAINTEXT"},
        "rack": "r1", "features": {}, "kafkasim_grpc": "10.0.0.2:9092"}
    assert decode_broker(2, encode_broker(reg), 12345) == reg


def test_a_broker_without_rack_or_kafka_listener_writes_no_rack_a_null_host_and_port_minus_one():
    obj = json.loads(encode_broker(BrokerRegistration(2, "h", 1, 0)))
    assert "rack" not in obj
    assert (obj["host"], obj["port"], obj["endpoints"], obj["listener_security_protocol_map"]) == (None, -1, [], {})
    assert decode_broker(2, encode_broker(BrokerRegistration(2, "h", 1, 0))) == BrokerRegistration(2, "h", 1, 0)


def test_broker_epoch_is_not_written_to_the_znode():
    raw = encode_broker(BrokerRegistration(2, "h", 1, 0, epoch=999))
    assert b"999" not in raw


def test_topic_layout_is_version_3_with_string_partition_keys():
    a = TopicAssignment("t", {1: (3, 1, 2), 0: (1, 2, 3), 10: (2, 3, 1)}, topic_id="abc")
    obj = json.loads(encode_topic(a))
    assert obj["version"] == 3 and obj["topic_id"] == "abc"
    assert obj["partitions"] == {"0": [1, 2, 3], "1": [3, 1, 2], "10": [2, 3, 1]}
    assert obj["adding_replicas"] == {} and obj["removing_replicas"] == {}
    # Kafka 2.8's layout: the configs are not here but at /config/topics/<t>
    assert set(obj) == {"version", "topic_id", "partitions", "adding_replicas", "removing_replicas"}


def test_replica_lists_keep_assignment_order():
    obj = json.loads(encode_topic(TopicAssignment("t", {0: (3, 1, 2)})))
    assert obj["partitions"]["0"] == [3, 1, 2], "the head is the preferred replica"


def test_partition_state_layout():
    assert json.loads(encode_partition_state(LeaderAndIsr(2, 7, (2, 3, 1), 4))) == \
        {"version": 1, "leader": 2, "leader_epoch": 7, "controller_epoch": 4, "isr": [2, 3, 1]}


@given(st.integers(-1, 2**31 - 1), INT32, st.lists(BROKER_ID, max_size=6).map(tuple), INT32)
def test_partition_state_bytes_are_compact_json_in_kafkas_field_order(leader, leader_epoch, isr, controller_epoch):
    expected = json.dumps({"version": 1, "leader": leader, "leader_epoch": leader_epoch,
                           "controller_epoch": controller_epoch, "isr": list(isr)}, separators=(",", ":"))
    assert encode_partition_state(LeaderAndIsr(leader, leader_epoch, isr, controller_epoch)) == expected.encode()


def test_no_leader_is_minus_one():
    assert LeaderAndIsr.NO_LEADER == -1
    assert json.loads(encode_partition_state(LeaderAndIsr(-1, 1, (2,), 1)))["leader"] == -1


# ------------------------------------------------------------------ reading what Kafka writes

def test_decodes_a_kafka_broker_znode_without_rack():
    raw = (b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://kafka1:9092"],'
           b'"jmx_port":-1,"features":{},"host":"kafka1","timestamp":"1617183932000","port":9092,"version":5}')
    assert decode_broker(1, raw, czxid=4294967321) == \
        BrokerRegistration(1, "kafka1", 9092, 1617183932000, rack=None, epoch=4294967321,
                           listeners=(("PLAINTEXT", "kafka1", 9092),), protocols=(("PLAINTEXT", "PLAINTEXT"),))


def test_decodes_older_topic_versions_without_topic_id_or_config():
    assert decode_topic("t", b'{"version":1,"partitions":{"0":[1,2],"1":[2,1]}}') == \
        TopicAssignment("t", {0: (1, 2), 1: (2, 1)}, topic_id="", config={})


def test_decodes_a_kafka_controller_znode():
    assert decode_controller(b'{"version":1,"brokerid":2,"timestamp":"1617183932000"}') == \
        ControllerZNode(2, 1617183932000)


# ------------------------------------------------------------------ round trips

@given(BROKER_ID, MS)
def test_controller_round_trips(broker_id, ts):
    assert decode_controller(encode_controller(broker_id, ts)) == ControllerZNode(broker_id, ts)


@given(st.integers(0, 2**31 - 1))
def test_controller_epoch_round_trips(epoch):
    assert decode_controller_epoch(encode_controller_epoch(epoch)) == epoch


@given(BROKER_ID, st.text(min_size=1, max_size=30), st.integers(1, 65535), MS,
       st.none() | st.text(max_size=10), st.integers(-1, 2**62))
def test_broker_round_trips_with_the_czxid_as_epoch(broker_id, host, port, ts, rack, czxid):
    reg = BrokerRegistration(broker_id, host, port, ts, rack=rack, epoch=czxid)
    assert decode_broker(broker_id, encode_broker(reg), czxid) == reg


@given(st.text(min_size=1, max_size=20),
       st.dictionaries(st.integers(0, 5000), st.lists(BROKER_ID, max_size=5).map(tuple), max_size=20),
       st.text(max_size=22))
def test_topic_round_trips(topic, partitions, topic_id):
    a = TopicAssignment(topic, partitions, topic_id=topic_id, config={"cleanup.policy": "compact"})
    b = decode_topic(topic, encode_topic(a))
    assert (b.topic, dict(b.partitions), b.topic_id, dict(b.config)) == (topic, partitions, topic_id, {})


@given(st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=6))
def test_entity_config_round_trips_as_kafkas_config_znode(config):
    data = encode_entity_config(config)
    assert json.loads(data) == {"version": 1, "config": config}
    assert decode_entity_config("/config/topics/t", data) == config


def test_entity_config_values_are_strings_and_a_change_notification_is_version_2():
    assert json.loads(encode_entity_config({"retention.ms": 1000, "preallocate": False})) == {
        "version": 1, "config": {"retention.ms": "1000", "preallocate": "false"}}
    assert decode_entity_config("/config/topics/t", b"") == {}
    assert json.loads(encode_config_change("topics/t")) == {"version": 2, "entity_path": "topics/t"}
    assert decode_config_change("/config/changes/config_change_0000000001",
                                encode_config_change("brokers/<default>")) == "brokers/<default>"
    with pytest.raises(CodecError, match="config_change_0000000001: unsupported"):
        decode_config_change("/config/changes/config_change_0000000001", b'{"version":1,"entity_type":"topics"}')
    with pytest.raises(CodecError, match="not an object of strings"):
        decode_entity_config("/config/topics/t", b'{"version":1,"config":{"retention.ms":1000}}')


@given(st.integers(-1, 2**31 - 1), INT32, st.lists(BROKER_ID, max_size=6).map(tuple), INT32)
def test_partition_state_round_trips(leader, leader_epoch, isr, controller_epoch):
    s = LeaderAndIsr(leader, leader_epoch, isr, controller_epoch)
    assert decode_partition_state(STATE_PATH, encode_partition_state(s)) == s


STATES = st.builds(LeaderAndIsr, st.integers(-1, 2**31 - 1), INT32, st.lists(BROKER_ID, max_size=6).map(tuple),
                   INT32)


@given(st.lists(STATES, max_size=30))
def test_many_partition_states_decode_in_order(states):
    items = [(f"/brokers/topics/t/partitions/{i}/state", encode_partition_state(s)) for i, s in enumerate(states)]
    assert decode_partition_states(items) == states


def state_items(n: int) -> list[tuple[str, bytes]]:
    return [(f"/brokers/topics/t/partitions/{i}/state", encode_partition_state(LeaderAndIsr(i, i, (i,), 1)))
            for i in range(n)]


@pytest.mark.parametrize("bad", [None, b"", b"{", b"[]", b'{"leader":1}', b"1,2",
                                 b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":["1"]}'])
def test_a_malformed_state_among_many_raises_codec_error_naming_its_path(bad):
    items = state_items(4)
    items[2] = (items[2][0], bad)
    with pytest.raises(CodecError, match="^/brokers/topics/t/partitions/2/state: "):
        decode_partition_states(items)


def test_repeated_states_decode_once_each_and_in_place():
    """Thousands of partitions share a few contents: each decodes once, every partition gets its own in order."""
    a, b = LeaderAndIsr(1, 0, (1, 2, 3), 1), LeaderAndIsr(2, 4, (2, 3), 5)
    items = [(f"/brokers/topics/t/partitions/{i}/state", encode_partition_state(a if i % 3 else b)) for i in range(9)]
    assert decode_partition_states(items) == [a if i % 3 else b for i in range(9)]


def test_a_malformed_state_repeated_raises_naming_its_first_path():
    items = state_items(4)
    items[1] = (items[1][0], b'{"leader":1}')
    items[3] = (items[3][0], b'{"leader":1}')
    with pytest.raises(CodecError, match="^/brokers/topics/t/partitions/1/state: "):
        decode_partition_states(items)


def test_a_state_znode_holding_two_json_objects_is_malformed_not_split_across_partitions():
    """The batch decoder joins every znode into one JSON array; a znode whose bytes hold two
    comma-separated objects must not shift its neighbours' states."""
    items = state_items(3)
    two = encode_partition_state(LeaderAndIsr(7, 7, (7,), 1)) + b"," + encode_partition_state(LeaderAndIsr(8, 8, (8,), 1))
    items[0] = (items[0][0], two)
    with pytest.raises(CodecError, match="^/brokers/topics/t/partitions/0/state: "):
        decode_partition_states(items)


# ------------------------------------------------------------------ malformed data -> CodecError naming the znode

NOT_JSON = [b"{", b"\xff\xfe", b"", b"version=1"]
NOT_OBJECT = [b"[]", b"3", b'"x"', b"null", b"true"]


@pytest.mark.parametrize("data", NOT_JSON + NOT_OBJECT + [None])
def test_garbage_raises_codec_error_naming_the_znode(data):
    with pytest.raises(CodecError, match="^/controller:"):
        decode_controller(data)
    with pytest.raises(CodecError, match="^/brokers/ids/4:"):
        decode_broker(4, data)
    with pytest.raises(CodecError, match="^/brokers/topics/orders:"):
        decode_topic("orders", data)
    with pytest.raises(CodecError, match=f"^{STATE_PATH}:"):
        decode_partition_state(STATE_PATH, data)


@pytest.mark.parametrize("data", [None, b"", b"x", b"1.5", b"\xff", b"[1]"])
def test_a_bad_controller_epoch_raises_codec_error(data):
    with pytest.raises(CodecError, match="^/controller_epoch:"):
        decode_controller_epoch(data)


@pytest.mark.parametrize("obj, field", [
    ({"version": 1, "timestamp": "1"}, "brokerid"),
    ({"version": 1, "brokerid": "2"}, "brokerid"),
    ({"version": 1, "brokerid": True}, "brokerid"),
    ({"version": 1, "brokerid": 2.0}, "brokerid"),
])
def test_controller_missing_or_mistyped_field(obj, field):
    with pytest.raises(CodecError, match=f"^/controller: .*'{field}'"):
        decode_controller(json.dumps(obj).encode())


@pytest.mark.parametrize("obj, field", [
    ({"port": 9092}, "host"),
    ({"host": "h"}, "port"),
    ({"host": 5, "port": 9092}, "host"),
    ({"host": "h", "port": "9092"}, "port"),
    ({"host": "h", "port": False}, "port"),
])
def test_broker_missing_or_mistyped_field(obj, field):
    with pytest.raises(CodecError, match=f"^/brokers/ids/4: .*'{field}'"):
        decode_broker(4, json.dumps(obj).encode())


@pytest.mark.parametrize("obj", [
    {"version": 1, "leader_epoch": 0, "controller_epoch": 1, "isr": [1]},
    {"version": 1, "leader": 1, "controller_epoch": 1, "isr": [1]},
    {"version": 1, "leader": 1, "leader_epoch": 0, "isr": [1]},
    {"version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 1},
    {"version": 1, "leader": "1", "leader_epoch": 0, "controller_epoch": 1, "isr": [1]},
    {"version": 1, "leader": 1, "leader_epoch": None, "controller_epoch": 1, "isr": [1]},
    {"version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": True, "isr": [1]},
    {"version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 1, "isr": "1"},
    {"version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 1, "isr": {"1": 1}},
    {"version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 1, "isr": [1, "2"]},
    {"version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 1, "isr": [1, 2.5]},
    {"version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 1, "isr": [1, None]},
    {"version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 1, "isr": [1, True]},
])
def test_partition_state_missing_or_mistyped_field(obj):
    with pytest.raises(CodecError, match=f"^{STATE_PATH}: "):
        decode_partition_state(STATE_PATH, json.dumps(obj).encode())


@pytest.mark.parametrize("partitions", [
    {"-1": [1]},
    {"x": [1]},
    {"1.5": [1]},
    {"": [1]},
    {" 1": [1]},
    {"\u00b2": [1]},     # a superscript two: str.isdigit() is True but int() refuses it
    {"0": "1,2"},
    {"0": [1, "2"]},
    {"0": [1, None]},
    {"0": [1, True]},
    {"0": {"0": 1}},
])
def test_topic_bad_partition_entries(partitions):
    with pytest.raises(CodecError, match="^/brokers/topics/orders: bad partition entry"):
        decode_topic("orders", json.dumps({"version": 3, "partitions": partitions}).encode())


@pytest.mark.parametrize("obj, message", [
    ({"version": 3}, "missing field 'partitions'"),
    ({"version": 3, "partitions": [[1, 2]]}, "field 'partitions' has type list"),
])
def test_topic_missing_or_mistyped_fields(obj, message):
    with pytest.raises(CodecError, match=f"^/brokers/topics/orders: {message}"):
        decode_topic("orders", json.dumps(obj).encode())


@pytest.mark.parametrize("timestamp", ["\u00b2", "\u0663", "12\u00b3"])
def test_an_odd_timestamp_never_escapes_as_a_bare_value_error(timestamp):
    """Timestamps are informational and parsed leniently, but a malformed one must not
    surface as anything other than a decoded value or a CodecError."""
    for decode in (lambda d: decode_controller(d), lambda d: decode_broker(1, d)):
        data = json.dumps({"brokerid": 1, "host": "h", "port": 1, "timestamp": timestamp}).encode()
        try:
            decode(data)
        except CodecError:
            pass


def test_codec_error_is_a_value_error():
    assert issubclass(CodecError, ValueError)


def test_state_contents_decode_each_distinct_content_once_and_flag_the_rest():
    a, b = LeaderAndIsr(1, 0, (1, 2, 3), 1), LeaderAndIsr(2, 4, (2, 3), 5)
    ea, eb = encode_partition_state(a), encode_partition_state(b)
    assert decode_state_contents([ea, eb, ea, b'{"leader":1}', None]) == {ea: a, eb: b, b'{"leader":1}': None,
                                                                          None: None}
    assert decode_state_contents([ea, b"{"]) == {}, "not JSON: the caller decodes one at a time"
    assert decode_state_contents([]) == {}
