"""A fetch session's partitions (``replication.fetch_session.PartitionFetch``) to and from their
``FetchPartition`` wire messages: the shell's side of KIP-227."""
from __future__ import annotations

from replication.fetch_session import PartitionFetch
from proto import kafkasim_pb2 as pb

TP = tuple[str, int]


def partition_fetch(fp: pb.FetchPartition) -> PartitionFetch:
    """From a ``FetchPartition`` message."""
    return PartitionFetch(fp.fetch_offset, fp.last_fetched_epoch, fp.current_leader_epoch, fp.max_bytes,
                          fp.follower_high_watermark)


def fetch_message(tp: TP, pf: PartitionFetch) -> pb.FetchPartition:
    """The ``FetchPartition`` message of ``pf`` (the inverse of :func:`partition_fetch`)."""
    return pb.FetchPartition(topic=tp[0], partition=tp[1], fetch_offset=pf.fetch_offset,
                             last_fetched_epoch=pf.last_fetched_epoch, current_leader_epoch=pf.current_leader_epoch,
                             max_bytes=pf.max_bytes, follower_high_watermark=pf.follower_high_watermark)
