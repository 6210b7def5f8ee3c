"""ReplicaManager taking up roles from one LeaderAndIsr request: real logs on disk, no cluster."""
from __future__ import annotations

from pathlib import Path

from node.broker_state import PartitionInfo
from node.events import EventLog
from node.replica_manager import ReplicaManager
from node.replication import ReplicaSettings


def manager(tmp_path: Path, topic_config) -> ReplicaManager:
    return ReplicaManager(1, tmp_path / "logs", ReplicaSettings(), EventLog(tmp_path / "events.jsonl", 1),
                          broker_epoch=lambda: 5, endpoint_of=lambda b: None, controller_endpoint=lambda: None,
                          fetch_wait_ms=100, segment_bytes=1 << 20, checkpoint_interval_ms=60_000,
                          topic_config=topic_config)


def info(topic: str, p: int, leader: int) -> PartitionInfo:
    return PartitionInfo(topic, p, leader, 0, (1, 2), (1, 2), 0, 1)


def test_one_request_reads_each_topics_config_once(tmp_path):
    """A broker taking 1,000 partitions of a topic used to read and decode the topic's znode once
    per partition: quadratic in the partition count, seconds of start-up at 1,000."""
    reads: list[str] = []
    configs = {"t": {"segment.bytes": "4096", "min.insync.replicas": "2"}, "u": {}}

    def topic_config(topic: str) -> dict:
        reads.append(topic)
        return dict(configs[topic])

    rm = manager(tmp_path, topic_config)
    try:
        rm.apply_leader_and_isrs([info("t", p, 1 + p % 2) for p in range(30)] + [info("u", p, 2) for p in range(5)])
        assert sorted(reads) == ["t", "u"]
        assert len(rm.hosted) == 35
        # every partition got its topic's overrides, not the broker defaults
        assert all(rm.hosted[("t", p)].config == configs["t"] for p in range(30))
        assert all(rm.hosted[("t", p)].log.segment_bytes == 4096 for p in range(30))
        assert all(rm.hosted[("t", p)].repl.settings.min_insync_replicas == 2 for p in range(30))
        assert all(rm.hosted[("u", p)].log.segment_bytes == 1 << 20 for p in range(5))
        # a later request reads again (a deleted and re-created topic may have a new config)
        rm.apply_leader_and_isrs([info("t", 30, 1)])
        assert sorted(reads) == ["t", "t", "u"]
    finally:
        rm.close()
