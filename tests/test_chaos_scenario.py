"""Scenarios, schedules, targets and link maps: the pure parts of a chaos run."""
from __future__ import annotations

import random

import pytest

from chaos.nemesis import Links
from chaos.scenario import ScenarioError, list_scenarios, load_scenario, parse_scenario
from chaos.schedule import make_schedule as _make_schedule, schedule_document, schedule_rng_seed, write_schedule
from chaos.targets import TargetError, View, parse_target, resolve
from kafkacommon.hashing import partition_for
from node.net.links import LinkMap, LinkMapError

BASE = {
    "name": "t",
    "topics": [{"name": "events", "partitions": 2}],
    "workload": {"producers": {"count": 1, "topic": "events"},
                 "groups": [{"id": "g1", "topic": "events"}]},
    "faults": {"mix": [{"kind": "kill", "target": "coordinator:g1"},
                       {"kind": "partition", "target": "controller", "peer": "zookeeper", "direction": "to"}]},
}


def make_schedule(scenario, seed, duration_s=None):
    """The schedule a run with ``seed`` draws (the generator as chaos/runner.py makes it)."""
    return _make_schedule(scenario, random.Random(schedule_rng_seed(seed)), duration_s)


def with_(path: str, value) -> dict:
    import copy
    doc = copy.deepcopy(BASE)
    node = doc
    keys = path.split("/")
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    last = keys[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return doc


def test_every_shipped_scenario_parses():
    names = {s.name for s in list_scenarios()}
    assert {"coordinator-kill", "pauses", "mixed", "broker-links", "zookeeper-ensemble"} <= names


def test_the_same_seed_gives_an_identical_schedule_file(tmp_path):
    s = load_scenario("scenarios/mixed.yaml")
    for name in ("a", "b"):
        write_schedule(tmp_path / f"{name}.json", schedule_document(s, 7, 600, make_schedule(s, 7, 600)))
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    other = make_schedule(s, 8, 600)
    assert [f.to_json() for f in other] != [f.to_json() for f in make_schedule(s, 7, 600)]


def test_a_schedule_keeps_to_its_bounds():
    s = parse_scenario(with_("faults", {"start.after.ms": 1000, "interval.ms": [500, 500], "quiet.end.ms": 2000,
                                        "mix": [{"kind": "kill", "target": "coordinator:g1",
                                                 "duration.ms": [1000, 1000]}]}))
    faults = make_schedule(s, 3, 10)
    assert [f.at_ms for f in faults] == [1000, 2500, 4000, 5500, 7000]
    assert all(f.heal_at_ms == f.at_ms + 1000 for f in faults)
    assert all(b.at_ms >= a.heal_at_ms for a, b in zip(faults, faults[1:]))


@pytest.mark.parametrize("doc, key", [
    (with_("workload/groups/0/comit.interval.ms", 10), "workload.groups[0].comit.interval.ms"),
    (with_("duration", 10), "duration"),
    (with_("workload/groups/0/members", "three"), "workload.groups[0].members"),
    (with_("faults/mix/0/target", "coordinator:nope"), "faults.mix[0].target"),
    (with_("faults/mix/0/target", "leader"), "faults.mix[0].target"),
    (with_("faults/mix/0/kind", "explode"), "faults.mix[0].kind"),
    (with_("faults/mix/0/peer", "zookeeper"), "faults.mix[0]"),
    (with_("faults/mix/1/direction", "sideways"), "faults.mix[1].direction"),
    (with_("faults/mix/0/duration.ms", [5, 1]), "faults.mix[0].duration.ms"),
    (with_("cluster", {"config": {"brokers": []}}), "cluster.config.brokers"),
    (with_("workload/producers/topic", "nope"), "workload.producers.topic"),
    (with_("workload/client", "kafka-go"), "workload.client"),
    (with_("faults/mix/0", {"kind": "reassign", "target": "controller"}), "faults.mix[0].target"),
    (with_("faults/mix/0", {"kind": "reassign-failover", "target": "coordinator:g1"}), "faults.mix[0].target"),
])
def test_scenario_errors_name_the_key(doc, key):
    with pytest.raises(ScenarioError) as e:
        parse_scenario(doc, "s.yaml")
    assert f"s.yaml: {key}" in str(e.value)


def test_a_misspelt_key_gets_a_suggestion():
    with pytest.raises(ScenarioError, match="did you mean commit.interval.ms"):
        parse_scenario(with_("workload/groups/0/comit.interval.ms", 10))


def view() -> View:
    n = 10
    p = partition_for("g1", n)
    return View(brokers=[1, 2, 3], live={1, 2, 3}, zookeeper=[1, 2, 3], controller=2, offsets_partitions=n,
                partitions={("__consumer_offsets", p): {"leader": 3, "isr": [3, 1], "replicas": [3, 1, 2]},
                            ("events", 0): {"leader": 1, "isr": [1, 2, 3], "replicas": [1, 2, 3]},
                            ("events", 1): {"leader": -1, "isr": [2], "replicas": [2, 3, 1]}})


@pytest.mark.parametrize("target, nodes", [
    ("controller", ["b2"]), ("coordinator:g1", ["b3"]), ("leader:events/0", ["b1"]),
    ("followers:events/0", ["b2", "b3"]), ("leader:events/1", []), ("broker:2", ["b2"]),
    ("zookeeper", ["zk1", "zk2", "zk3"]), ("zookeeper:2", ["zk2"]),
])
def test_targets_resolve_by_role(target, nodes):
    assert resolve(target, view(), random.Random(0)) == nodes


def test_random_minority_and_majority_are_seeded():
    v = view()
    assert len(resolve("minority", v, random.Random(1))) == 1
    assert len(resolve("majority", v, random.Random(1))) == 2
    picks = {resolve("random", v, random.Random(s))[0] for s in range(20)}
    assert picks == {"b1", "b2", "b3"}
    assert resolve("random", v, random.Random(5)) == resolve("random", v, random.Random(5))


def test_peer_sets_exclude_the_target():
    v = view()
    assert resolve("rest", v, random.Random(0), exclude=frozenset({"b1"})) == ["b2", "b3", "zk1", "zk2", "zk3",
                                                                              "client"]
    assert resolve("servers", v, random.Random(0), exclude=frozenset({"b1"})) == ["b2", "b3", "zk1", "zk2", "zk3"]
    assert resolve("brokers", v, random.Random(0), exclude=frozenset({"b1"})) == ["b2", "b3"]
    with pytest.raises(TargetError):
        parse_target("rest")  # only as a peer


def test_real_clients_refuse_what_only_kafkasims_client_does():
    import copy
    doc = copy.deepcopy(BASE)
    doc["workload"]["client"] = "confluent-kafka"
    assert parse_scenario(doc).client == "confluent-kafka"
    doc["workload"]["groups"][0]["crash.interval.ms"] = [1000, 2000]
    with pytest.raises(ScenarioError, match=r"workload.groups\[0\]: crash.interval.ms and stall.interval.ms need"):
        parse_scenario(doc)
    doc["workload"]["groups"][0].pop("crash.interval.ms")
    doc["workload"]["groups"][0]["assignor"] = "sticky"
    with pytest.raises(ScenarioError, match=r"workload.groups\[0\].assignor"):
        parse_scenario(doc)


def test_a_pair_with_two_links_faults_both():
    links = Links()
    links.add("client", "b1")
    links.add("client", "b1", "kafka")
    assert links.directions("client", "b1") == [("client->b1", "out"), ("client->b1:kafka", "out")]
    assert links.directions("b1", "client") == [("client->b1", "back"), ("client->b1:kafka", "back")]


def test_links_carry_bytes_both_ways_through_the_initiators_link():
    links = Links()
    links.add("b1", "b2")
    links.add("b2", "b1")
    links.add("b1", "zk1")
    assert links.directions("b1", "b2") == [("b1->b2", "out"), ("b2->b1", "back")]
    assert links.directions("zk1", "b1") == [("b1->zk1", "back")]   # ZooKeeper never dials a broker
    assert links.directions("b1", "zk1") == [("b1->zk1", "out")]


def test_link_maps_rewrite_addresses_and_keep_the_chroot(tmp_path):
    m = LinkMap({2: "127.0.0.1:5002"}, "127.0.0.1:6001,127.0.0.1:6002")
    m.write(tmp_path / "l.json")
    back = LinkMap.load(tmp_path / "l.json")
    assert back == m
    assert back.dial(2, "127.0.0.1:9092") == "127.0.0.1:5002"
    assert back.dial(3, "127.0.0.1:9093") == "127.0.0.1:9093"
    assert back.zookeeper_connect("127.0.0.1:2181/kafka") == "127.0.0.1:6001,127.0.0.1:6002/kafka"
    (tmp_path / "bad.json").write_text('{"brokers": {"x": "1"}, "zk": 1}')
    with pytest.raises(LinkMapError, match="unknown key 'zk'"):
        LinkMap.load(tmp_path / "bad.json")


TXN_BASE = {
    "name": "t",
    "topics": [{"name": "tx-in", "partitions": 2}, {"name": "tx-out", "partitions": 2}],
    "workload": {"producers": {"count": 1, "topic": "tx-in"}, "groups": [],
                 "transactions": {"input": "tx-in", "output": "tx-out", "group": "eos", "pipelines": 2,
                                  "zombie.interval.ms": [8000, 12000]}},
    "faults": {"mix": [{"kind": "kill", "target": "txn-coordinator:eos-1"}]},
}


def txn_with(path: str, value) -> dict:
    import copy
    doc = copy.deepcopy(TXN_BASE)
    node = doc
    *keys, last = path.split("/")
    for k in keys:
        node = node[int(k)] if isinstance(node, list) else node[k]
    node[last] = value
    return doc


def test_a_transactional_workload_parses_with_its_defaults():
    s = parse_scenario(TXN_BASE)
    t = s.transactions
    assert (t.input, t.output, t.group, t.client, t.max_records, t.readers) == ("tx-in", "tx-out", "eos",
                                                                              "confluent-kafka", 20, 1)
    assert t.transactional_ids() == ["eos-0", "eos-1"] and t.zombie_ms == 3000
    assert parse_scenario(BASE).transactions is None
    for name in ("txn-coordinator-kill-librdkafka", "txn-coordinator-kill-java"):
        assert load_scenario(f"scenarios/{name}.yaml").transactions is not None


@pytest.mark.parametrize("doc, key", [
    (txn_with("workload/transactions/output", "tx-in"), "workload.transactions.output"),
    (txn_with("workload/transactions/input", "nope"), "workload.transactions.input"),
    (txn_with("workload/transactions/client", "kafkajs"), "workload.transactions.client"),
    (txn_with("workload/transactions/pipelines", 9), "workload.transactions.pipelines"),
    (txn_with("workload/transactions/transactionl.id", "x"), "workload.transactions.transactionl.id"),
    (txn_with("workload/transactions/client", "java"), "workload.transactions.zombie.interval.ms"),
    (txn_with("workload/producers/topic", "tx-out"), "workload.producers.topic"),
    (txn_with("faults/mix/0/target", "txn-coordinator:eos-2"), "faults.mix[0].target"),
])
def test_transactional_scenario_errors_name_the_key(doc, key):
    with pytest.raises(ScenarioError) as e:
        parse_scenario(doc, "s.yaml")
    assert f"s.yaml: {key}" in str(e.value)


def test_a_txn_coordinator_target_resolves_to_the_leader_of_its_transaction_state_partition():
    v = view()
    v.txn_partitions = 10
    v.partitions[("__transaction_state", partition_for("eos-0", 10))] = {"leader": 2, "isr": [2], "replicas": [2]}
    assert resolve("txn-coordinator:eos-0", v, random.Random(0)) == ["b2"]
    assert resolve("txn-coordinator:eos-9", v, random.Random(0)) == [] or partition_for("eos-9", 10) == \
        partition_for("eos-0", 10)


def test_disk_faults_give_each_broker_log_directories_of_their_own():
    doc = with_("faults/mix", [{"kind": "disk-full", "target": "coordinator:g1"},
                               {"kind": "disk-error", "target": "leader:events/0"}])
    doc["cluster"] = {"log.dirs": 2, "disk.size.mb": 16}
    sc = parse_scenario(doc)
    assert (sc.log_dirs, sc.disk_size_mb, sc.disk_fault_kinds()) == (2, 16, {"disk-full", "disk-error"})
    assert parse_scenario(BASE).disk_fault_kinds() == set() and parse_scenario(BASE).log_dirs == 1
    for key, value in (("log.dirs", 0), ("log.dirs", 5), ("disk.size.mb", 1)):
        bad = dict(doc, cluster={key: value})
        with pytest.raises(ScenarioError, match=f"cluster.{key}"):
            parse_scenario(bad)
    with pytest.raises(ScenarioError, match="disk faults need network: proxy"):
        parse_scenario(dict(doc, network="netns"))


def test_a_disk_fault_fails_the_directory_holding_its_targets_partition():
    from chaos.targets import target_partition
    assert target_partition("coordinator:g1", 50) == ("__consumer_offsets", partition_for("g1", 50))
    assert target_partition("leader:events/2", 50) == ("events", 2)
    assert target_partition("random", 50) is None and target_partition("controller", 50) is None
