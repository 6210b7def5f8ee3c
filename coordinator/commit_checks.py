"""Whether a group accepts an OffsetCommit or a TxnOffsetCommit: Kafka 2.8.2's checks, as pure functions.

:func:`commit_error` is GroupCoordinator.handleCommitOffsets' order of checks and :func:`txn_commit_error`
doTxnCommitOffsets'.  Each returns None when the offsets are to be written, else the error for every
partition of the request.  A member's accepted commit also completes its heartbeat expectation; that is the
membership manager's part (:meth:`coordinator.membership.MembershipManager.validate_commit`).
"""
from __future__ import annotations

from coordinator.group import DEAD, EMPTY, PREPARING_REBALANCE, STABLE, GroupMetadata
from coordinator.messages import OffsetCommitRequest, TxnOffsetCommitRequest
from kafkacommon import errors


def commit_error(group: GroupMetadata | None, req: OffsetCommitRequest, check_generation: bool) -> int | None:
    """handleCommitOffsets' checks (``check_generation`` False is a planted bug for the chaos checkers' tests:
    the member and the generation go unchecked)."""
    if group is None:
        return errors.ILLEGAL_GENERATION
    if group.is_(DEAD):
        return errors.COORDINATOR_NOT_AVAILABLE
    if group.is_static_member_fenced(req.member_id, req.group_instance_id):
        return errors.FENCED_INSTANCE_ID
    if req.generation_id < 0 and group.is_(EMPTY):
        return None
    if not check_generation:
        return None
    if not group.has(req.member_id):
        return errors.UNKNOWN_MEMBER_ID
    if req.generation_id != group.generation:
        return errors.ILLEGAL_GENERATION
    if group.state in (STABLE, PREPARING_REBALANCE):
        return None
    return errors.REBALANCE_IN_PROGRESS   # CompletingRebalance: a new generation, no assignment yet


def txn_commit_error(group: GroupMetadata, req: TxnOffsetCommitRequest) -> int | None:
    """doTxnCommitOffsets' checks: the member and the generation are checked only when given."""
    if group.is_(DEAD):
        return errors.COORDINATOR_NOT_AVAILABLE
    if group.is_static_member_fenced(req.member_id, req.group_instance_id):
        return errors.FENCED_INSTANCE_ID
    if req.member_id and not group.has(req.member_id):
        return errors.UNKNOWN_MEMBER_ID
    if req.generation_id >= 0 and req.generation_id != group.generation:
        return errors.ILLEGAL_GENERATION
    return None
