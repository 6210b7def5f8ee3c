"""The transaction coordinator's settings (Kafka 2.8's transaction.* and transactional.id.* broker keys)."""
from __future__ import annotations

from dataclasses import dataclass

TRANSACTION_STATE_TOPIC = "__transaction_state"


@dataclass(frozen=True)
class TxnConfig:
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000      # transactional.id.expiration.ms
    max_timeout_ms: int = 15 * 60 * 1000                             # transaction.max.timeout.ms
    # transaction.abort.timed.out.transaction.cleanup.interval.ms: how often Kafka looks for timed-out ones
    abort_timed_out_interval_ms: int = 10_000
    # transaction.remove.expired.transaction.cleanup.interval.ms: how often Kafka looks for expired ids
    remove_expired_interval_ms: int = 3600 * 1000
    request_timeout_ms: int = 30_000                                 # request.timeout.ms: a tombstone's append
    # how long a transaction's markers or its completion record wait before they are tried again after a
    # retriable failure (Kafka's marker sender retries on its next poll; kafkasim waits this long)
    retry_backoff_ms: int = 100
    # a planted bug only the simulator sets (sim/bugs.py "marker-before-prepare"): the markers are also sent
    # when the prepare record is appended, before it is replicated
    planted_marker_before_prepare: bool = False
