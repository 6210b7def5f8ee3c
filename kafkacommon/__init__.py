"""kafkacommon: Kafka's shared formats and tables, named after ``org.apache.kafka.common``.

* :mod:`.errors` — every Kafka 2.8 error code: name, retriable flag, default message.
* :mod:`.varint` — zigzag varints and varlongs.
* :mod:`.record_batch` — record batch v2: encode, decode, validate, CRC-32C, attributes
  (compression codec, timestamp type, transactional, control), headers, producer fields.
* :mod:`.batch_scan` — scanning a buffer of batches up to the first torn or corrupt one.
* :mod:`.fastscan` — the replay fast path: (offset, key, value) out of validated batches.
* :mod:`.hashing` — Java's ``String.hashCode`` with ``Utils.abs`` (a group's offsets
  partition) and ``Utils.murmur2`` (a key's partition).
* :mod:`.metadata` — the cluster's metadata: ``LeaderAndIsr``, ``BrokerRegistration``, ``TopicAssignment``.
* :mod:`.assignment` — Kafka's rack-unaware round-robin replica placement.
* :mod:`.topic_config` — topic configs: parsers, docs, defaults, and a topic's resolved ``LogConfig``.

Plain synchronous code that imports nothing else from kafkasim: no I/O, no clock,
no threads (tests/test_purity.py checks it).
"""
