"""Closing a librdkafka (confluent-kafka) consumer that is in a group without librdkafka's close hang.

librdkafka 2.16's ``rd_kafka_consumer_close`` can hang for good when the group hands the consumer a rebalance
while it closes: the close serves the rebalance, whose ``rd_kafka_assign`` waits for a reply that never comes
(confluentinc/librdkafka#4884; #4527 for the cooperative case).  confluent-kafka makes that call holding
Python's GIL, so every thread of the process stops with it: in the suite, a fenced transactional pipeline's
close (the group rebalancing for its successor) froze a whole chaos run.  The workaround librdkafka's
maintainers give: unsubscribe, poll until no partition is assigned, then close.
"""
from __future__ import annotations

import time
from typing import Any

__all__ = ["close_group_consumer"]

#: how long the revocation may take before the close goes ahead anyway
DRAIN_S = 5.0


def close_group_consumer(consumer: Any, drain_s: float = DRAIN_S) -> None:
    """Leave the group (``unsubscribe``), serve the revocation by polling until nothing is assigned (records polled
    meanwhile are dropped: nothing of them is committed, as the callers commit only what they processed), then
    ``close``."""
    try:
        consumer.unsubscribe()
        deadline = time.monotonic() + drain_s
        while consumer.assignment() and time.monotonic() < deadline:
            consumer.consume(1, 0.1)
    finally:
        consumer.close()
