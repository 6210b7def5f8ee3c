"""Differential runs: one scenario on Kafka 2.8.2 and on kafkasim, and what both expose compared.

- ``scenario``: the format (the chaos scenario's cluster and topics, and fixed ``steps``);
- ``sides``: the two clusters behind the same verbs (launcher's ``Cluster``, reference's ``ReferenceCluster``);
- ``probe``: Kafka-protocol requests to one broker (kafka-python's generated messages);
- ``members``: librdkafka group members that record their generations and assignments;
- ``runner``: one side's run (steps, settling, checkpoints, ZooKeeper's transaction log);
- ``normalize``: observations -> compared entries (relabelled where Kafka is not deterministic);
- ``diff``: the comparison, the listed differences (docs/deviations.md), the report;
- ``cli``: ``kafkasim compare`` (docs/compare.md).
"""
