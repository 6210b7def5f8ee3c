"""Where a diverging follower truncates its log (Kafka 2.8's AbstractFetcherThread)."""
from __future__ import annotations

from replication.partition_types import LogView


def follower_truncation(diverging_epoch: int, diverging_end_offset: int, log: LogView,
                        high_watermark: int) -> tuple[int, bool]:
    """Where a follower truncates when the leader answers its fetch with a diverging epoch: Kafka 2.8's
    AbstractFetcherThread.getOffsetTruncationState.  Returns (offset, truncation completed).

    * An end offset of -1 (an undefined answer; a Kafka 2.8 leader answers OFFSET_OUT_OF_RANGE instead): to the HW.
    * The follower knows no epoch at or below the leader's answer: min(leader's end, LEO).
    * The follower's largest epoch at or below it (its epoch cache, LeaderEpochFileCache.endOffsetFor)
      is that epoch: min(leader's end, the follower's own end of it, LEO), complete.
    * It is an older epoch: min(the follower's end of that one, LEO), not complete; the next fetch
      carries the new last epoch and the exchange repeats while they still diverge.
    """
    leo = log.log_end_offset
    if diverging_end_offset < 0:
        return max(0, min(high_watermark, leo)), True
    if diverging_epoch < 0:
        return min(diverging_end_offset, leo), True
    own_epoch, own_end = log.end_offset_for_epoch(diverging_epoch)
    if own_end < 0:
        return min(diverging_end_offset, leo), True
    if own_epoch != diverging_epoch:
        return min(own_end, leo), False
    return min(own_end, diverging_end_offset, leo), True
