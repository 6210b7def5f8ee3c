"""The brokers' wall clock in ms (Kafka's ``time.milliseconds()``): one definition for the shells."""
from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)
