"""The Kafka-protocol listener: frames, API registry, handlers.

Real Kafka clients (librdkafka, kafka-python, ...) talk to a broker through
this listener; every request goes to the same replication core, group
coordinator and topic administration as the gRPC path.  Messages are encoded
and decoded with kafka-python's schema-generated ``kafka.protocol`` classes
(pinned in pyproject.toml); ``listener.protocol`` builds the server-side
registry from them.
"""
