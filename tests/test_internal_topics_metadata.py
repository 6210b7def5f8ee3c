"""A Metadata request naming an internal topic that does not exist, as Kafka 2.8.2 answers it (checked in its
KafkaApis.getTopicMetadata and DefaultAutoTopicCreationManager): with topic creation allowed (the broker's
auto.create.topics.enable and the request's allow_auto_topic_creation) the broker creates it with the internal
topic's own partitions, replication factor and configs, and answers LEADER_NOT_AVAILABLE; below that replication
factor of live brokers it answers INVALID_REPLICATION_FACTOR; not allowed, UNKNOWN_TOPIC_OR_PARTITION.  Both
internal topics are marked is_internal, as Kafka's Topic.isInternal."""
from __future__ import annotations

import json

from compare.probe import Probe
from helpers import events
from kafkacommon import errors
from util.waiting import wait_for
from zk.paths import OFFSETS_TOPIC

TXN_TOPIC = "__transaction_state"
LAZY = {"kafkasim.offsets.topic.eager.create": False, "offsets.topic.num.partitions": 5,
        "transaction.state.log.num.partitions": 4}


def probe(cluster) -> Probe:
    host, port = cluster.cfg.brokers[1].kafka_advertised
    return Probe(host, port)


def answer(cluster, topic: str, allow: bool) -> dict:
    md = probe(cluster).metadata([topic], auto_create=allow)
    (t,) = md["topics"]
    assert t["name"] == topic
    return t


def created(cluster, topic: str, partitions: int) -> dict:
    """Wait until every partition of ``topic`` has a leader in Metadata; that answer."""
    def whole():
        t = answer(cluster, topic, allow=False)
        return t if t["error_code"] == errors.NONE and len(t["partitions"]) == partitions and all(
            p["leader_id"] >= 0 for p in t["partitions"]) else None
    return wait_for(whole, 60, f"{topic} created with {partitions} partitions, each with a leader")


def test_a_metadata_request_creates_a_missing_internal_topic_as_the_broker_would(make_cluster):
    cluster = make_cluster(3, **LAZY)
    # (with fewer brokers in its metadata cache than the replication factor it would refuse: see the next test)
    wait_for(lambda: len(probe(cluster).metadata([])["brokers"]) == 3, 30, "broker 2 naming three live brokers")
    for topic, partitions, rf, config in ((OFFSETS_TOPIC, 5, 3, {"cleanup.policy": "compact"}),
                                          (TXN_TOPIC, 4, 3, {"cleanup.policy": "compact", "min.insync.replicas": "2"})):
        refused = answer(cluster, topic, allow=False)
        assert (refused["error_code"], refused["is_internal"], refused["partitions"]) == (
            errors.UNKNOWN_TOPIC_OR_PARTITION, True, [])
        first = answer(cluster, topic, allow=True)
        assert (first["error_code"], first["is_internal"]) == (errors.LEADER_NOT_AVAILABLE, True)
        t = created(cluster, topic, partitions)
        assert t["is_internal"] is True
        assert all(len(p["replica_nodes"]) == rf for p in t["partitions"])
        data, _ = cluster.zk().kz.get(f"/config/topics/{topic}")
        got = json.loads(data)["config"]
        assert {k: got.get(k) for k in config} == config, got


def test_below_its_replication_factor_an_internal_topic_is_refused_with_invalid_replication_factor(make_cluster):
    cluster = make_cluster(3, **LAZY)
    cluster.stop_broker(3)   # a clean stop: the other brokers learn it from the controller's UpdateMetadata
    wait_for(lambda: len(probe(cluster).metadata([])["brokers"]) == 2, 30, "broker 2 naming two live brokers")
    for topic, key in ((OFFSETS_TOPIC, "offsets.topic.replication.factor"),
                       (TXN_TOPIC, "transaction.state.log.replication.factor")):
        t = answer(cluster, topic, allow=True)
        assert (t["error_code"], t["is_internal"], t["partitions"]) == (errors.INVALID_REPLICATION_FACTOR, True, [])
        # the broker's creation gave up for the same reason (its *_topic_not_created event), and wrote nothing
        kind = "offsets_topic_not_created" if topic == OFFSETS_TOPIC else "transaction_topic_not_created"
        why = wait_for(lambda kind=kind: events(cluster, broker=2, type_=kind), 30, f"{topic}'s creation refused")
        assert f"2 live brokers, fewer than {key} 3" in why[0]["reason"], why
        assert cluster.zk().kz.exists(f"/brokers/topics/{topic}") is None
