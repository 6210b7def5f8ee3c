#!/usr/bin/env python3
"""A buggy consumer (confluent-kafka): it commits what it consumed before it has written it.

Same environment as examples/correct_consumer.py.  It pipelines its work: each batch is committed as soon
as it is consumed, and written to the output when the next batch arrives (while the next one is being
fetched, the previous one is "being processed").  So at any moment the last batch it consumed is
committed but not written.  When the process dies (killed, restarted, or stopped: it does not handle
SIGTERM), that batch is gone, and the group's committed offsets are already past it: no instance will
ever consume it again.  Records lost, every time it stops.

kafkasim's chaos run catches it: ``kafkasim chaos run scenarios/app-consumer-buggy.yaml`` (INVALID,
``app-record-lost``).
"""
import os

from confluent_kafka import Consumer, KafkaException, Producer

bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
group = os.environ["KAFKA_GROUP_ID"]
input_topic = os.environ["KAFKA_INPUT_TOPIC"]
output_topic = os.environ.get("KAFKA_OUTPUT_TOPIC")
output_file = os.environ.get("KAFKA_OUTPUT_FILE")
session_ms = int(os.environ.get("APP_SESSION_TIMEOUT_MS", "6000"))

consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "session.timeout.ms": session_ms,
                     "heartbeat.interval.ms": max(100, session_ms // 6)})
producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5}) if output_topic else None
out = open(output_file, "a", encoding="utf-8") if output_file else None
consumer.subscribe([input_topic])


def write(records):
    if producer is not None:
        for m in records:
            producer.produce(output_topic, value=m.value(), key=m.key())
        if producer.flush(30):
            raise KafkaException("output records not delivered")
    else:
        out.write("".join(m.value().decode() + "\n" for m in records))
        out.flush()


in_hand = []
while True:
    records = [m for m in consumer.consume(num_messages=200, timeout=0.2) if m.error() is None]
    if not records:
        continue
    consumer.commit(asynchronous=False)   # BUG: commits this batch before it is written...
    write(in_hand)                        # ...while writing the previous one
    in_hand = records
