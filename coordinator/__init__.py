"""The group coordinator, as a sans-IO state machine per __consumer_offsets partition (Kafka 2.8).

* :mod:`coordinator.core` — :class:`~coordinator.core.PartitionCoordinator`, the I/O shell's entry point
  (with :mod:`coordinator.membership` and :mod:`coordinator.offsets`, its two halves).
* :mod:`coordinator.group` — GroupMetadata / MemberMetadata and the group state machine.
* :mod:`coordinator.messages` — request and response dataclasses.
* :mod:`coordinator.records` — the __consumer_offsets record format (dependency-free).
* ``partition_for(group_id, n)`` (which offsets partition coordinates a group) is in :mod:`kafkacommon.hashing`.
* :mod:`coordinator.testing` — a fake shell (fake clock, in-memory log) for tests.
"""
