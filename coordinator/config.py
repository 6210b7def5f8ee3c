"""The group coordinator's settings (Kafka's group.* and offsets.* broker keys), as the cores take them."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    commit_timeout_ms: int = 5000      # offsets.commit.timeout.ms; goes into AppendCmd.timeout_ms
    commit_required_acks: int = -1     # offsets.commit.required.acks: -1 waits for the HW, 1 for our own log
    # Chaos only (a planted bug, see chaos/runner.py PLANTABLE_BUGS): False accepts a commit from any
    # member and generation.  Always True in a real broker.
    check_commit_generation: bool = True
