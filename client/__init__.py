"""kafkasim's client library: producer, consumer, metadata, the consumer protocol, assignors and partitioners.

The protocol, assignor and partitioner modules are pure Python with no
dependencies; they reproduce Kafka's client-side behaviour (see their docstrings).
"""
