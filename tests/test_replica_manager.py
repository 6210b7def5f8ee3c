"""ReplicaManager taking up roles from one LeaderAndIsr request: real logs on disk, no cluster."""
from __future__ import annotations

import json
from pathlib import Path

from replication.broker_state import PartitionInfo
from node.events import EventLog
from node.replicas.replica_manager import ReplicaManager
from replication.partition_types import ReplicaSettings


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


def follower_fetch(rm: ReplicaManager, positions: dict[tuple[str, int], tuple[int, int]]):
    """A fetch from follower 2 that does not wait: {tp: (fetch offset, the follower's HW)}."""
    from proto import kafkasim_pb2 as pb

    r = rm.fetch(pb.FetchRequest(replica_id=2, replica_epoch=7, max_wait_ms=0, partitions=[
        pb.FetchPartition(topic=t, partition=p, fetch_offset=off, last_fetched_epoch=0 if off else -1,
                          current_leader_epoch=0, max_bytes=1 << 20, follower_high_watermark=hw)
        for (t, p), (off, hw) in positions.items()]))
    assert r.error_code == 0
    return {(a.topic, a.partition): a for a in r.partitions}


def test_a_follower_answer_carries_only_partitions_with_news(tmp_path):
    """Kafka's incremental fetch answers (KIP-227): a partition with no records, no error and the
    HW the follower already has is left out, so an idle broker does not ship 1,000 empty entries
    on every poll; new records and a moved HW are both news."""
    rm = manager(tmp_path, lambda t: {})
    try:
        tps = [("t", p) for p in range(3)]
        rm.apply_leader_and_isrs([info("t", p, 1) for p in range(3)])
        assert follower_fetch(rm, {tp: (0, 0) for tp in tps}) == {}  # nothing new anywhere
        assert rm.append(("t", 1), [(b"k", b"v", None)], 1, 1000, lambda e: None) == (0, 0, 0)
        got = follower_fetch(rm, {tp: (0, 0) for tp in tps})
        assert set(got) == {("t", 1)} and got[("t", 1)].records  # the records, and nothing else
        # the follower has the record: its next fetch moves the leader's HW to 1, but it cannot
        # know that yet (it says HW 0), so partition 1 is in the answer for its HW alone
        got = follower_fetch(rm, {("t", 0): (0, 0), ("t", 1): (1, 0), ("t", 2): (0, 0)})
        assert set(got) == {("t", 1)}
        assert got[("t", 1)].high_watermark == 1 and not got[("t", 1)].records
        # once the follower has HW 1, partition 1 has no news either
        assert follower_fetch(rm, {("t", 0): (0, 0), ("t", 1): (1, 1), ("t", 2): (0, 0)}) == {}
    finally:
        rm.close()


def test_a_follower_not_at_the_log_end_is_always_answered(tmp_path):
    """Only a follower exactly at the leader's log end with the leader's HW is left out: one
    that claims to be beyond it is answered (the leader's checks decide what it is told)."""
    rm = manager(tmp_path, lambda t: {})
    try:
        rm.apply_leader_and_isrs([info("t", 0, 1)])
        got = follower_fetch(rm, {("t", 0): (5, 0)})
        assert set(got) == {("t", 0)} and not got[("t", 0)].records
    finally:
        rm.close()


def _produce(rm: ReplicaManager, tp, values: list[bytes], ts: int = -1):
    from proto import kafkasim_pb2 as pb
    return rm.produce(pb.ProduceRequest(topic=tp[0], partition=tp[1], acks=1, timeout_ms=1000,
                                        records=[pb.Record(key_null=True, value=v, timestamp_ms=ts) for v in values]))


def test_topic_configs_reach_the_log_and_a_batch_over_max_message_bytes_is_refused(tmp_path):
    """max.message.bytes: Kafka refuses a batch larger than it with MESSAGE_TOO_LARGE (10) and appends
    nothing; index.interval.bytes and segment.ms reach the partition's log."""
    configs = {"t": {"max.message.bytes": "200", "index.interval.bytes": "0", "segment.ms": "5000"}}
    rm = manager(tmp_path, lambda t: dict(configs.get(t, {})))
    try:
        rm.apply_leader_and_isrs([info("t", 0, 1), info("u", 0, 1)])
        h = rm.hosted[("t", 0)]
        assert (h.log.index_interval_bytes, h.log.segment_ms) == (0, 5000)
        assert rm.hosted[("u", 0)].log.index_interval_bytes == 4096  # the broker default
        assert _produce(rm, ("t", 0), [b"v" * 50]).error_code == 0
        r = _produce(rm, ("t", 0), [b"v" * 250])
        assert (r.error_code, r.base_offset) == (10, -1) and h.log.log_end_offset == 1
        assert _produce(rm, ("u", 0), [b"v" * 250]).error_code == 0  # message.max.bytes 1048588
    finally:
        rm.close()


def test_retention_deletes_old_segments_and_moves_the_earliest_offset(tmp_path):
    from proto import kafkasim_pb2 as pb
    configs = {"t": {"retention.ms": "60000", "segment.bytes": "300"}}
    rm = manager(tmp_path, lambda t: dict(configs.get(t, {})))
    try:
        rm.apply_leader_and_isrs([PartitionInfo("t", 0, 1, 0, (1,), (1,), 0, 1)])
        old = 1_000_000  # far in the past: past retention.ms
        for _ in range(6):
            assert _produce(rm, ("t", 0), [b"v" * 100], ts=old).error_code == 0
        h = rm.hosted[("t", 0)]
        n = len(h.log.segments)
        assert n >= 3 and h.repl.high_watermark == 6
        assert rm.retain_logs() == n  # all of them, the active one too (HW = LEO): an empty one is rolled
        assert h.log.log_start_offset == 6 and [s.base_offset for s in h.log.segments] == [6]
        earliest = rm.list_offsets(pb.ListOffsetsRequest(partitions=[pb.TopicPartition(topic="t", partition=0)],
                                                         timestamp=-2))
        assert earliest.partitions[0].offset == 6
        r = rm.fetch(pb.FetchRequest(replica_id=-1, max_wait_ms=0, partitions=[pb.FetchPartition(
            topic="t", partition=0, fetch_offset=2, last_fetched_epoch=-1, current_leader_epoch=-1, max_bytes=1000)]))
        assert r.partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE
        rm.events.close()
        deleted = [e for e in map(json.loads, (tmp_path / "events.jsonl").read_text().splitlines())
                   if e["type"] == "log_segments_deleted"]
        got = [(e["log_start_offset"], e["reasons"], len(e["segments"])) for e in deleted]
        assert got == [(6, ["retention_ms"], n)]
    finally:
        rm.close()


def test_becoming_leader_puts_the_new_epoch_in_the_epoch_cache_at_the_log_end(tmp_path):
    """Kafka's Partition.makeLeader assigns the epoch its start offset at once, records or not: else a
    follower that led an epoch the new leader never wrote in would get "no epoch at or below yours"
    (-1, -1) and never find where it diverges."""
    rm = manager(tmp_path, lambda t: {})
    try:
        rm.apply_leader_and_isrs([info("t", 0, 1)])
        h = rm.hosted[("t", 0)]
        rm.append(("t", 0), [(None, b"v", None)] * 3, 1, 1000, lambda code: None)
        assert h.log.epoch_cache.entries == [(0, 0)]
        rm.apply_leader_and_isrs([PartitionInfo("t", 0, 2, 1, (2, 1), (1, 2), 1, 1)])  # a follower in epoch 1
        rm.apply_leader_and_isrs([PartitionInfo("t", 0, 1, 3, (1,), (1, 2), 2, 1)])     # leader again in epoch 3
        assert h.log.epoch_cache.entries == [(0, 0), (3, 3)]
        assert h.log.end_offset_for_epoch(2) == (0, 3)
    finally:
        rm.close()


def test_periodic_tasks_wait_their_first_delay_then_their_interval(tmp_path):
    """Kafka's LogManager runs retention first InitialTaskDelayMs (30 s) after start, then every
    log.retention.check.interval.ms: the schedule of the task loop, without waiting it out."""
    rm = manager(tmp_path, lambda t: {})
    try:
        waits: list[float] = []
        runs: list[int] = []

        class Stopping:     # answers "not stopped" three times, then stops the loop
            def wait(self, s: float) -> bool:
                waits.append(s)
                return len(waits) > 3
        real, rm._stopping = rm._stopping, Stopping()
        try:
            rm._every(300.0, lambda: runs.append(1), min(30.0, 300.0))
        finally:
            rm._stopping = real
        assert waits == [30.0, 300.0, 300.0, 300.0] and len(runs) == 3
        retention = next(t for t in rm._tasks if t.name == "retention")    # the default interval, 300 s
        assert retention._args[0] == 300.0 and retention._args[2] == 30.0
    finally:
        rm.close()


def test_a_leader_and_isr_making_many_followers_wakes_a_parked_fetch_once(tmp_path):
    """Kafka's makeFollowers completes its partitions' delayed fetches after making them all followers.  A wake
    per partition made every parked fetch look at its whole session again, once per moved partition: a controlled
    shutdown at 10,000 partitions made the stopping broker's 2,010 leader-to-follower changes take 3-5 s (issue 49).
    Now the step wakes the parked fetch once, and its answer carries every moved partition's error."""
    import threading

    from kafkacommon import errors
    from proto import kafkasim_pb2 as pb
    from util.waiting import wait_for

    rm = manager(tmp_path, lambda t: {})
    n = 40
    try:
        rm.apply_leader_and_isrs([info("t", p, 1) for p in range(n)])
        follower_fetch(rm, {("t", p): (0, 0) for p in range(n)})   # the follower is at the log end: no news
        answers: list = []
        parked = threading.Thread(target=lambda: answers.append(rm.fetch(pb.FetchRequest(
            replica_id=2, replica_epoch=7, max_wait_ms=30_000, partitions=[
                pb.FetchPartition(topic="t", partition=p, fetch_offset=0, last_fetched_epoch=-1,
                                  current_leader_epoch=0, max_bytes=1 << 20, follower_high_watermark=0)
                for p in range(n)]))))
        parked.start()
        wait_for(lambda: rm.parked_fetches().get(2) == 1, 10, "the follower's fetch parked")
        wakes: list[int] = []
        notify = rm._notify
        rm._notify = lambda: (wakes.append(1), notify())[1]
        moved = [PartitionInfo("t", p, 2, 1, (1, 2), (1, 2), 1, 1) for p in range(n)]
        assert rm.apply_leader_and_isrs(moved) == {}
        parked.join(10)
        assert not parked.is_alive()
        assert len(wakes) == 1
        assert all(not rm.hosted[("t", p)].repl.is_leader for p in range(n))
        (answer,) = answers
        assert sorted(a.partition for a in answer.partitions if a.error_code == errors.NOT_LEADER_OR_FOLLOWER) \
            == list(range(n))
    finally:
        rm.close()


def test_the_replica_manager_has_what_its_fetchers_use():
    """``FetcherOwner`` (node/replicas/hosted.py) names what a fetcher calls on its replica manager; it named
    private methods the manager does not have (``_endpoint_of`` ...), so the Protocol said nothing true."""
    import inspect

    from node.replicas.hosted import FetcherOwner
    names = set(FetcherOwner.__annotations__) | {n for n, v in vars(FetcherOwner).items()
                                                  if inspect.isfunction(v) and not n.startswith("__")}
    assert {"endpoint_of", "broker_epoch", "log_events", "fetch_max_bytes"} <= names
    init = inspect.signature(ReplicaManager.__init__).parameters
    source = inspect.getsource(ReplicaManager)
    for name in names:   # an attribute set in __init__, a method, or a property
        assert name in init or f"self.{name} =" in source or hasattr(ReplicaManager, name), name


def test_a_steps_event_lines_go_out_in_one_write_each_stamped_when_logged(tmp_path):
    """A stopping broker's own LeaderAndIsr (its led partitions becoming followers) logged two lines per partition,
    each its own write; each write gives up the interpreter lock, which a busy broker's other threads then hold
    for up to their switch interval: 2,010 partitions took 1.8-2.5 s.  The step's lines now go out in one write,
    in order, each stamped when it was logged; another thread's lines meanwhile are written at once."""
    import threading

    events = EventLog(tmp_path / "events.jsonl", 1)
    rm = ReplicaManager(1, tmp_path / "logs", ReplicaSettings(), events, broker_epoch=lambda: 5,
                        endpoint_of=lambda b: None, controller_endpoint=lambda: None, fetch_wait_ms=100,
                        segment_bytes=1 << 20, checkpoint_interval_ms=60_000, shutting_down=lambda: True)
    try:
        n = 20
        rm.apply_leader_and_isrs([PartitionInfo("t", p, 1, 0, (1, 2), (1, 2), 0, 1) for p in range(n)])
        writes: list[int] = []
        out = events._out
        write, write_many = out.write, out.write_many
        out.write = lambda obj: writes.append(1) or write(obj)
        out.write_many = lambda objs: writes.append(len(objs)) or write_many(objs)
        seen_meanwhile: list[bool] = []

        def on_leadership(topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None:
            if partition == 5:   # another thread logs during the step: its line is written at once
                t = threading.Thread(target=rm.log_events, args=([("other_thread", {"n": 1})],))
                t.start()
                t.join()
                seen_meanwhile.append('"type":"other_thread"' in (tmp_path / "events.jsonl").read_text())
        rm.on_leadership = on_leadership
        failed = rm.apply_leader_and_isrs([PartitionInfo("t", p, 2, 1, (1, 2), (1, 2), 1, 1) for p in range(n)])
        assert failed == {}
        assert seen_meanwhile == [True]
        assert writes == [1, 2 * n]   # the other thread's line, then the step's lines in one write
        lines = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
        step = [e for e in lines if e["type"] in ("leadership_lost", "follower_fetch_skipped")]
        assert [(e["type"], e["partition"]) for e in step] == \
            [(t, p) for p in range(n) for t in ("leadership_lost", "follower_fetch_skipped")]
        assert all(e["reason"] == "shutting_down" for e in step if e["type"] == "follower_fetch_skipped")
        stamps = [e["mono_ns"] for e in step]
        assert stamps == sorted(stamps) and stamps[0] < stamps[-1]   # each stamped when logged, not at the write
        other = next(e for e in lines if e["type"] == "other_thread")
        assert step[0]["mono_ns"] < other["mono_ns"] < step[-1]["mono_ns"]
        assert all(not rm.hosted[("t", p)].repl.is_leader and rm.hosted[("t", p)].fetching_from is None
                   for p in range(n))
        # outside a LeaderAndIsr step, a core's lines go out at once, in one write
        writes.clear()
        rm.log_events([("a", {}), ("b", {})])
        assert writes == [2]
    finally:
        rm.close()
        events.close()
