"""Tests for node.config: schema, validation, combinations, round-trips."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from node.config import (SCHEMA, BrokerSpec, ClusterConfig, ConfigError, default_config,
                         describe_schema, load_config, parse_config)

REPO = Path(__file__).resolve().parent.parent
BROKERS3 = [{"id": i, "port": 19090 + i} for i in (1, 2, 3)]


def cfg(**extra):
    """A valid 3-broker mapping with dotted ``extra`` keys (pass via dict(**{...}))."""
    data = {"brokers": [dict(b) for b in BROKERS3]}
    data.update(extra)
    return data


def fails(data, *keys, source="<config>"):
    """parse_config(data) must raise ConfigError naming every key in ``keys``."""
    with pytest.raises(ConfigError) as info:
        parse_config(data, source=source, base_dir=Path("/tmp"))
    msg = str(info.value)
    assert msg.startswith(source), msg
    for key in keys:
        assert key in msg, f"{key!r} not in {msg!r}"
    return msg


def write(tmp_path: Path, text: str, name: str = "cluster.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- the repo's cluster.yaml and defaults ------------------------------------------------

def test_repo_cluster_yaml_loads():
    c = load_config(REPO / "cluster.yaml")
    assert [b.id for b in c.brokers] == [1, 2, 3]
    assert [b.port for b in c.brokers] == [19091, 19092, 19093]
    assert all(b.host == "127.0.0.1" for b in c.brokers)
    assert c.embedded and c.zookeeper_connect is None
    assert c.get("offsets.topic.num.partitions") == 50
    assert c.get("offsets.topic.replication.factor") == 3
    assert c.run_dir == REPO / "run"
    assert c.broker(2).log_dir == REPO / "run" / "data" / "broker-2"
    assert c == default_config(run_dir=REPO / "run")


def test_repo_cluster_yaml_uses_only_schema_keys():
    data = yaml.safe_load((REPO / "cluster.yaml").read_text())
    assert set(data) - {"brokers"} <= set(SCHEMA)


def test_defaults_applied():
    c = parse_config(cfg(), base_dir=Path("/srv/lab"))
    assert set(c.settings) == set(SCHEMA)
    for name, spec in SCHEMA.items():
        if name != "run.dir":
            assert c.get(name) == spec.default, name
    assert c.get("zookeeper.session.timeout.ms") == 6000
    assert SCHEMA["zookeeper.session.timeout.ms"].kafka_default == 18000
    assert c.session_timeout_ms == 6000 and c.connection_timeout_ms == 6000
    assert c.get("controlled.shutdown.enable") is True
    assert c.get("unclean.leader.election.enable") is False
    assert c.get("kafkasim.controller.metadata.resend.interval.ms") == 2000
    assert c.run_dir == Path("/srv/lab/run")
    assert c.brokers[0] == BrokerSpec(1, "127.0.0.1", 19091, None, Path("/srv/lab/run/data/broker-1"))
    assert c.source == "<config>"


def test_settings_read_only():
    c = default_config()
    with pytest.raises(TypeError):
        c.settings["num.partitions"] = 3  # type: ignore[index]


def test_get_unknown_key_raises_keyerror_naming_it():
    with pytest.raises(KeyError) as info:
        default_config().get("num.partition")
    assert "num.partition" in str(info.value) and "num.partitions" in str(info.value)


def test_broker_lookup():
    c = default_config()
    assert c.broker(3).port == 19093
    with pytest.raises(ConfigError) as info:
        c.broker(7)
    assert "brokers" in str(info.value) and "7" in str(info.value)


def test_explicit_values_and_paths(tmp_path):
    path = write(tmp_path, """
run.dir: work
zookeeper.connection.timeout.ms: 9000
min.insync.replicas: 2
brokers:
  - {id: 0, host: 10.0.0.1, port: 9092, rack: r1, log.dirs: /data/b0}
  - {id: 5, port: 9093, log.dirs: logs/b5}
  - {id: 6, port: 9094}
""")
    c = load_config(path)
    assert c.source == str(path)
    assert c.run_dir == tmp_path / "work"
    assert c.connection_timeout_ms == 9000
    assert c.broker(0) == BrokerSpec(0, "10.0.0.1", 9092, "r1", Path("/data/b0"))
    assert c.broker(5).log_dir == tmp_path / "logs" / "b5"
    assert c.broker(6).log_dir == tmp_path / "work" / "data" / "broker-6"


# --- unknown keys ---------------------------------------------------------------------------

def test_mistyped_top_level_key_suggests_closest(tmp_path):
    path = write(tmp_path, "zookeeper.sesion.timeout.ms: 9000\nbrokers: [{id: 1, port: 19091}]\n"
                           "offsets.topic.replication.factor: 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    msg = str(info.value)
    assert msg.startswith(str(path))
    assert "zookeeper.sesion.timeout.ms" in msg
    assert "did you mean 'zookeeper.session.timeout.ms'" in msg
    assert info.value.keys == ("zookeeper.sesion.timeout.ms",)


def test_unknown_key_without_close_match():
    msg = fails(cfg(**{"topic.defaults": {"x": 1}}), "topic.defaults")
    assert "unknown key" in msg


def test_underscored_key_suggests_dotted():
    fails(cfg(num_partitions=3), "num_partitions", "'num.partitions'")


def test_nested_mapping_key_hints_flat_keys():
    msg = fails(cfg(zookeeper={"connect": "zk:2181"}), "zookeeper")
    assert "flat" in msg


def test_per_broker_key_at_top_level():
    fails(cfg(**{"broker.id": 1}), "broker.id", "brokers")


def test_unknown_key_inside_broker_entry():
    data = cfg()
    data["brokers"][1] = {"id": 2, "prot": 19092}
    msg = fails(data, "brokers[1].prot", "'port'", "brokers[1].port")
    assert "required" in msg


def test_kafka_alias_inside_broker_entry():
    data = cfg()
    data["brokers"][0]["broker.id"] = 1
    fails(data, "brokers[0].broker.id", "'id'")


def test_all_problems_reported_together():
    with pytest.raises(ConfigError) as info:
        parse_config(cfg(**{"num.partitions": "3", "delete.topic.enable": 1, "bogus.key": 1}))
    assert set(info.value.keys) == {"num.partitions", "delete.topic.enable", "bogus.key"}
    assert all(line.startswith("<config>: ") for line in str(info.value).splitlines())


# --- types ---------------------------------------------------------------------------------

@pytest.mark.parametrize("key, value", [
    ("zookeeper.session.timeout.ms", "6000"),      # string for an int
    ("offsets.topic.num.partitions", 50.0),        # float for an int
    ("num.partitions", True),                      # bool for an int
    ("delete.topic.enable", 1),                    # int for a bool
    ("controlled.shutdown.enable", "yes"),         # string for a bool
    ("auto.leader.rebalance.enable", None),        # null for a non-nullable bool
    ("run.dir", 5),                                # int for a string
    ("zookeeper.connect", 2181),                   # int for a nullable string
    ("zookeeper.embedded.port", "2181"),           # string for a nullable int
])
def test_wrong_type(key, value):
    msg = fails(cfg(**{key: value}), key)
    assert "expected" in msg


@pytest.mark.parametrize("entry, key", [
    ({"id": "1", "port": 19091}, "brokers[0].id"),
    ({"id": 1, "port": "19091"}, "brokers[0].port"),
    ({"id": True, "port": 19091}, "brokers[0].id"),
    ({"id": 1, "port": 19091, "host": 127}, "brokers[0].host"),
    ({"id": 1, "port": 19091, "rack": 1}, "brokers[0].rack"),
    ({"id": 1, "port": 19091, "log.dirs": ["/a"]}, "brokers[0].log.dirs"),
    ({"port": 19091}, "brokers[0].id"),
])
def test_wrong_broker_entry(entry, key):
    fails({"offsets.topic.replication.factor": 1, "brokers": [entry]}, key)


@pytest.mark.parametrize("brokers", [None, [], {"id": 1, "port": 1}, "1,2,3", [5]])
def test_bad_brokers_list(brokers):
    data = {"offsets.topic.replication.factor": 1}
    if brokers is not None:
        data["brokers"] = brokers
    fails(data, "brokers")


def test_yaml_booleans_accepted_but_quoted_ones_not(tmp_path):
    ok = write(tmp_path, "delete.topic.enable: false\nbrokers: [{id: 1, port: 1}]\n"
                         "offsets.topic.replication.factor: 1\n")
    assert load_config(ok).get("delete.topic.enable") is False
    bad = write(tmp_path, "delete.topic.enable: 'false'\nbrokers: [{id: 1, port: 1}]\n"
                          "offsets.topic.replication.factor: 1\n", "bad.yaml")
    with pytest.raises(ConfigError, match="delete.topic.enable"):
        load_config(bad)


# --- ranges -------------------------------------------------------------------------------

@pytest.mark.parametrize("key, value", [
    ("zookeeper.session.timeout.ms", 0),
    ("zookeeper.session.timeout.ms", -5),
    ("zookeeper.connection.timeout.ms", 0),
    ("zookeeper.embedded.servers", 2),
    ("zookeeper.embedded.servers", 5),
    ("zookeeper.embedded.port", 0),
    ("zookeeper.embedded.port", 65536),
    ("offsets.topic.num.partitions", 0),
    ("offsets.commit.required.acks", 0),
    ("offsets.commit.required.acks", 2),
    ("min.insync.replicas", 0),
    ("leader.imbalance.per.broker.percentage", -1),
    ("leader.imbalance.per.broker.percentage", 101),
    ("kafkasim.controller.metadata.resend.interval.ms", -1),
    ("replica.fetch.max.bytes", 0),
    ("log.segment.bytes", 10),
    ("run.dir", "  "),
])
def test_out_of_range(key, value):
    msg = fails(cfg(**{key: value}), key)
    assert repr(value) in msg or "empty" in msg


@pytest.mark.parametrize("key, value", [
    ("offsets.commit.required.acks", 1),
    ("leader.imbalance.per.broker.percentage", 0),
    ("leader.imbalance.per.broker.percentage", 100),
    ("kafkasim.controller.metadata.resend.interval.ms", 0),
    ("group.initial.rebalance.delay.ms", 0),
    ("zookeeper.embedded.servers", 3),
    ("zookeeper.embedded.port", 65535),
    ("min.insync.replicas", 3),
])
def test_in_range_edges(key, value):
    assert parse_config(cfg(**{key: value})).get(key) == value


@pytest.mark.parametrize("port", [0, 65536, -1])
def test_broker_port_out_of_range(port):
    data = cfg()
    data["brokers"][2]["port"] = port
    fails(data, "brokers[2].port")


def test_broker_id_negative():
    data = cfg()
    data["brokers"][0]["id"] = -1
    fails(data, "brokers[0].id")


# --- combinations -------------------------------------------------------------------------

def test_offsets_rf_above_broker_count():
    msg = fails({"brokers": [{"id": 1, "port": 19091}]}, "offsets.topic.replication.factor", "brokers")
    assert "3" in msg and "1" in msg


def test_default_rf_above_broker_count():
    fails(cfg(**{"default.replication.factor": 4}), "default.replication.factor", "brokers")


def test_min_isr_above_offsets_rf_is_allowed():
    assert parse_config(cfg(**{"min.insync.replicas": 5})).get("min.insync.replicas") == 5


def test_duplicate_broker_ids():
    data = cfg()
    data["brokers"][2]["id"] = 1
    msg = fails(data, "brokers[2].id", "brokers[0].id")
    assert "duplicate broker id 1" in msg


def test_duplicate_host_port():
    data = cfg()
    data["brokers"][1]["port"] = 19091
    fails(data, "brokers[1].port", "127.0.0.1:19091", "brokers[0]")


def test_same_port_on_different_hosts_is_allowed():
    data = cfg()
    for i, b in enumerate(data["brokers"]):
        b.update(host=f"10.0.0.{i + 1}", port=9092)
    assert {b.port for b in parse_config(data).brokers} == {9092}


def test_duplicate_log_dirs():
    data = cfg()
    data["brokers"][0]["log.dirs"] = "/data/x"
    data["brokers"][1]["log.dirs"] = "/data/x"
    fails(data, "brokers[1].log.dirs")


def test_log_dirs_list():
    """Kafka's comma-separated log.dirs: every directory, in order; the first is ``log_dir``."""
    data = cfg()
    data["brokers"][0]["log.dirs"] = "/a, /b,/c"
    b = parse_config(data).brokers[0]
    assert b.log_dirs == (Path("/a"), Path("/b"), Path("/c")) and b.log_dir == Path("/a")
    for bad in ("/a,,/b", "/a,/a", "/a,"):
        data["brokers"][0]["log.dirs"] = bad
        fails(data, "brokers[0].log.dirs")
    data["brokers"][0]["log.dirs"] = "/a,/b"
    data["brokers"][1]["log.dirs"] = "/c,/b"   # a directory shared by two brokers
    fails(data, "brokers[1].log.dirs")


def test_session_timeout_below_two_ticks_when_embedded():
    fails(cfg(**{"zookeeper.session.timeout.ms": 300, "zookeeper.embedded.tick.time.ms": 200}),
          "zookeeper.session.timeout.ms", "zookeeper.embedded.tick.time.ms")
    # exactly two ticks is fine, and with an external ZooKeeper the tick is irrelevant
    parse_config(cfg(**{"zookeeper.session.timeout.ms": 400}))
    parse_config(cfg(**{"zookeeper.session.timeout.ms": 300, "zookeeper.connect": "zk:2181"}))


def test_group_min_session_above_max():
    fails(cfg(**{"group.min.session.timeout.ms": 10000, "group.max.session.timeout.ms": 9000}),
          "group.min.session.timeout.ms", "group.max.session.timeout.ms")


def test_replica_fetch_wait_above_lag_time():
    fails(cfg(**{"replica.fetch.wait.max.ms": 20000}), "replica.fetch.wait.max.ms", "replica.lag.time.max.ms")


def test_embedded_port_clashing_with_broker_port():
    fails(cfg(**{"zookeeper.embedded.port": 19092}), "zookeeper.embedded.port")


# --- zookeeper.connect ----------------------------------------------------------------------

@pytest.mark.parametrize("value", [
    "localhost",                 # no port
    "localhost:",                # empty port
    ":2181",                     # empty host
    "localhost:abc",             # non-numeric port
    "localhost:0",               # port out of range
    "localhost:70000",           # port out of range
    "a:2181,,b:2181",            # empty entry
    "a:2181,b",                  # second entry without port
    "localhost:2181/",           # chroot is just '/'
    "localhost:2181/kafka/",     # chroot ends with '/'
    "localhost:2181/ka//fka",    # empty path element
    "/kafka",                    # chroot only
    "",                          # empty
    "local host:2181",           # whitespace in host
])
def test_malformed_zookeeper_connect(value):
    fails(cfg(**{"zookeeper.connect": value}), "zookeeper.connect")


@pytest.mark.parametrize("value, chroot", [
    ("zk1:2181", None),
    ("zk1:2181,zk2:2182,10.0.0.3:2183/kafka/lab", "/kafka/lab"),
    ("127.0.0.1:2181/kafkasim", "/kafkasim"),
])
def test_valid_zookeeper_connect(value, chroot):
    c = parse_config(cfg(**{"zookeeper.connect": value}))
    assert c.zookeeper_connect == value
    assert not c.embedded
    assert (("/" + value.split("/", 1)[1]) if "/" in value else None) == chroot


# --- files and YAML -----------------------------------------------------------------------

def test_invalid_yaml_reports_line_number(tmp_path):
    path = write(tmp_path, "num.partitions: 3\nbrokers:\n  - {id: 1, port: 19091\nfoo: [\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    msg = str(info.value)
    assert msg.startswith(str(path)) and "line " in msg and "invalid YAML" in msg


def test_invalid_yaml_exact_line(tmp_path):
    path = write(tmp_path, "num.partitions: 3\nbrokers: [\n  {id: 1, port: 1}\n\tbad: tab\n")
    with pytest.raises(ConfigError, match=r"line [34]"):
        load_config(path)


def test_duplicate_yaml_key_is_an_error(tmp_path):
    path = write(tmp_path, "num.partitions: 3\nbrokers: [{id: 1, port: 1}]\nnum.partitions: 4\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    msg = str(info.value)
    assert "num.partitions" in msg and "line 3" in msg and "duplicate" in msg


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(str(path)) and "not found" in str(info.value)


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_top_level_not_a_mapping(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match="mapping") as info:
        load_config(path)
    assert str(info.value).startswith(str(path))


def test_empty_file_requires_brokers(tmp_path):
    with pytest.raises(ConfigError, match="brokers"):
        load_config(write(tmp_path, "# nothing\n"))


# --- round-trips and derived configs ---------------------------------------------------------

def test_to_yaml_round_trips(tmp_path):
    src = write(tmp_path, """
run.dir: rel/run
zookeeper.connect: zk1:2181,zk2:2181/lab
group.initial.rebalance.delay.ms: 0
min.insync.replicas: 2
brokers:
  - {id: 1, port: 19091, rack: a}
  - {id: 2, port: 19092, rack: b, log.dirs: disks/two}
  - {id: 3, host: localhost, port: 19093, log.dirs: "d/3a,d/3b"}
""")
    c = load_config(src)
    other = tmp_path / "elsewhere"
    other.mkdir()
    again = load_config(write(other, c.to_yaml()))
    assert again == c
    assert again.run_dir == tmp_path / "rel" / "run"
    assert again.broker(2).log_dir == tmp_path / "disks" / "two"
    assert again.broker(3).log_dirs == (tmp_path / "d" / "3a", tmp_path / "d" / "3b")
    assert dict(again.settings) == dict(c.settings)


def test_to_yaml_round_trips_repo_config(tmp_path):
    c = load_config(REPO / "cluster.yaml")
    assert load_config(write(tmp_path, c.to_yaml())) == c


def test_with_settings_and_overrides():
    c = default_config()
    d = c.with_settings({"zookeeper.session.timeout.ms": 9000, "zookeeper.connect": "zk:2181/k"})
    assert d.session_timeout_ms == 9000 and d.zookeeper_connect == "zk:2181/k" and not d.embedded
    assert c.session_timeout_ms == 6000  # original untouched
    e = c.with_overrides(zookeeper_session_timeout_ms=9000, zookeeper_connect="zk:2181/k")
    assert e == d
    assert d.with_settings({"zookeeper.connect": None}).embedded  # None resets to the default


def test_with_settings_revalidates():
    c = default_config()
    with pytest.raises(ConfigError, match="num.partitions"):
        c.with_settings({"num.partitions": 0})
    with pytest.raises(ConfigError, match="offsets.topic.replication.factor"):
        c.with_settings({"offsets.topic.replication.factor": 4})
    with pytest.raises(ConfigError, match="did you mean 'num.partitions'"):
        c.with_settings({"num.partition": 2})
    with pytest.raises(ConfigError, match="zookeeper.connect"):
        c.with_settings({"zookeeper.connect": "zk"})


def test_with_overrides_unknown_key():
    with pytest.raises(ConfigError) as info:
        default_config().with_overrides(zookeeper_sesion_timeout_ms=1)
    assert "zookeeper_sesion_timeout_ms" in str(info.value)
    assert "zookeeper_session_timeout_ms" in str(info.value)


def test_with_brokers():
    c = default_config()
    five = c.with_brokers(5)
    assert [b.id for b in five.brokers] == [1, 2, 3, 4, 5]
    assert [b.port for b in five.brokers] == list(range(19091, 19096))
    moved = c.with_brokers(3, base_port=29000, host="localhost")
    assert [(b.host, b.port) for b in moved.brokers] == [("localhost", 29000 + i) for i in range(3)]
    assert moved.with_brokers(4).brokers[3].port == 29003  # keeps the first port
    assert isinstance(five, ClusterConfig) and five.get("num.partitions") == 1


def test_with_brokers_revalidates():
    c = default_config()
    with pytest.raises(ConfigError, match="offsets.topic.replication.factor"):
        c.with_brokers(2)
    with pytest.raises(ConfigError, match=r"brokers\[1\]\.port"):
        c.with_brokers(3, base_port=65535)
    with pytest.raises(ConfigError, match="brokers"):
        c.with_brokers(0)
    one = c.with_settings({"offsets.topic.replication.factor": 1}).with_brokers(1)
    assert len(one.brokers) == 1


def test_default_config():
    c = default_config()
    assert len(c.brokers) == 3 and c.get("offsets.topic.replication.factor") == 3
    one = default_config(brokers=1, base_port=30000, run_dir="/tmp/x")
    assert one.get("offsets.topic.replication.factor") == 1
    assert one.brokers == (BrokerSpec(1, "127.0.0.1", 30000, None, Path("/tmp/x/data/broker-1")),)
    with pytest.raises(ConfigError, match="brokers"):
        default_config(brokers=0)


def test_describe_schema_lists_every_key():
    text = describe_schema()
    for name in SCHEMA:
        assert f"`{name}`" in text
    for name in ("id", "host", "port", "rack", "log.dirs"):
        assert f"`{name}`" in text
    assert "`18000`" in text  # Kafka's session timeout default
    assert text.startswith("| Key |")


def test_path_objects_accepted_for_path_keys(tmp_path):
    c = default_config().with_settings({"run.dir": tmp_path / "r"})
    assert c.run_dir == tmp_path / "r"
    c = c.with_settings({"offsets.topic.replication.factor": 1,
                         "brokers": [{"id": 1, "port": 19091, "log.dirs": tmp_path / "d"}]})
    assert c.broker(1).log_dir == tmp_path / "d"
    assert load_config(write(tmp_path, c.to_yaml())) == c


def test_config_error_is_a_value_error():
    with pytest.raises(ValueError) as info:
        parse_config(cfg(**{"num.partitions": -1}))
    assert isinstance(info.value, ConfigError) and info.value.keys == ("num.partitions",)
    assert info.value.source == "<config>"


def test_the_create_grace_is_an_error_when_the_offsets_topic_is_created_lazily():
    """No key is accepted and then ignored: the controller's grace period means nothing when it creates nothing."""
    lazy = {"kafkasim.offsets.topic.eager.create": False}
    grace = "kafkasim.offsets.topic.create.grace.ms"
    msg = fails(cfg(**lazy, **{grace: 100}), grace)
    assert "kafkasim.offsets.topic.eager.create" in msg
    assert parse_config(cfg(**lazy), base_dir=Path("/tmp")).get("kafkasim.offsets.topic.eager.create") is False
    assert parse_config(cfg(**{grace: 100}), base_dir=Path("/tmp")).get(grace) == 100


# ---------------------------------------------------------------- no key accepted and ignored

def test_a_kafka_key_kafkasim_does_not_implement_is_an_error_naming_it():
    msg = fails(cfg(**{"ssl.keystore.location": "/k.jks"}), "ssl.keystore.location")
    assert "not supported" in msg and "PLAINTEXT" in msg


def test_topic_configs_fall_back_to_the_broker_keys_kafka_names():
    from kafkacommon.topic_config import TOPIC_KEYS, log_config
    c = parse_config(cfg(**{"log.retention.ms": 1000, "log.roll.ms": 2000, "log.index.interval.bytes": 64,
                            "message.max.bytes": 500, "log.retention.bytes": 9999, "log.segment.bytes": 4096}))
    lc = log_config({}, c.get)
    assert (lc.retention_ms, lc.segment_ms, lc.index_interval_bytes, lc.max_message_bytes, lc.retention_bytes,
            lc.segment_bytes, lc.cleanup_policy) == (1000, 2000, 64, 500, 9999, 4096, "delete")
    lc = log_config({"retention.ms": "5", "segment.ms": 7, "index.interval.bytes": "0", "max.message.bytes": "10",
                     "cleanup.policy": "delete,compact"}, c.get)
    assert (lc.retention_ms, lc.segment_ms, lc.index_interval_bytes, lc.max_message_bytes) == (5, 7, 0, 10)
    assert lc.delete and lc.compact
    with pytest.raises(ValueError, match="segment.mss"):
        log_config({"segment.mss": "1"}, c.get)
    # every topic key's broker default is a cluster.yaml key
    assert all(k.broker_key in SCHEMA for k in TOPIC_KEYS.values() if k.broker_key)


def test_topic_config_parsing_names_the_key():
    from zk.admin import TopicError, parse_configs
    # stored as given (strings), each checked as Kafka's LogConfig checks it
    assert parse_configs(["segment.ms=100", "retention.bytes=-1", "index.interval.bytes=10"]) == {
        "segment.ms": "100", "retention.bytes": "-1", "index.interval.bytes": "10"}
    with pytest.raises(TopicError, match="Invalid value -2 for configuration retention.ms: Value must be at least -1"):
        parse_configs(["retention.ms=-2"])
    with pytest.raises(TopicError, match="Unknown topic config name: segment.mss"):
        parse_configs(["segment.mss=1"])


# ---------------------------------------------------------------- the Kafka listener

def test_kafka_listeners_default_and_explicit():
    data = cfg()
    data["brokers"][1]["listeners"] = "PLAINTEXT://127.0.0.1:9093"
    data["brokers"][1]["advertised.listeners"] = "PLAINTEXT://kafka-2.example:9092"
    b1, b2, _ = parse_config(data).brokers
    assert (b1.kafka_listener, b1.kafka_advertised) == ((b1.host, b1.port + 10000),) * 2
    assert (b2.kafka_listener, b2.kafka_advertised) == (("127.0.0.1", 9093), ("kafka-2.example", 9092))
    again = parse_config(yaml.safe_load(parse_config(data).to_yaml()))
    assert again.brokers[1].kafka_advertised == ("kafka-2.example", 9092)


@pytest.mark.parametrize("value", ["SSL://h:1", "PLAINTEXT://h", "h:9092", "PLAINTEXT://h:0",
                                   "PLAINTEXT://a:1,PLAINTEXT://b:2", "PLAINTEXT://:9092"])
def test_bad_kafka_listeners_are_errors_naming_the_key(value):
    for key in ("listeners", "advertised.listeners"):
        data = cfg()
        data["brokers"][0][key] = value
        fails(data, f"brokers[0].{key}")


def test_named_listeners_answer_each_with_its_own_advertised_address():
    """Kafka's two-listener lab set-up: INTERNAL for a container network, EXTERNAL for the host."""
    data = cfg(**{"listener.security.protocol.map": "INTERNAL:PLAINTEXT,external:PLAINTEXT"})
    data["brokers"][0]["listeners"] = "INTERNAL://0.0.0.0:19091,external://0.0.0.0:29091"
    data["brokers"][0]["advertised.listeners"] = "INTERNAL://broker1:19091,EXTERNAL://127.0.0.1:29091"
    b1 = parse_config(data).brokers[0]
    assert b1.kafka_listeners == (("INTERNAL", "0.0.0.0", 19091), ("EXTERNAL", "0.0.0.0", 29091))
    assert b1.advertised_on("INTERNAL") == ("broker1", 19091) and b1.advertised_on("EXTERNAL") == ("127.0.0.1", 29091)
    assert b1.advertised_on("PLAINTEXT") is None and b1.kafka_advertised == ("broker1", 19091)
    assert parse_config(yaml.safe_load(parse_config(data).to_yaml())).brokers[0] == b1
    bad = {"INTERNAL://0.0.0.0:19091": "no security protocol",                       # not in the map (default)
           "PLAINTEXT://0.0.0.0:19091,PLAINTEXT://0.0.0.0:19092": "appears twice"}
    for value, why in bad.items():
        data = cfg()
        data["brokers"][0]["listeners"] = value
        with pytest.raises(ConfigError, match=why):
            parse_config(data)
    data = cfg()
    data["brokers"][0]["advertised.listeners"] = "OTHER://h:1"
    data["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"
    with pytest.raises(ConfigError, match="brokers\\[0\\].advertised.listeners: advertises OTHER"):
        parse_config(data)
    for value in ("PLAINTEXT:SSL", "PLAINTEXT", "A:PLAINTEXT,a:PLAINTEXT"):
        with pytest.raises(ConfigError, match="listener.security.protocol.map"):
            parse_config(cfg(**{"listener.security.protocol.map": value}))
    data = cfg()                                      # two listeners of one broker on one port
    data["listener.security.protocol.map"] = "A:PLAINTEXT,B:PLAINTEXT"
    data["brokers"][0]["listeners"] = "A://127.0.0.1:39001,B://127.0.0.1:39001"
    fails(data, "brokers[0].listeners")


def test_a_kafka_listener_on_a_taken_port_is_an_error():
    data = cfg()
    data["brokers"][0]["listeners"] = f"PLAINTEXT://127.0.0.1:{data['brokers'][1]['port']}"
    fails(data, "brokers[0].listeners")
    data = cfg()
    data["brokers"][0]["port"] = 60000                       # port + 10000 does not fit: port - 10000
    assert parse_config(data).brokers[0].kafka_listener == ("127.0.0.1", 50000)


def test_top_level_listeners_points_to_the_broker_entry():
    with pytest.raises(ConfigError, match="set it per broker as 'listeners'"):
        parse_config(cfg(listeners="PLAINTEXT://127.0.0.1:9092"))


def test_kip841_is_a_named_key_off_by_default_and_reaches_both_cores():
    """Kafka 3.3's KIP-841 eligibility rules are opt-in: the default is Kafka 2.8's behaviour."""
    from node.server.settings import controller_settings, replica_settings
    c = parse_config(cfg(), base_dir=Path("/tmp"))
    assert SCHEMA["kafkasim.isr.kip841.enable"].extension and c.get("kafkasim.isr.kip841.enable") is False
    assert not controller_settings(c, 1).kip841_enable and not replica_settings(c).kip841
    on = parse_config(cfg(**{"kafkasim.isr.kip841.enable": True}), base_dir=Path("/tmp"))
    assert controller_settings(on, 1).kip841_enable and replica_settings(on).kip841
    fails(cfg(**{"kafkasim.isr.kip841.enable": "yes"}), "kafkasim.isr.kip841.enable")
