"""The group coordinator, as a sans-IO state machine per __consumer_offsets partition (Kafka 2.8).

* :mod:`coordinator.core` — :class:`~coordinator.core.PartitionCoordinator`, the I/O shell's entry point:
  one typed method per group API, load/unload, replay, appends and timers, around two managers that own
  their state: :mod:`coordinator.membership` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, the rebalance)
  and :mod:`coordinator.offsets` (the offsets cache, OffsetCommit, OffsetFetch, expiry).
* :mod:`coordinator.registry` — the groups they share, and their stored metadata.
* :mod:`coordinator.result` — what a handler returns (responses, records to append, events).
* :mod:`coordinator.timers` — keyed timers (join, sync, heartbeat, pending member, offsets expiry).
* :mod:`coordinator.group` — GroupMetadata / MemberMetadata and the group state machine.
* :mod:`coordinator.messages` — request and response dataclasses.
* :mod:`coordinator.config` — GroupConfig.
* :mod:`coordinator.records` — the __consumer_offsets record format (dependency-free).
* ``partition_for(group_id, n)`` (which offsets partition coordinates a group) is in :mod:`kafkacommon.hashing`.
* :mod:`coordinator.testing` — a fake shell for tests.
"""
