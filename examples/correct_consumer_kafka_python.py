#!/usr/bin/env python3
"""examples/correct_consumer.py with kafka-python instead of confluent-kafka: write, then commit.

Same environment (``KAFKA_BOOTSTRAP_SERVERS``, ``KAFKA_GROUP_ID``, ``KAFKA_INPUT_TOPIC``, and
``KAFKA_OUTPUT_TOPIC`` or ``KAFKA_OUTPUT_FILE``).  A commit that fails (the coordinator moved, a
rebalance) is not fatal: the positions are committed again after the next batch.  Nor is a poll that fails
with a retriable error: kafka-python 3 raises a connection error from ``poll`` when the group's coordinator
dies under it (its connection reset while the consumer looks for the coordinator again); the next poll
carries on from the same positions.
"""
import os
import signal

from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError

bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
group = os.environ["KAFKA_GROUP_ID"]
input_topic = os.environ["KAFKA_INPUT_TOPIC"]
output_topic = os.environ.get("KAFKA_OUTPUT_TOPIC")
output_file = os.environ.get("KAFKA_OUTPUT_FILE")
session_ms = int(os.environ.get("APP_SESSION_TIMEOUT_MS", "6000"))

running = True


def stop(signum, frame):
    global running
    running = False


signal.signal(signal.SIGTERM, stop)

consumer = KafkaConsumer(input_topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                         auto_offset_reset="earliest", session_timeout_ms=session_ms,
                         heartbeat_interval_ms=max(100, session_ms // 6))
consumer.partitions_for_topic(input_topic)   # the topic's metadata before the first join (docs/kafka-listener.md)
producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all") if output_topic else None
out = open(output_file, "a", encoding="utf-8") if output_file else None

while running:
    try:
        batches = consumer.poll(timeout_ms=200, max_records=200)
    except KafkaError as e:
        if not e.retriable:
            raise
        print(f"poll failed: {e!r}", flush=True)
        continue
    records = [m for batch in batches.values() for m in batch]
    if not records:
        continue
    if producer is not None:
        sent = [producer.send(output_topic, value=m.value, key=m.key) for m in records]
        for f in sent:
            f.get(timeout=30)  # raises if a record was not written: then nothing is committed
    else:
        out.write("".join(m.value.decode() + "\n" for m in records))
        out.flush()
    try:
        consumer.commit()      # the positions after this batch, all written
    except KafkaError as e:    # the coordinator moved, or a rebalance: the next batch commits again
        print(f"commit failed: {e!r}", flush=True)
consumer.close()
