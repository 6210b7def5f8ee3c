"""The produce rules of a partition leader (Kafka 2.8's ReplicaManager.appendRecords,
Partition.appendRecordsToLeader and DelayedProduce), as plain functions of the facts they need.

* A request's acks must be -1, 0 or 1 (INVALID_REQUIRED_ACKS, 21), checked first, then this broker
  must lead the partition (NOT_LEADER_OR_FOLLOWER, 6).
* acks=all needs |ISR| >= min.insync.replicas before the append (NOT_ENOUGH_REPLICAS, 19).
* An acks=all append completes once the HW covers it: NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND (20)
  when the maximal ISR is then below min.insync.replicas; NOT_LEADER_OR_FOLLOWER when this broker has
  not led the partition ever since the append; otherwise it waits (the purgatory times it out with
  REQUEST_TIMED_OUT, 7).
"""
from __future__ import annotations

from kafkacommon import errors

VALID_ACKS = (-1, 0, 1)


def request_error(acks: int, is_leader: bool) -> int:
    """The checks every produce passes before anything else: NONE or the error to answer."""
    if acks not in VALID_ACKS:
        return errors.INVALID_REQUIRED_ACKS
    if not is_leader:
        return errors.NOT_LEADER_OR_FOLLOWER
    return errors.NONE


def append_error(acks: int, is_leader: bool, isr_size: int, min_insync_replicas: int) -> int:
    """Before appending: NONE, or the error to answer with (nothing is appended)."""
    code = request_error(acks, is_leader)
    if code == errors.NONE and acks == -1 and isr_size < min_insync_replicas:
        return errors.NOT_ENOUGH_REPLICAS
    return code


def acks_all_outcome(*, is_leader: bool, leader_since_epoch: int, appended_in_epoch: int | None,
                     high_watermark: int, required_offset: int, maximal_isr_size: int,
                     min_insync_replicas: int) -> int | None:
    """An acks=all append of the records below ``required_offset``, made in leader epoch
    ``appended_in_epoch`` (None: not checked): its error once done, or None while it must wait.
    ``leader_since_epoch`` is the epoch in which this broker last became leader: a new epoch of the
    same leader (the controller took a follower out of the ISR) changes nothing, as in Kafka."""
    if not is_leader or (appended_in_epoch is not None and appended_in_epoch < leader_since_epoch):
        return errors.NOT_LEADER_OR_FOLLOWER
    if high_watermark < required_offset:
        return None
    if maximal_isr_size < min_insync_replicas:
        return errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return errors.NONE
