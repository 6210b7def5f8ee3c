"""client/group.py's retry waits: a moved coordinator is looked for at once, a loading one polled briefly."""
from __future__ import annotations

import grpc
from tenacity import RetryCallState, Retrying

from client.group import MAX_BACKOFF_S, MIN_POLL_S, RetriableGroupError, backoff_s
from kafkacommon import errors


class Unavailable(grpc.RpcError):
    pass


def state(exc: BaseException, attempt: int, waited_s: float) -> RetryCallState:
    s = RetryCallState(Retrying(), None, (), {})
    s.attempt_number = attempt
    s.start_time = 100.0
    s.set_exception((type(exc), exc, None))
    s.outcome_timestamp = 100.0 + waited_s
    return s


def test_a_moved_or_unreachable_coordinator_is_looked_for_at_once() -> None:
    assert backoff_s(state(RetriableGroupError(errors.NOT_COORDINATOR), 1, 0.03)) == 0.0
    assert backoff_s(state(Unavailable(), 1, 0.03)) == 0.0


def test_a_loading_or_missing_coordinator_is_polled_a_share_of_the_wait() -> None:
    assert backoff_s(state(RetriableGroupError(errors.COORDINATOR_LOAD_IN_PROGRESS), 1, 0.0)) == MIN_POLL_S
    assert abs(backoff_s(state(RetriableGroupError(errors.COORDINATOR_LOAD_IN_PROGRESS), 9, 0.2)) - 0.01) < 1e-9
    assert backoff_s(state(RetriableGroupError(errors.COORDINATOR_NOT_AVAILABLE), 30, 10.0)) == MAX_BACKOFF_S
    assert backoff_s(state(RetriableGroupError(errors.NOT_COORDINATOR), 2, 0.03)) == MIN_POLL_S   # again: it is moving


def test_anything_else_backs_off_exponentially_to_retry_backoff_ms() -> None:
    assert backoff_s(state(RetriableGroupError(errors.REBALANCE_IN_PROGRESS), 1, 0.0)) == 0.01
    assert backoff_s(state(RetriableGroupError(errors.REBALANCE_IN_PROGRESS), 3, 0.0)) == 0.04
    assert backoff_s(state(Unavailable(), 2, 0.0)) == 0.02
    assert backoff_s(state(Unavailable(), 8, 0.0)) == MAX_BACKOFF_S
