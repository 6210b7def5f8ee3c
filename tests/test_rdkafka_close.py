"""chaos.rdkafka_close: a group consumer leaves the group and serves its revocation before it closes."""
from __future__ import annotations

import pytest

from chaos.rdkafka_close import close_group_consumer


class Recording:
    """Stands in for confluent_kafka.Consumer's four calls (the order is what is checked here; the chaos runs with
    librdkafka clients, tests/test_chaos_txn_runs.py and tests/test_chaos_real_clients.py, close real ones)."""

    def __init__(self, revoked_after_polls: int, unsubscribe_error: Exception | None = None) -> None:
        self.calls: list[str] = []
        self.polls_left = revoked_after_polls
        self.unsubscribe_error = unsubscribe_error

    def unsubscribe(self) -> None:
        self.calls.append("unsubscribe")
        if self.unsubscribe_error is not None:
            raise self.unsubscribe_error

    def assignment(self) -> list[str]:
        return ["t-0"] if self.polls_left > 0 else []

    def consume(self, n: int, timeout: float) -> list[object]:
        self.calls.append("consume")
        self.polls_left -= 1
        return []

    def close(self) -> None:
        self.calls.append("close")


def test_the_revocation_is_polled_before_the_close() -> None:
    c = Recording(revoked_after_polls=3)
    close_group_consumer(c)
    assert c.calls == ["unsubscribe", "consume", "consume", "consume", "close"]


def test_a_revocation_that_never_comes_ends_at_the_deadline_and_still_closes() -> None:
    c = Recording(revoked_after_polls=10**9)
    close_group_consumer(c, drain_s=0.0)
    assert c.calls == ["unsubscribe", "close"]


def test_a_failed_unsubscribe_still_closes() -> None:
    c = Recording(revoked_after_polls=0, unsubscribe_error=RuntimeError("fenced"))
    with pytest.raises(RuntimeError, match="fenced"):
        close_group_consumer(c)
    assert c.calls == ["unsubscribe", "close"]
