"""The pytest plugin and the public API, used as a user would: this module imports only ``kafkasim`` (the public
package), pytest and the Kafka clients, and gets its clusters from the plugin's ``kafkasim`` fixture.

docs/testing-your-app.md shows these two tests: a confluent-kafka (librdkafka) consumer group whose coordinator
is killed, and a kafka-python one whose coordinator is cut off by a network partition.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata

from kafkasim import ConfigError, Fault

pytestmark = pytest.mark.kafkasim(brokers=3, **{"offsets.topic.num.partitions": 10})


def produce(bootstrap: str, topic: str, values: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in values:
        p.produce(topic, value=f"order-{i}".encode())
    assert p.flush(30) == 0


def consume_until(consumer: Consumer, seen: list[str], n: int, timeout_s: float = 60.0) -> None:
    """The app under test, in miniature: process each batch, then commit it."""
    end = time.monotonic() + timeout_s
    while len(seen) < n and time.monotonic() < end:
        batch = [m for m in consumer.consume(num_messages=50, timeout=0.5) if m.error() is None]
        seen += [m.value().decode() for m in batch]
        if batch:
            consumer.commit(asynchronous=False)


def test_confluent_consumer_survives_its_coordinator_being_killed(kafkasim):
    kafkasim.create_topic("orders", partitions=6)
    produce(kafkasim.bootstrap_servers, "orders", range(300))
    consumer = Consumer({"bootstrap.servers": kafkasim.bootstrap_servers, "group.id": "billing",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    consumer.subscribe(["orders"])
    seen: list[str] = []
    try:
        consume_until(consumer, seen, 300)
        kafkasim.wait_for_stable("billing", members=1)
        old = kafkasim.coordinator_of("billing")

        fault = kafkasim.kill("coordinator:billing")       # SIGKILL the broker coordinating the group
        assert isinstance(fault, Fault) and fault.nodes == [old]
        for n in (400, 500, 600):                           # the app goes on: commits wait for the new coordinator
            produce(kafkasim.bootstrap_servers, "orders", range(n - 100, n))
            consume_until(consumer, seen, n)
    finally:
        consumer.close()

    assert sorted(seen) == sorted(f"order-{i}" for i in range(600))
    assert kafkasim.coordinator_of("billing") not in (old, None)
    ends = kafkasim.log_end_offsets("orders")          # a partition the producer left empty has no commit
    assert kafkasim.committed("billing") == {("orders", p): end for p, end in ends.items() if end}
    row, = [r for r in kafkasim.timeline("billing") if r["fault"] == fault.id]
    assert row["moved"] and row["old_leader"] == old
    assert row["detect_ms"] <= row["elect_ms"] <= row["load_ms"] <= row["first_commit_ms"]
    assert kafkasim.check("billing").verdict == "valid"


def test_kafka_python_consumer_rides_out_a_partitioned_coordinator(kafkasim):
    kafkasim.create_topic("payments", partitions=3)
    producer = KafkaProducer(bootstrap_servers=kafkasim.bootstrap_servers, acks="all", request_timeout_ms=5000)
    for i in range(100):
        producer.send("payments", f"payment-{i}".encode())
    producer.flush(30)
    consumer = KafkaConsumer("payments", bootstrap_servers=kafkasim.bootstrap_servers, group_id="ledger",
                             enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=3000,
                             heartbeat_interval_ms=500, request_timeout_ms=5000)
    consumer.partitions_for_topic("payments")   # the topic's metadata before the first join (docs/kafka-listener.md)
    seen: set[str] = set()

    def poll_and_commit() -> None:
        """The app under test, in miniature: process each batch, then commit it."""
        for tp, records in consumer.poll(timeout_ms=300).items():
            seen.update(r.value.decode() for r in records)
            try:
                consumer.commit({tp: OffsetAndMetadata(records[-1].offset + 1, "", -1)})
            except Exception:   # the coordinator is unreachable, or a rebalance: the next batch commits again
                pass

    def caught_up(n: int, timeout_s: float = 60.0) -> dict:
        """Run the app until it has seen n values and committed the end of every partition."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            poll_and_commit()
            if len(seen) >= n:
                ends = {("payments", p): o for p, o in kafkasim.log_end_offsets("payments").items() if o}
                if kafkasim.committed("ledger") == ends:
                    return ends
        raise AssertionError(f"the consumer saw {len(seen)} of {n} and committed {kafkasim.committed('ledger')}")

    try:
        caught_up(100)
        kafkasim.wait_for_stable("ledger", members=1)
        old = kafkasim.coordinator_of("ledger")
        cut = kafkasim.isolate("coordinator:ledger")        # no byte in or out of that broker
        for i in range(100, 200):
            producer.send("payments", f"payment-{i}".encode())
        producer.flush(60)
        kafkasim.heal(cut)
        caught_up(200)
    finally:
        consumer.close()
        producer.close()

    assert seen == {f"payment-{i}" for i in range(200)}
    assert kafkasim.coordinator_of("ledger") != old        # its ZooKeeper session expired: the partition moved
    moved = [r for r in kafkasim.timeline("ledger") if r["fault"] == cut.id]
    # the controller saw its session go (or, if it was the controller too, another broker won the election)
    assert moved and moved[0]["moved"] and moved[0]["detect_by"] in ("broker_change", "controller_elected")
    assert any(e["type"] == "coordinator_loaded" for e in kafkasim.events())


def test_a_misspelt_setting_is_an_error_naming_it():
    with pytest.raises(ConfigError, match="offsets_topic_num_partiton"):
        from kafkasim import Cluster
        Cluster.start(offsets_topic_num_partiton=10)


def test_a_session_cluster_is_shared_and_what_a_test_leaves_in_force_is_healed(kafkasim_session):
    kafkasim_session.create_topic("shared", partitions=1)
    paused = kafkasim_session.pause("leader:shared/0")
    assert paused.nodes == [kafkasim_session.leader_of("shared", 0)] and not paused.healed
    # left in force on purpose: the plugin heals it after this test


def test_the_next_test_gets_the_session_cluster_healed(kafkasim_session):
    assert all(f.healed for f in kafkasim_session.faults())
    assert [f.kind for f in kafkasim_session.faults()] == ["pause"]
    assert kafkasim_session.records("shared") == []
