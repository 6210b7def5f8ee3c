"""The group coordinator's timer keys, on kafkacommon/timers.py's keyed timers (Kafka's CoordinatorTimer).

An operation is handed the :class:`coordinator.result.Result` of the call that fired it and adds to it
(responses, records, events); it never mutates durable state (only replaying
records does).  The keys, built by the helpers below, name what a timer is for::

    ("join", group)               DelayedJoin / InitialDelayedJoin: complete the group's join phase
    ("sync", group)               DelayedSync: drop the members that did not sync
    ("heartbeat", group, member)  DelayedHeartbeat: the member's session (or new-member join) timeout
    ("pending", group, member)    a member id handed out with MEMBER_ID_REQUIRED, expiring
    ("offsets-expiry",)           the offsets.retention.check.interval.ms task

"""
from __future__ import annotations

from kafkacommon.timers import Timer, TimerKey, Timers

__all__ = ["Timer", "TimerKey", "Timers", "EXPIRY_KEY", "join_key", "sync_key",
           "heartbeat_key", "pending_key"]

EXPIRY_KEY: TimerKey = ("offsets-expiry",)


def join_key(group_id: str) -> TimerKey:
    return ("join", group_id)


def sync_key(group_id: str) -> TimerKey:
    return ("sync", group_id)


def heartbeat_key(group_id: str, member_id: str) -> TimerKey:
    return ("heartbeat", group_id, member_id)


def pending_key(group_id: str, member_id: str) -> TimerKey:
    return ("pending", group_id, member_id)
