"""kafkacommon/errors.py: Kafka 2.8's Errors.java, every code."""
from __future__ import annotations

from kafkacommon import errors


def test_every_kafka_2_8_code_from_minus_one_to_104_is_named_once():
    codes = sorted(c for c in errors.ERRORS if c <= errors.KAFKA_2_8_LAST_CODE)
    assert codes == list(range(-1, 105))
    names = [e.name for e in errors.ERRORS.values()]
    assert len(names) == len(set(names))
    for error in errors.ERRORS.values():
        assert getattr(errors, error.name) == error.code


def test_names_retriable_flags_and_messages_are_kafkas():
    assert errors.name(errors.NOT_COORDINATOR) == "NOT_COORDINATOR" and errors.NOT_COORDINATOR == 16
    assert errors.name(77) == "STALE_BROKER_EPOCH" and errors.name(11) == "STALE_CONTROLLER_EPOCH"
    assert errors.name(10) == "MESSAGE_TOO_LARGE" and errors.name(104) == "INCONSISTENT_CLUSTER_ID"
    # retriable: the exception extends RetriableException (InvalidMetadataException counts)
    assert [errors.is_retriable(c) for c in (errors.NOT_LEADER_OR_FOLLOWER, errors.REQUEST_TIMED_OUT,
                                             errors.COORDINATOR_LOAD_IN_PROGRESS, errors.UNSTABLE_OFFSET_COMMIT,
                                             errors.UNKNOWN_TOPIC_ID)] == [True] * 5
    assert [errors.is_retriable(c) for c in (errors.NONE, errors.UNKNOWN_SERVER_ERROR, errors.ILLEGAL_GENERATION,
                                             errors.REBALANCE_IN_PROGRESS, errors.STALE_CONTROLLER_EPOCH)] == [False] * 5
    assert errors.message(errors.NONE) is None
    assert errors.message(errors.ILLEGAL_GENERATION) == "Specified group generation id is not valid."


def test_unknown_code_is_named_not_raised():
    assert errors.name(999) == "UNKNOWN(999)"
    assert errors.is_retriable(999) is False and errors.message(999) is None
