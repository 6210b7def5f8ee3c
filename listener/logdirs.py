"""DescribeLogDirs on the Kafka listener: this broker's log directories, each with its error
(KAFKA_STORAGE_ERROR for an offline one) and its replicas' sizes and offset lags, as Kafka 2.8's
ReplicaManager.describeLogDirs (node/replicas/log_dir_manager.py)."""
from __future__ import annotations

from typing import Any

from listener.context import ListenerContext
from listener.protocol import Request
from listener.server import Connection


def handlers(ctx: ListenerContext) -> dict[int, Any]:
    async def describe_log_dirs(req: Request, conn: Connection) -> dict[str, Any]:
        topics = req.body.topics
        wanted = None if topics is None else {(t.topic, p) for t in topics for p in t.partitions}
        dirs = await ctx.blocking(ctx.replicas.describe_log_dirs, wanted)
        return dict(throttle_time_ms=0, results=[
            dict(error_code=code, log_dir=d, topics=[
                dict(name=topic, partitions=[dict(partition_index=p, partition_size=size, offset_lag=lag,
                                                  is_future_key=False) for p, size, lag in parts])
                for topic, parts in by_topic])
            for d, code, by_topic in dirs])

    return {35: describe_log_dirs}
