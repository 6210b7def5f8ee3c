#!/usr/bin/env python3
"""A correct consumer (confluent-kafka): it writes what it consumed, then commits.

It reads ``KAFKA_BOOTSTRAP_SERVERS``, ``KAFKA_GROUP_ID`` and ``KAFKA_INPUT_TOPIC``, and writes each
record's value to ``KAFKA_OUTPUT_TOPIC`` (or, with ``KAFKA_OUTPUT_FILE``, one line per record to that
file).  Each batch: consume, write every record (the producer flushed, or the file written), and only
then commit the consumed positions.  Killed at any moment, it loses nothing: what it committed it had
written; what it wrote but had not committed it consumes and writes again (at-least-once: duplicates,
no loss).  SIGTERM finishes the batch in hand, commits, and leaves the group.

kafkasim's chaos run drives it: ``kafkasim chaos run scenarios/app-consumer-correct.yaml`` (VALID), and
examples/buggy_consumer.py is the same program with the bug.
"""
import os
import signal
import sys

from confluent_kafka import Consumer, KafkaException, Producer

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
        left = producer.flush(30)
        if left:
            raise KafkaException(f"{left} output records not delivered")
    else:
        out.write("".join(m.value().decode() + "\n" for m in records))
        out.flush()


while running:
    records = [m for m in consumer.consume(num_messages=200, timeout=0.2) if m.error() is None]
    if not records:
        continue
    write(records)                          # process first...
    consumer.commit(asynchronous=False)     # ...then commit what was processed
consumer.close()
print("stopped cleanly", file=sys.stderr)
