"""`kafkasim topics --create/--delete/--list` against a real cluster: the controller does the work."""
from __future__ import annotations

import json

import grpc

from helpers import events
from cli.main import main
from util.waiting import wait_for
from proto import kafkasim_pb2 as pb
from proto import kafkasim_pb2_grpc as pbg
from zk import paths


def run(capsys, cluster, *args: str) -> tuple[int, str, str]:
    code = main(["topics", *args, "--config", str(cluster.config_path)])
    out, err = capsys.readouterr()
    return code, out, err


def metadata_topics(cluster, broker: int) -> set[str]:
    spec = cluster.cfg.broker(broker)
    with grpc.insecure_channel(f"{spec.host}:{spec.port}") as ch:
        r = pbg.BrokerStub(ch).DescribeBroker(pb.DescribeBrokerRequest(), timeout=5)
    return {p.topic for p in r.partitions}


def test_create_describe_list_and_delete_a_topic(make_cluster, capsys):
    cluster = make_cluster(3)
    code, out, err = run(capsys, cluster, "--create", "--topic", "orders", "--partitions", "6",
                         "--replication-factor", "2", "--config", "min.insync.replicas=2",
                         "--config", "cleanup.policy=compact")
    assert (code, out.strip(), err) == (0, "Created topic orders.", "")
    view = cluster.view()
    parts = view.topics["orders"]["partitions"]
    assert sorted(parts) == list(range(6))
    for s in parts.values():
        assert len(set(s["replicas"])) == 2 and s["leader"] == s["replicas"][0] and s["isr"] == s["replicas"]
    assert view.topics["orders"]["config"] == {"min.insync.replicas": "2", "cleanup.policy": "compact"}  # as given
    leaders = [s["leader"] for s in parts.values()]
    assert all(leaders.count(b) == 2 for b in (1, 2, 3)), leaders  # round-robin spread
    # every broker learns of it (UpdateMetadata)
    for b in (1, 2, 3):
        wait_for(lambda b=b: "orders" in metadata_topics(cluster, b), 5, f"broker {b} to know the topic")

    code, out, _ = run(capsys, cluster, "--list")
    assert code == 0 and out.split() == ["__consumer_offsets", "orders"]
    code, out, _ = run(capsys, cluster, "--describe", "--topic", "orders", "--json")
    assert code == 0 and json.loads(out)[0]["topic"] == "orders"

    code, out, err = run(capsys, cluster, "--delete", "--topic", "orders")
    assert (code, out.strip(), err) == (0, "Deleted topic orders.", "")
    zk = cluster.zk()
    assert zk.exists(paths.topic("orders")) is None and zk.exists(paths.delete_topic("orders")) is None
    for b in (1, 2, 3):
        wait_for(lambda b=b: "orders" not in metadata_topics(cluster, b), 5, f"broker {b} to forget the topic")
    deleted = wait_for(lambda: events(cluster, type_="topic_deleted", topic="orders"), 5, "topic_deleted")
    assert deleted[0]["broker"] == view.controller_id and deleted[0]["partitions"] == 6
    # each replica was told to delete its data: 6 partitions x RF 2
    stopped = wait_for(lambda: (e := events(cluster, type_="replica_stopped", topic="orders", delete=True))
                       and len(e) == 12 and e, 5, "StopReplica(delete=true) on every replica")
    assert len(stopped) == 12


def test_bad_requests_are_refused_with_the_reason(make_cluster, capsys):
    cluster = make_cluster(3)
    assert run(capsys, cluster, "--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1")[0] == 0
    cases = [
        (["--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1"], "already exists"),
        (["--create", "--topic", "u", "--partitions", "1", "--replication-factor", "4"],
         "Replication factor: 4 larger than available brokers: 3."),
        (["--create", "--topic", "u", "--partitions", "0", "--replication-factor", "1"],
         "Number of partitions must be larger than 0."),
        (["--create", "--topic", "bad/name", "--partitions", "1", "--replication-factor", "1"], "is illegal, it contains a character other than ASCII alphanumerics"),
        (["--create", "--topic", "u", "--partitions", "1", "--replication-factor", "1",
          "--config", "min.insync.replica=2"], "did you mean min.insync.replicas"),
        (["--create", "--topic", "u", "--partitions", "1", "--replication-factor", "1",
          "--config", "cleanup.policy=zap"], "cleanup.policy"),
        (["--delete", "--topic", "__consumer_offsets"], "internal topic"),
        (["--delete", "--topic", "nope"], "does not exist"),
    ]
    for args, reason in cases:
        code, _, err = run(capsys, cluster, *args)
        assert code == 1 and reason in err, (args, err)
    assert cluster.zk().exists(paths.topic("u")) is None, "a refused create leaves nothing behind"


def test_deletion_is_refused_when_disabled(make_cluster, capsys):
    cluster = make_cluster(3, **{"delete.topic.enable": False})
    assert run(capsys, cluster, "--create", "--topic", "keep", "--partitions", "2", "--replication-factor", "2")[0] == 0
    code, _, err = run(capsys, cluster, "--delete", "--topic", "keep")
    assert code == 1 and "refused" in err
    assert cluster.zk().exists(paths.topic("keep")) is not None
    refused = events(cluster, type_="topic_deletion_refused", topic="keep")
    assert refused and refused[0]["reason"] == "delete.topic.enable is false"
