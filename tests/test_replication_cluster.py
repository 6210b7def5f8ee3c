"""Replicated partitions on real brokers: produce with acks, follower fetch, HW, and leader failover."""
from __future__ import annotations

import signal

import grpc

from helpers import events
from kafkacommon import errors
from zk.admin import create_topic
from kafkacommon.batch_scan import scan_batches
from util.waiting import wait_for
from kafkacommon.metadata import TopicAssignment
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg

TOPIC = "acked"


def stub(cluster, broker: int) -> pbg.BrokerStub:
    spec = cluster.cfg.broker(broker)
    return pbg.BrokerStub(grpc.insecure_channel(f"{spec.host}:{spec.port}"))


def leader_of(cluster, topic: str, partition: int = 0) -> tuple[int, int]:
    s = cluster.view().topics[topic]["partitions"][partition]
    return s["leader"], s["leader_epoch"]


def produce(cluster, values: list[bytes], acks: int = -1, leader: int | None = None) -> pb.ProduceResponse:
    """A write to ``leader``, by default the leader the view names."""
    if leader is None:
        leader, _ = leader_of(cluster, TOPIC)
    return stub(cluster, leader).Produce(pb.ProduceRequest(
        topic=TOPIC, partition=0, acks=acks, timeout_ms=5000,
        records=[pb.Record(key=b"", key_null=True, value=v, timestamp_ms=-1) for v in values]), timeout=10)


def consume_all(cluster, broker: int) -> tuple[dict[int, bytes], int]:
    """Every record below the HW on that broker (as a consumer: replica_id -1)."""
    out: dict[int, bytes] = {}
    offset, hw = 0, 0
    s = stub(cluster, broker)
    while True:
        r = s.Fetch(pb.FetchRequest(replica_id=-1, max_wait_ms=0, partitions=[
            pb.FetchPartition(topic=TOPIC, partition=0, fetch_offset=offset, current_leader_epoch=-1,
                              last_fetched_epoch=-1, max_bytes=1 << 20)]), timeout=10).partitions[0]
        assert r.error_code == errors.NONE, errors.name(r.error_code)
        hw = r.high_watermark
        scan = scan_batches(r.records)
        if not scan.batches:
            return out, hw
        for _, batch in scan.batches:
            for rec in batch.records:
                out[rec.offset] = rec.value
            offset = batch.last_offset + 1


def test_acknowledged_records_survive_a_sigkill_of_the_leader(make_cluster):
    cluster = make_cluster(3)
    create_topic(cluster.zk(), TOPIC, 1, 3, {"min.insync.replicas": 2})
    # the first produce may meet a leader that has not heard of its role yet
    wait_for(lambda: produce(cluster, [b"warm-up"]).error_code == errors.NONE, 10, "a leader that accepts writes")
    acked: dict[int, bytes] = {0: b"warm-up"}
    for i in range(20):
        values = [f"v{i}-{j}".encode() for j in range(10)]
        r = produce(cluster, values)
        assert r.error_code == errors.NONE, errors.name(r.error_code)
        for j, v in enumerate(values):
            acked[r.base_offset + j] = v
    old_leader, old_epoch = leader_of(cluster, TOPIC)
    # acks=all means the HW covers every acknowledged record on the leader
    records, hw = consume_all(cluster, old_leader)
    assert hw == max(acked) + 1 and records == acked

    was_controller = cluster.zk().read_controller() == old_leader
    cluster.signal_broker(old_leader, signal.SIGKILL)
    wait_for(lambda: leader_of(cluster, TOPIC)[0] not in (-1, old_leader), 15, "a new leader")
    new_leader, new_epoch = leader_of(cluster, TOPIC)
    # one election; when the leader was also the controller, the new controller's failover first takes the dead
    # broker's replicas offline (leader -1, an epoch of its own) and then elects, as Kafka 2.8's does
    assert new_epoch == old_epoch + (2 if was_controller else 1)
    # every acknowledged record is on the new leader, at its offset, once its HW has caught up
    records = wait_for(lambda: (r := consume_all(cluster, new_leader))[1] >= max(acked) + 1 and r[0], 15,
                       "the new leader's HW to cover every acknowledged record")
    assert {o: records[o] for o in acked} == acked
    # and it accepts new writes with acks=all from the remaining ISR of 2 (min.insync.replicas 2)
    r = wait_for(lambda: (x := produce(cluster, [b"after"])).error_code == errors.NONE and x, 10, "a write after")
    assert r.base_offset == max(records) + 1
    assert events(cluster, broker=new_leader, type_="hw_changed")


def test_a_paused_follower_leaves_the_isr_after_the_lag_time_and_returns(make_cluster):
    # the session outlives the pause: the shrink must come from the lag rule (AlterIsr), not from expiry
    cluster = make_cluster(3, **{"zookeeper.session.timeout.ms": 10000, "replica.lag.time.max.ms": 1000,
                                 "replica.fetch.wait.max.ms": 200})
    create_topic(cluster.zk(), TOPIC, 1, 3, {})
    wait_for(lambda: produce(cluster, [b"first"]).error_code == errors.NONE, 10, "a leader that accepts writes")
    leader, _ = leader_of(cluster, TOPIC)
    ctl = cluster.view().controller_id
    follower = next(b for b in (1, 2, 3) if b not in (leader, ctl)) if leader != ctl else \
        next(b for b in (1, 2, 3) if b != leader)

    def isr() -> list[int]:
        return cluster.view().topics[TOPIC]["partitions"][0]["isr"]

    cluster.signal_broker(follower, signal.SIGSTOP)
    try:
        # the leader's LEO must move ahead of the paused follower for it to count as lagging
        wait_for(lambda: produce(cluster, [b"x"], acks=1).error_code == errors.NONE and follower not in isr(),
                 10, f"broker {follower} to leave the ISR after replica.lag.time.max.ms")
        # acks=all still works with the remaining ISR (min.insync.replicas 1)
        assert produce(cluster, [b"while-paused"]).error_code == errors.NONE
    finally:
        cluster.signal_broker(follower, signal.SIGCONT)
    wait_for(lambda: follower in isr(), 15, f"broker {follower} to catch up and rejoin the ISR")
    assert cluster.view().topics[TOPIC]["partitions"][0]["leader"] == leader

    proposals = [e["kind"] for e in events(cluster, broker=leader, type_="isr_change_proposed", topic=TOPIC)]
    assert "shrink" in proposals and "expand" in proposals
    # the leader's HW never went down
    hws = [e for e in events(cluster, broker=leader, type_="hw_changed", topic=TOPIC)]
    assert hws and all(e["new"] >= e["old"] for e in hws)
    assert [e["new"] for e in hws] == sorted(e["new"] for e in hws)


def _out_of_sync_replica_alone(cluster, topic_configs: dict) -> tuple[int, int, int]:
    """RF 2: the follower lags out of the ISR, the leader takes writes only it has, then dies.

    Returns (dead leader, surviving out-of-sync replica, records only the dead leader had).
    """
    create_topic(cluster.zk(), TOPIC, 1, 2, topic_configs)
    wait_for(lambda: produce(cluster, [b"both-have-this"]).error_code == errors.NONE, 10, "a working leader")
    leader, _ = leader_of(cluster, TOPIC)
    follower = next(b for b in cluster.view().topics[TOPIC]["partitions"][0]["replicas"] if b != leader)

    def isr() -> list[int]:
        return cluster.view().topics[TOPIC]["partitions"][0]["isr"]

    cluster.signal_broker(follower, signal.SIGSTOP)
    try:
        wait_for(lambda: produce(cluster, [b"lag"], acks=1).error_code == errors.NONE and isr() == [leader],
                 10, "the paused follower to leave the ISR")
        only_leader = 5
        for _ in range(only_leader):  # acks=1: on the leader only
            assert produce(cluster, [b"only-on-the-leader"], acks=1).error_code == errors.NONE
        cluster.signal_broker(leader, signal.SIGKILL)
    finally:
        cluster.signal_broker(follower, signal.SIGCONT)
    cluster.wait_exit(leader)
    return leader, follower, only_leader


def test_with_unclean_election_off_the_partition_stays_offline(make_cluster):
    cluster = make_cluster(3, **{"zookeeper.session.timeout.ms": 3000, "replica.lag.time.max.ms": 500,
                                 "replica.fetch.wait.max.ms": 100})
    dead, survivor, _ = _out_of_sync_replica_alone(cluster, {})
    offline = wait_for(lambda: events(cluster, type_="partition_offline", topic=TOPIC), 15,
                       "the controller to take the partition offline")
    assert offline[-1]["isr"] == [dead], "the ISR is never emptied: the dead leader stays its last member"
    # the pause may outlast the survivor's ZooKeeper session: then it registers again, and the controller's
    # broker-startup election must still find no one in the ISR to elect
    wait_for(lambda: survivor in cluster.view().brokers, 15, f"broker {survivor} registered")
    s = cluster.view().topics[TOPIC]["partitions"][0]
    assert s["leader"] == -1 and s["isr"] == [dead]
    assert events(cluster, type_="unclean_leader_election", topic=TOPIC) == []


def test_with_unclean_election_on_the_out_of_sync_replica_leads_and_the_loss_is_reported(make_cluster):
    cluster = make_cluster(3, **{"zookeeper.session.timeout.ms": 3000, "replica.lag.time.max.ms": 500,
                                 "replica.fetch.wait.max.ms": 100})
    dead, survivor, lost = _out_of_sync_replica_alone(cluster, {"unclean.leader.election.enable": True})
    unclean = wait_for(lambda: events(cluster, type_="unclean_leader_election", topic=TOPIC), 30,
                       "an unclean election")
    assert unclean[0]["leader"] == survivor and unclean[0]["previous_isr"] == [dead]
    s = wait_for(lambda: (x := cluster.view().topics[TOPIC]["partitions"][0])["leader"] == survivor and x,
                 10, "the survivor to lead")
    assert s["isr"] == [survivor]
    # the old leader comes back as a follower and cuts what only it had: the data lost, in its events
    cluster.start_broker(dead)
    cut = wait_for(lambda: events(cluster, broker=dead, type_="log_truncated", topic=TOPIC), 20,
                   "the old leader to truncate by leader epoch")
    assert sum(e["records_dropped"] for e in cut) >= lost
    # records past the new leader's epoch end offset are gone: the former leader's log becomes the leader's
    assert produce(cluster, [b"after-the-election"]).error_code == errors.NONE
    wait_for(lambda: dead in cluster.view().topics[TOPIC]["partitions"][0]["isr"], 20,
             "the former leader to catch up and rejoin the ISR")
    logs = [cluster.cfg.broker(b).log_dir / f"{TOPIC}-0" / f"{0:020d}.log" for b in (dead, survivor)]
    wait_for(lambda: logs[0].read_bytes() == logs[1].read_bytes(), 10, "identical logs")


def test_a_former_leader_truncates_records_no_follower_fetched_when_it_rejoins(make_cluster):
    """The clean case (unclean election off): the followers stay in the ISR, the leader takes acks=1
    records they never fetched, dies, and a follower is elected. Back as a follower, the former
    leader cuts those records (past the new leader's epoch end offset) and its log becomes the leader's."""
    cluster = make_cluster(3, **{"zookeeper.session.timeout.ms": 3000, "replica.lag.time.max.ms": 60000,
                                 "replica.fetch.wait.max.ms": 200})
    create_topic(cluster.zk(), TOPIC, 1, 3, {})
    wait_for(lambda: produce(cluster, [b"first"]).error_code == errors.NONE, 10, "a leader that accepts writes")
    for i in range(4):
        assert produce(cluster, [b"everyone-has-%d" % i]).error_code == errors.NONE  # acks=all: 5 records
    leader, epoch = leader_of(cluster, TOPIC)
    followers = [b for b in (1, 2, 3) if b != leader]
    for f in followers:
        cluster.signal_broker(f, signal.SIGSTOP)
    try:
        # once no follower fetch is parked at the leader, nothing appended now can reach them
        wait_for(lambda: not any(f in stub(cluster, leader).DescribeBroker(pb.DescribeBrokerRequest(), timeout=5)
                                 .parked_fetches for f in followers), 5, "the followers' last fetches answered")
        for _ in range(3):
            assert produce(cluster, [b"only-the-leader-has-this"], acks=1).error_code == errors.NONE
        was_controller = cluster.zk().read_controller() == leader
        cluster.signal_broker(leader, signal.SIGKILL)
    finally:
        for f in followers:
            cluster.signal_broker(f, signal.SIGCONT)
    cluster.wait_exit(leader)
    new = wait_for(lambda: (s := cluster.view().topics[TOPIC]["partitions"][0])["leader"] in followers and s, 20,
                   "a follower from the ISR elected")
    # a controller that died with the leader: the new one's failover takes its replicas offline first (an epoch)
    assert new["leader_epoch"] == epoch + (2 if was_controller else 1)
    assert events(cluster, type_="unclean_leader_election", topic=TOPIC) == []
    # ZooKeeper names the new leader before that broker has applied its LeaderAndIsr; until then it answers
    # NOT_LEADER_OR_FOLLOWER and appends nothing, so only that answer is tried again (the record's offset counts)
    answer = wait_for(lambda: (r := produce(cluster, [b"after-the-election"])).error_code
                      != errors.NOT_LEADER_OR_FOLLOWER and r, 10, "the new leader to take writes")
    assert answer.error_code == errors.NONE, answer
    cluster.start_broker(leader)
    cut = wait_for(lambda: events(cluster, broker=leader, type_="log_truncated", topic=TOPIC), 20,
                   "the former leader to truncate by leader epoch")
    assert cut[0]["to_offset"] == 5 and cut[0]["records_dropped"] == 3, cut
    wait_for(lambda: leader in cluster.view().topics[TOPIC]["partitions"][0]["isr"], 20, "it rejoins the ISR")
    logs = [cluster.cfg.broker(b).log_dir / f"{TOPIC}-0" / f"{0:020d}.log" for b in (leader, new["leader"])]
    wait_for(lambda: logs[0].read_bytes() == logs[1].read_bytes(), 10, "identical logs")
    # read from whoever leads now: with the former leader back in the ISR, the periodic preferred-leader check may
    # hand it the partition again at any moment (as Kafka's auto.leader.rebalance does)
    values, _ = wait_for(lambda: consume_all(cluster, cluster.view().topics[TOPIC]["partitions"][0]["leader"]), 10,
                         "the records from the current leader")
    assert b"only-the-leader-has-this" not in values.values() and values[5] == b"after-the-election"


def test_a_follower_with_records_of_its_own_epoch_truncates_by_its_epoch_cache_and_rejoins(make_cluster):
    """Issue 30 item 1.  Leader A's epoch cache holds epoch 0 up to offset 10 (or a later epoch there);
    follower B led a later epoch briefly from offset 5 (an unclean election) and wrote 5..7 nobody else
    saw.  The leader's answer to B's fetch is "the largest epoch at or below yours ends at 10": B must
    take its own end of that epoch (5) too, as Kafka 2.8 does, or it would keep offsets 5..7, fetch
    the same range forever and never rejoin the ISR."""
    cluster = make_cluster(3, **{"zookeeper.session.timeout.ms": 3000, "replica.fetch.wait.max.ms": 200})
    ctl = cluster.view().controller_id
    a, b = [x for x in (1, 2, 3) if x != ctl]
    cluster.zk().create_topic_znode(TopicAssignment(TOPIC, {0: (a, b)}, "%032x" % 30,
                                                    {"unclean.leader.election.enable": True}))

    def state() -> dict:
        return cluster.view().topics.get(TOPIC, {}).get("partitions", {}).get(0) or {"leader": -1, "isr": []}

    def produce_on(leader: int, values: list[bytes], acks: int) -> pb.ProduceResponse:
        wait_for(lambda: state()["leader"] == leader, 20, f"broker {leader} to lead")
        # the broker ZooKeeper names may not have applied its LeaderAndIsr yet: nothing is appended then
        return wait_for(lambda: (r := produce(cluster, values, acks)).error_code != errors.NOT_LEADER_OR_FOLLOWER
                        and r, 10, f"broker {leader} to take writes")

    assert produce_on(a, [b"both-%d" % i for i in range(5)], -1).error_code == errors.NONE   # 0..4 on A and B
    cluster.signal_broker(b, signal.SIGKILL)
    cluster.wait_exit(b)
    wait_for(lambda: state()["isr"] == [a], 20, "B out of the ISR")
    assert produce_on(a, [b"a-only-%d" % i for i in range(5)], 1).error_code == errors.NONE  # 5..9 on A
    cluster.signal_broker(a, signal.SIGKILL)
    cluster.wait_exit(a)
    cluster.start_broker(b)
    assert produce_on(b, [b"b-only-%d" % i for i in range(3)], 1).error_code == errors.NONE  # 5..7 on B
    cluster.signal_broker(b, signal.SIGKILL)
    cluster.wait_exit(b)
    cluster.start_broker(a)
    assert produce_on(a, [b"a-again-%d" % i for i in range(2)], 1).base_offset == 10        # 10..11 on A
    cluster.start_broker(b)

    wait_for(lambda: sorted(state()["isr"]) == sorted([a, b]), 30, "B to truncate, catch up and rejoin the ISR")
    cut = events(cluster, broker=b, type_="log_truncated", topic=TOPIC)
    assert cut and cut[-1]["to_offset"] == 5 and sum(e["records_dropped"] for e in cut) == 3, cut
    logs = [cluster.cfg.broker(x).log_dir / f"{TOPIC}-0" / f"{0:020d}.log" for x in (a, b)]
    wait_for(lambda: logs[0].read_bytes() == logs[1].read_bytes(), 10, "B's log to be the leader's bytes")


def test_a_segment_cut_mid_batch_is_recovered_at_restart(make_cluster):
    cluster = make_cluster(3)
    create_topic(cluster.zk(), TOPIC, 1, 3, {})
    wait_for(lambda: produce(cluster, [b"first"]).error_code == errors.NONE, 10, "a working leader")
    for i in range(10):
        assert produce(cluster, [f"r{i}-{j}".encode() * 8 for j in range(5)]).error_code == errors.NONE
    leader, _ = leader_of(cluster, TOPIC)
    victim = next(b for b in (1, 2, 3) if b != leader)
    wait_for(lambda: consume_all(cluster, leader)[1] == 51, 10, "the HW over every record")
    cluster.stop_broker(victim)
    segment = cluster.cfg.broker(victim).log_dir / f"{TOPIC}-0" / f"{0:020d}.log"
    size = segment.stat().st_size
    with open(segment, "r+b") as f:  # a torn write: the last batch loses its tail
        f.truncate(size - 7)
    cluster.start_broker(victim)
    recovered = wait_for(lambda: events(cluster, broker=victim, type_="log_recovered", topic=TOPIC), 20,
                         "recovery of the torn segment at start-up")
    assert recovered[0]["truncated_bytes"] > 0 and recovered[0]["dropped_batches"] >= 1
    assert recovered[0]["log_end_offset"] < 51
    # it fetches what it lost from the leader and is back in the ISR; its log is the leader's again
    wait_for(lambda: victim in cluster.view().topics[TOPIC]["partitions"][0]["isr"], 20,
             "the recovered replica to rejoin the ISR")
    leader_log = cluster.cfg.broker(leader).log_dir / f"{TOPIC}-0" / f"{0:020d}.log"
    wait_for(lambda: segment.read_bytes() == leader_log.read_bytes(), 10, "identical logs")
