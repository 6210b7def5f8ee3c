"""The admin APIs' rules, in-process: the controller's new partitions and config-driven elections, Kafka 2.8's
assignment checks, the 26 topic configs' validation, IncrementalAlterConfigs' operations, dynamic broker
configs, and the change notifications' order."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from controller.core import LeaderAndIsrCmd, UpdateMetadataCmd
from kafkacommon import errors
from kafkacommon.assignment import AssignmentError, check_new_topic_assignment, new_partitions_assignment
from kafkacommon.metadata import TopicAssignment
from kafkacommon.topic_config import (TOPIC_KEYS, ConfigConflict, ConfigRefused, ConfigValueError, UnknownTopicConfig,
                                      log_config, to_string, validate)
from listener.configs import APPEND, DELETE, SET, SUBTRACT, ResourceError, _topic_list_default, apply_ops
from tests.test_controller_core import apply, brokers, event, las, started, writes_by_tp
from zk import rules


# ---------------------------------------------------------------------- the controller

def test_partitions_added_to_a_topic_znode_get_their_first_leaders_and_nothing_else_changes():
    core = started({"t": {0: (1, 2), 1: (2, 3)}}, {("t", 0): (las(1, 3, (1, 2)), 4), ("t", 1): (las(2, 3, (2, 3)), 4)},
                   brokers(1, 2, 3))
    # the admin rewrote the whole assignment; an existing partition's replicas come from the context
    plan = core.on_topics_change({"t": TopicAssignment("t", {0: (3, 1), 1: (2, 3), 2: (3, 1), 3: (1, 2)})})
    w = writes_by_tp(plan)
    assert sorted(w) == [("t", 2), ("t", 3)]
    assert w[("t", 2)].state == las(3, 0, (3, 1)) and w[("t", 2)].zk_version is None
    assert w[("t", 2)].reason == "new_partition"
    assert event(plan, "partitions_added") == [{"topic": "t", "partitions": [2, 3], "replicas": {
        "2": [3, 1], "3": [1, 2]}, "partition_count": 4}]
    requests = apply(core, plan)
    lai = [c for c in requests[3] if isinstance(c, LeaderAndIsrCmd)][0]
    assert [(v.partition, v.is_new) for v in lai.partitions] == [(2, True)]
    assert all(any(isinstance(c, UpdateMetadataCmd) for c in requests[b]) for b in (1, 2, 3))
    assert core.topics["t"].partitions[0] == (1, 2)
    assert core.on_topics_change({"t": core.topics["t"]}).writes == []   # the same znode again: nothing


def test_a_partition_added_with_no_live_replica_stays_offline():
    core = started({"t": {0: (1,)}}, {("t", 0): (las(1, 0, (1,)), 0)}, brokers(1, 2))
    plan = core.on_topics_change({"t": TopicAssignment("t", {0: (1,), 1: (9,)})})
    assert plan.writes == [] and event(plan, "partition_offline")[0]["partition"] == 1


@pytest.mark.parametrize("where", ["topic", "default", "broker"])
def test_unclean_election_newly_allowed_by_a_config_change_happens_at_once(where):
    core = started({"t": {0: (1, 2)}}, {("t", 0): (las(1, 4, (1,)), 6)}, brokers(1, 2))
    offline = core.on_broker_change(brokers(2))
    apply(core, offline)
    assert state_of_leader(core) == -1
    topic = TopicAssignment("t", {0: (1, 2)}, config={"unclean.leader.election.enable": "true"} if where == "topic"
                            else {})
    dynamic = {"<default>": {"unclean.leader.election.enable": "true"}} if where == "default" else \
        {"1": {"unclean.leader.election.enable": "true"}} if where == "broker" else {}
    plan = core.on_topics_change({"t": topic}, dynamic)
    w = writes_by_tp(plan)[("t", 0)]
    assert (w.state.leader, w.reason) == (2, "unclean_election")


def state_of_leader(core) -> int:
    return core.states[("t", 0)][0].leader


# ---------------------------------------------------------------------- assignments (AdminZkClient 2.8.2)

def test_a_manual_topic_assignment_is_checked_as_kafka_checks_it():
    check_new_topic_assignment({0: (1, 2), 1: (2, 3)})
    check_new_topic_assignment({0: (7, 8)})          # unknown brokers are not checked (as in Kafka)
    for bad, text in (({0: (1, 2), 1: (3,)}, "same number of replicas"), ({0: (1, 1)}, "Duplicate replica"),
                      ({0: (1,), 2: (2,)}, "consecutive 0-based"), ({1: (1,)}, "consecutive 0-based")):
        with pytest.raises(AssignmentError, match=text) as e:
            check_new_topic_assignment(bad)
        assert e.value.code == errors.INVALID_REPLICA_ASSIGNMENT


def test_new_partitions_continue_kafkas_round_robin_from_partition_zeros_leader():
    # partition 0 led by broker 2: the start index is broker 2's, the shift too, numbering goes on at 2
    assert new_partitions_assignment("t", {0: (2, 3), 1: (3, 1)}, [1, 2, 3], 5, None) == {
        2: (1, 3), 3: (2, 3), 4: (3, 1)}
    assert new_partitions_assignment("t", {0: (1,)}, [1, 2], 2, [[2]]) == {1: (2,)}
    for count, manual, code, text in (
            (1, None, errors.INVALID_PARTITIONS, "Topic already has 1 partitions."),
            (0, None, errors.INVALID_PARTITIONS, "currently has 1 partitions, which is higher than the requested 0"),
            (3, [[2]], errors.INVALID_REPLICA_ASSIGNMENT, "by 2 but 1 assignments provided"),
            (2, [[5]], errors.INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica assignment: 5."),
            (2, [[1, 1]], errors.INVALID_REPLICA_ASSIGNMENT, "Duplicate brokers not allowed"),
            (2, [[1, 2]], errors.INVALID_REPLICA_ASSIGNMENT, "partition 0 has 1 while partitions [1] have"),
            (2, [[]], errors.INVALID_REPLICA_ASSIGNMENT, "replication factor of 0")):
        with pytest.raises(AssignmentError) as e:
            new_partitions_assignment("t", {0: (1,)}, [1, 2], count, manual)
        assert e.value.code == code and text in str(e.value), (count, manual, e.value)


# ---------------------------------------------------------------------- the 26 topic configs

def test_the_26_topic_configs_of_kafka_2_8_with_their_broker_synonyms():
    assert len(TOPIC_KEYS) == 26
    assert TOPIC_KEYS["segment.ms"].server_key == "log.roll.ms"
    assert TOPIC_KEYS["min.cleanable.dirty.ratio"].server_key == "log.cleaner.min.cleanable.ratio"
    lc = log_config({}, {})
    assert (lc.segment_bytes, lc.retention_ms, lc.flush_messages, lc.min_cleanable_dirty_ratio, lc.cleanup_policy,
            lc.message_format_version, lc.compression_type) == (1 << 30, 604_800_000, (1 << 63) - 1, 0.5, "delete",
                                                                "2.8-IV1", "producer")


@pytest.mark.parametrize("props, error, text", [
    ({"retention.mss": "1"}, UnknownTopicConfig, "Unknown topic config name: retention.mss"),
    ({"retention.ms": "-2"}, ConfigValueError, "Invalid value -2 for configuration retention.ms: Value must be at "
                                               "least -1"),
    ({"segment.bytes": "2147483648"}, ConfigValueError, "Not a number of type INT"),
    ({"preallocate": "yes"}, ConfigValueError, "Expected value to be either true or false"),
    ({"cleanup.policy": "compact,zap"}, ConfigValueError, "String must be one of: compact, delete"),
    ({"compression.type": "GZIP"}, ConfigValueError, "String must be one of: uncompressed, zstd, lz4"),
    ({"min.cleanable.dirty.ratio": "1.5"}, ConfigValueError, "Value must be no more than 1"),
    ({"message.format.version": "3.0"}, ConfigValueError, "Version `3.0` is not a valid version"),
    ({"leader.replication.throttled.replicas": "0:1,x"}, ConfigValueError, "must be the literal '*'"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, ConfigConflict, "min.compaction.lag.ms (10) > "
                                                                                     "max.compaction.lag.ms (5)"),
    ({"preallocate": "true"}, ConfigRefused, "does not preallocate"),
    ({"message.format.version": "0.10.2"}, ConfigRefused, "format v2 only"),
])
def test_a_bad_topic_config_is_refused_naming_it(props, error, text):
    with pytest.raises(error) as e:
        validate(props)
    assert text in str(e.value)


def test_good_topic_configs_parse_as_kafkas_config_def_does():
    got = validate({
        "cleanup.policy": " compact , delete ", "message.format.version": "0.11.0", "preallocate": "FALSE",
        "min.cleanable.dirty.ratio": "0.25", "leader.replication.throttled.replicas": "*",
        "follower.replication.throttled.replicas": "0:1,1:2", "retention.bytes": "-5"})
    assert got["cleanup.policy"] == ("compact", "delete") and got["preallocate"] is False
    assert to_string("cleanup.policy", got["cleanup.policy"]) == "compact,delete"
    assert to_string("min.cleanable.dirty.ratio", 1.0) == "1.0" and to_string("min.cleanable.dirty.ratio", 1e-4) == \
        "1.0E-4"
    validate({"message.format.version": "2.8.2"})   # "2.8" as Kafka's ApiVersion reads it


# ---------------------------------------------------------------------- IncrementalAlterConfigs

def op(name: str, kind: int, value: str | None = None):
    return SimpleNamespace(name=name, config_operation=kind, value=value)


def test_incremental_ops_as_prepare_incremental_configs():
    current = {"retention.ms": "5", "leader.replication.throttled.replicas": "0:1,1:1"}
    got = apply_ops(current, [op("retention.ms", DELETE), op("segment.ms", SET, "9"),
                              op("cleanup.policy", APPEND, "compact"),
                              op("leader.replication.throttled.replicas", SUBTRACT, "0:1")], _topic_list_default)
    assert got == {"segment.ms": "9", "cleanup.policy": "delete,compact", "leader.replication.throttled.replicas": "1:1"}
    assert apply_ops({}, [op("follower.replication.throttled.replicas", APPEND, "0:1")], _topic_list_default) == {
        "follower.replication.throttled.replicas": ",0:1"}   # Kafka's "".split(",") keeps an empty element
    with pytest.raises(ResourceError) as e:
        apply_ops({}, [op("retention.ms", APPEND, "1")], _topic_list_default)
    assert (e.value.code, e.value.message) == (errors.INVALID_REQUEST,
                                               "Config value append is not allowed for config key: retention.ms")
    with pytest.raises(ResourceError) as e:
        apply_ops({}, [op("retention.mss", SUBTRACT, "1")], _topic_list_default)
    assert e.value.code == errors.INVALID_CONFIG


# ---------------------------------------------------------------------- dynamic broker configs

def dynamic():
    import yaml
    from node.config import default_config, parse_config
    from node.dynamic_config import DynamicBrokerConfig
    raw = yaml.safe_load(default_config().to_yaml())
    raw["log.retention.ms"] = 1000
    return DynamicBrokerConfig(parse_config(raw), 1)


def test_dynamic_broker_configs_stack_over_cluster_yaml():
    d = dynamic()
    assert d.lookup("log.retention.ms") == 1000 and d.lookup("log.roll.jitter.ms") is None
    assert d.lookup("log.cleaner.min.cleanable.ratio") == 0.5   # cluster.yaml's percentage, as Kafka's ratio
    d.update("<default>", {"log.retention.ms": "2000"})
    assert d.lookup("log.retention.ms") == "2000"
    assert d.update("1", {"log.retention.ms": "3000"}) and not d.update("2", {"log.retention.ms": "9"})
    assert d.synonyms("log.retention.ms") == [("log.retention.ms", "3000", 2), ("log.retention.ms", "2000", 3),
                                              ("log.retention.ms", "1000", 4), ("log.retention.ms", "604800000", 5)]
    assert log_config({}, d.lookup).retention_ms == 3000
    entries = {e["name"]: e for e in d.describe(per_broker=True)}
    assert entries["log.retention.ms"]["source"] == 2 and not entries["log.retention.ms"]["read_only"]
    assert entries["zookeeper.session.timeout.ms"]["read_only"]
    assert [e["name"] for e in d.describe(per_broker=False)] == ["log.retention.ms"]


@pytest.mark.parametrize("props, code, text", [
    ({"zookeeper.session.timeout.ms": "1"}, errors.INVALID_REQUEST,
     "Cannot update these configs dynamically: Set(zookeeper.session.timeout.ms)"),
    ({"max.connections": "5"}, errors.INVALID_CONFIG, "at run time"),
    ({"no.such.key": "5"}, errors.INVALID_CONFIG, "unknown broker config 'no.such.key'"),
    ({"log.retention.ms": "x"}, errors.INVALID_REQUEST, "Invalid value x for configuration log.retention.ms"),
    ({"log.preallocate": "true"}, errors.INVALID_CONFIG, "does not preallocate"),
])
def test_a_broker_config_change_kafkasim_cannot_make_is_refused(props, code, text):
    with pytest.raises(ValueError) as e:
        dynamic().check(props, per_broker=True)
    assert e.value.code == code and text in str(e.value)


# ---------------------------------------------------------------------- change notifications

def test_change_notifications_are_taken_once_in_sequence_order_and_purged_after_15_minutes():
    names = ["config_change_0000000010", "config_change_0000000002", "other", "config_change_0000000003"]
    assert rules.changes_to_process(names, -1) == ["config_change_0000000002", "config_change_0000000003",
                                                   "config_change_0000000010"]
    assert rules.changes_to_process(names, 3) == ["config_change_0000000010"]
    assert not rules.change_obsolete(1_000, 1_000 + 15 * 60_000) and rules.change_obsolete(1_000, 1_001 + 15 * 60_000)
    assert rules.parse_entity_path("brokers/<default>") == ("brokers", "<default>")
    with pytest.raises(ValueError):
        rules.parse_entity_path("groups/g")
