#!/usr/bin/env python3
"""A buggy consumer (confluent-kafka): it commits what it consumed before it has written it.

Same environment as examples/correct_consumer.py.  Each batch is committed as soon as it is consumed,
and handed to a batching writer that writes to the output every ``APP_FLUSH_INTERVAL_S`` (1 s).
When the process dies (killed, restarted, or stopped without a clean shutdown: it does not handle
SIGTERM), the records in the writer's buffer are gone, but the group's committed offsets are already
past them: no instance will ever consume them again.  Records lost, every time.

kafkasim's chaos run catches it: ``kafkasim chaos run scenarios/app-consumer-buggy.yaml`` (INVALID,
``app-record-lost``).
"""
import os
import time

from confluent_kafka import Consumer, KafkaException, Producer

bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
group = os.environ["KAFKA_GROUP_ID"]
input_topic = os.environ["KAFKA_INPUT_TOPIC"]
output_topic = os.environ.get("KAFKA_OUTPUT_TOPIC")
output_file = os.environ.get("KAFKA_OUTPUT_FILE")
session_ms = int(os.environ.get("APP_SESSION_TIMEOUT_MS", "6000"))
flush_interval_s = float(os.environ.get("APP_FLUSH_INTERVAL_S", "1.0"))

consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "session.timeout.ms": session_ms,
                     "heartbeat.interval.ms": max(100, session_ms // 6)})
producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5}) if output_topic else None
out = open(output_file, "a", encoding="utf-8") if output_file else None
consumer.subscribe([input_topic])

buffer = []
flushed_at = time.monotonic()
while True:
    records = [m for m in consumer.consume(num_messages=200, timeout=0.2) if m.error() is None]
    if records:
        consumer.commit(asynchronous=False)   # BUG: commits records it has not written yet
        buffer.extend(records)
    if buffer and time.monotonic() - flushed_at >= flush_interval_s:
        if producer is not None:
            for m in buffer:
                producer.produce(output_topic, value=m.value(), key=m.key())
            if producer.flush(30):
                raise KafkaException("output records not delivered")
        else:
            out.write("".join(m.value().decode() + "\n" for m in buffer))
            out.flush()
        buffer.clear()
        flushed_at = time.monotonic()
