"""kafkasim compare's pure parts: the steps' language, the relabelling and normalising of observations, the
comparison and the listed differences.  Observations here are written by hand in the runner's format."""
from __future__ import annotations

import json

import pytest

from chaos.scenario import ScenarioError
from compare.diff import KNOWN, Known, compare, report, unlisted
from compare.normalize import Entry, entries, pattern_of, shape
from compare.scenario import list_compare, load_compare, parse_compare, parse_step

BASE = {"name": "t", "cluster": {"brokers": 3, "controller": 1},
        "topics": [{"name": "events", "replicas": [[1, 2, 3]]}]}


# ------------------------------------------------------------------ the steps

@pytest.mark.parametrize("text, kind, args", [
    ("kill controller", "kill", {"target": "controller"}),
    ("pause coordinator:g1 for 10s", "pause", {"target": "coordinator:g1", "secs": 10.0}),
    ("pause broker:3", "pause", {"target": "broker:3", "secs": None}),
    ("start broker:2", "start", {"broker": 2}),
    ("expire session broker:2", "expire", {"target": "broker:2"}),
    ("create topic t1 3 rf 2 config min.insync.replicas=2 via broker:2", "create",
     {"topic": "t1", "partitions": 3, "rf": 2, "configs": {"min.insync.replicas": "2"}, "via": "broker:2"}),
    ("delete topic t1", "delete", {"topic": "t1"}),
    ("elect preferred events/0 events/1", "elect", {"partitions": [("events", 0), ("events", 1)]}),
    ("elect preferred", "elect", {"partitions": []}),
    ("add partitions to events count 4", "partitions", {"topic": "events", "count": 4}),
    ("reassign events/0 to 2,3,1", "reassign", {"topic": "events", "partition": 0, "replicas": [2, 3, 1],
                                                 "zookeeper": False}),
    ("reassign events/1 to 3,4 via zookeeper", "reassign", {"topic": "events", "partition": 1, "replicas": [3, 4],
                                                             "zookeeper": True}),
    ("alter config topic events retention.ms=60000 min.insync.replicas=2", "config",
     {"entity": "topic events", "configs": {"retention.ms": "60000", "min.insync.replicas": "2"}}),
    ("alter config broker 2 log.retention.ms=1000", "config", {"entity": "broker 2", "configs": {"log.retention.ms": "1000"}}),
    ("alter config brokers log.retention.ms=1000", "config", {"entity": "brokers", "configs": {"log.retention.ms": "1000"}}),
    ("produce 5 to events partition 1 acks=1", "produce", {"count": 5, "topic": "events", "partition": 1, "acks": "1"}),
    ("produce 5 to events", "produce", {"count": 5, "topic": "events", "acks": "all"}),
    ("join group g to events with cooperative-sticky members 2 static session 15s", "join",
     {"group": "g", "topic": "events", "assignor": "cooperative-sticky", "members": 2, "static": True,
      "session_ms": 15_000, "java": False}),
    ("join group g to events java", "join", {"group": "g", "topic": "events", "assignor": "range", "members": 1,
                                             "static": False, "session_ms": 10_000, "java": True}),
    ("join  group g to events", "join", {"group": "g", "topic": "events", "assignor": "range", "members": 1,
                                         "static": False, "session_ms": 10_000, "java": False}),
    ("restart member g/1", "restart", {"group": "g", "member": 1}),
    ("wait isr full", "wait", {"cond": "isr full"}),
    ("wait 2.5s", "wait", {"secs": 2.5}),
])
def test_each_step_parses_to_its_kind_and_arguments(text: str, kind: str, args: dict) -> None:
    step = parse_step(1, text)
    assert (step.kind, dict(step.args)) == (kind, args)


@pytest.mark.parametrize("text, why", [
    ("kil controller", "not a step"),
    ("kill leader-of-everything", "unknown target"),
    ("join group g to events with sticky", "librdkafka members take"),
    ("create topic t 3 rf 2 via coordinator:g", "controller or broker"),
    ("pause broker:1 for a while", "expected pause <target>"),
    ("alter config topic events", "expected alter config"),
])
def test_a_bad_step_is_an_error_naming_it_and_what_was_expected(text: str, why: str) -> None:
    with pytest.raises(ScenarioError, match=why) as e:
        parse_step(3, text, "s.yaml")
    assert "s.yaml: steps[2]" in str(e.value)


def test_a_scenario_checks_its_topics_steps_and_keys() -> None:
    s = parse_compare({**BASE, "steps": ["produce 1 to events", "create topic t2 1 rf 1", "produce 1 to t2"]})
    assert [x.index for x in s.steps] == [1, 2, 3] and s.settle_ms == 1500 and not s.needs_zk_links()
    with pytest.raises(ScenarioError, match="topic 'nope' is neither in topics nor created"):
        parse_compare({**BASE, "steps": ["produce 1 to nope"]})
    with pytest.raises(ScenarioError, match="a compare scenario has fixed steps, not a chaos faults"):
        parse_compare({**BASE, "faults": {}, "steps": ["wait 1s"]})
    with pytest.raises(ScenarioError, match="steps: required"):
        parse_compare(BASE)
    with pytest.raises(ScenarioError, match="brokers are 1..3"):
        parse_compare({**BASE, "steps": ["start broker:4"]})
    with pytest.raises(ScenarioError, match="unknown key"):
        parse_compare({**BASE, "stepz": [], "steps": ["wait 1s"]})
    assert parse_compare({**BASE, "steps": ["expire session broker:2"]}).needs_zk_links()


def test_every_shipped_scenario_loads() -> None:
    names = [load_compare(p).name for p in list_compare()]
    assert len(names) >= 12 and len(set(names)) == len(names)


# ------------------------------------------------------------------ normalising

def obs(zk: list[tuple[int, float, str, str | None]], clients=(), steps=None, **extra) -> dict:
    """Observations in the runner's format: zk = (zxid, time_ms, path, data)."""
    return {"zk": [{"zxid": z, "time_ms": t, "path": p, "created": False, "data": d} for z, t, p, d in zk],
            "clients": list(clients), "members": extra.pop("members", []),
            "steps": steps if steps is not None else [{"index": 0, "text": "set-up", "start_ms": 0, "end_ms": 10,
                                                       "settled": True, "outcome": {}},
                                                      {"index": 1, "text": "kill controller", "start_ms": 100,
                                                       "end_ms": 200, "settled": True, "outcome": {}}],
            "ports": {"1": {"kafka": 19001, "grpc": 18001}, "2": {"kafka": 19002, "grpc": 18002}}, **extra}


def stream(es: list[Entry], name: str) -> list[tuple[int, object]]:
    return [(e.phase, e.value) for e in es if e.stream == name]


def test_controllers_are_relabelled_by_first_appearance() -> None:
    a = entries(obs([(1, 5, "/controller", '{"version":1,"brokerid":2,"timestamp":"1"}'),
                     (2, 150, "/controller", None),
                     (3, 160, "/controller", '{"version":1,"brokerid":3,"timestamp":"2"}')]))
    b = entries(obs([(1, 5, "/controller", '{"version":1,"brokerid":1,"timestamp":"9"}'),
                     (2, 150, "/controller", None),
                     (3, 160, "/controller", '{"version":1,"brokerid":2,"timestamp":"8"}')]))
    assert stream(a, "zk /controller") == stream(b, "zk /controller") == [
        (0, {"version": 1, "brokerid": "c1", "timestamp": "string"}), (1, None),
        (1, {"version": 1, "brokerid": "c2", "timestamp": "string"})]
    c = entries(obs([(1, 5, "/controller", '{"version":1,"brokerid":1,"timestamp":"9"}'),
                     (2, 150, "/controller", None),
                     (3, 160, "/controller", '{"version":1,"brokerid":1,"timestamp":"8"}')]))
    assert compare(a, c), "a controller that comes back is not a new one"


def test_a_transaction_shows_its_last_value_repeats_collapse_and_the_end_is_cut() -> None:
    es = entries(obs([(7, 5, "/brokers/ids/1", ""), (7, 5, "/brokers/ids/1", '{"version":5,"port":19001}'),
                      (8, 120, "/a", "1"), (9, 130, "/a", "1"), (10, 140, "/a", "2"), (11, 900, "/a", "3")],
                     end_ms=500))
    assert stream(es, "zk /brokers/ids/1") == [(0, {"version": 5, "port": "<kafka:1>"})]
    assert stream(es, "zk /a") == [(1, 1), (1, 2)]


def test_sequential_znodes_are_named_by_their_order_and_paths_generalised() -> None:
    es = entries(obs([(1, 5, "/isr_change_notification/isr_change_0000000041", '{"version":1,"partitions":[]}'),
                      (2, 6, "/isr_change_notification/isr_change_0000000042", '{"version":1,"partitions":[]}')]))
    assert [e.stream for e in es if e.stream.startswith("zk /isr")] == [
        "zk /isr_change_notification/isr_change_#1", "zk /isr_change_notification/isr_change_#2"]
    assert pattern_of("/brokers/topics/t/partitions/3/state") == "/brokers/topics/*/partitions/*/state"
    assert stream(es, "zk-paths") == [(0, ["/isr_change_notification/*"])]


def test_a_registrations_ports_are_labelled_and_the_grpc_address_ignored() -> None:
    reg = {"version": 5, "host": "127.0.0.1", "port": 19002, "endpoints": ["PLAINTEXT://127.0.0.1:19002"],
           "timestamp": "1700", "kafkasim_grpc": "127.0.0.1:18002"}
    es = entries(obs([(1, 5, "/brokers/ids/2", json.dumps(reg))]))
    assert stream(es, "zk /brokers/ids/2") == [(0, {"version": 5, "host": "127.0.0.1", "port": "<kafka:2>",
                                                    "endpoints": ["PLAINTEXT://127.0.0.1:<kafka:2>"],
                                                    "timestamp": "string"})]
    assert stream(es, "zk-shape /brokers/ids/*") == [(0, [{"endpoints": ["string"], "host": "string", "port": "int",
                                                           "timestamp": "string", "version": "int"}])]


def test_a_randomly_placed_topic_is_compared_by_replica_index() -> None:
    def run(replicas: list[int], leader: int) -> list[Entry]:
        isr = [r for r in replicas if r != replicas[0]] if leader != replicas[0] else replicas
        return entries(obs([(1, 5, "/brokers/topics/t", json.dumps({"version": 3, "topic_id": "x",
                                                                     "partitions": {"0": replicas}})),
                            (2, 6, "/brokers/topics/t/partitions/0/state",
                             json.dumps({"leader": leader, "isr": isr, "leader_epoch": 0}))],
                           random_topics=["t"]))
    a, b = run([1, 2], 1), run([3, 1], 3)
    assert compare(a, b) == []
    assert stream(a, "zk /brokers/topics/t/partitions/0/state") == [(0, {"leader": "r0", "isr": ["r0", "r1"],
                                                                          "leader_epoch": 0})]
    assert compare(a, run([3, 1], 1)), "the second replica leading is a difference"


def test_metadata_and_groups_are_normalised() -> None:
    md = {"brokers": [{"node_id": 2, "host": "127.0.0.1", "port": 19002, "rack": None}], "controller_id": 2,
          "cluster_id": "abc", "topics": [{"name": "events", "error_code": 0, "is_internal": False, "partitions": [
              {"partition_index": 0, "error_code": 0, "leader_id": 2, "leader_epoch": 3, "replica_nodes": [1, 2],
               "isr_nodes": [2, 1], "offline_replicas": []}]}]}
    dg = {"groups": [{"error_code": 0, "group_state": "Stable", "protocol_type": "consumer", "protocol_data": "range",
                      "members": [{"member_id": "m2-x", "client_id": "m2", "client_host": "/127.0.0.1",
                                   "group_instance_id": None, "member_assignment": {"events": [1]}},
                                  {"member_id": "m1-y", "client_id": "m1", "client_host": "/127.0.0.1",
                                   "group_instance_id": None, "member_assignment": {"events": [0]}}]}]}
    es = entries(obs([(1, 5, "/controller", '{"brokerid":2}')],
                     clients=[{"phase": 1, "probe": "metadata@2", "value": md},
                              {"phase": 1, "probe": "describe_groups g", "value": dg}]))
    m = stream(es, "metadata@2")[0][1]
    assert m["controller"] == "c1" and m["cluster_id"] == "string" and m["brokers"] == [[2, "127.0.0.1", "<kafka:2>", None]]
    assert m["topics"]["events"]["partitions"]["0"]["isr"] == [1, 2]
    members = stream(es, "describe_groups g")[0][1][0]["members"]
    assert [x["client_id"] for x in members] == ["m1", "m2"] and "member_id" not in members[0]


def test_shapes_keep_keys_and_types() -> None:
    assert shape({"a": [1, 2], "b": {"c": None}, "d": "x", "e": True}) == \
        {"a": ["int"], "b": {"c": "null"}, "d": "string", "e": "bool"}


# ------------------------------------------------------------------ comparing

def E(stream_: str, phase: int, value: object) -> Entry:
    return Entry(stream_, phase, value)


def test_each_streams_first_difference_earliest_phase_first() -> None:
    a = [E("zk /a", 0, 1), E("zk /a", 1, 2), E("zk /b", 0, 1), E("zk /b", 2, 5), E("zk /c", 0, 1)]
    b = [E("zk /a", 0, 1), E("zk /a", 2, 2), E("zk /b", 0, 1), E("zk /b", 2, 6), E("zk /d", 3, 1)]
    diffs = compare(a, b, known=[])
    assert [(d.stream, d.index) for d in diffs] == [("zk /c", 0), ("zk /a", 1), ("zk /b", 1), ("zk /d", 0)]
    assert diffs[1].before == E("zk /a", 0, 1) and diffs[0].kafkasim is None and diffs[3].kafka is None
    text = report(diffs, a, b)
    assert "first difference:\n  zk /c, entry 1" in text and "kafka:    #1  2" in text
    assert text.endswith("DIFFERENT: 4 streams, 0 equal, 0 differing as listed in docs/deviations.md, 4 unlisted")


def test_a_listed_difference_is_marked_and_does_not_count_as_unlisted() -> None:
    a, b = [E("zk /x", 0, 1), E("zk /y", 0, 1)], [E("zk /x", 0, 2), E("zk /y", 0, 2)]
    known = [Known(r"zk /x", "x is known", "X")]
    diffs = compare(a, b, known=known)
    assert [d.stream for d in unlisted(diffs)] == ["zk /y"]
    assert "listed: x is known (docs/deviations.md: X)" in report(diffs, a, b)
    assert compare(a[:1], a[:1], known=known) == []


def test_topic_configs_and_config_paths_are_compared_as_kafkas() -> None:
    """kafkasim keeps topic configs where Kafka does (/config/topics/<t>, not a key of /brokers/topics/<t>), so
    no listed difference covers them any more."""
    kafka = {"version": 3, "partitions": {"0": [1]}}
    assert unlisted(compare([E("zk /brokers/topics/t", 0, kafka)], [E("zk /brokers/topics/t", 0, {**kafka, "config": {}})]))
    assert unlisted(compare([E("zk /config/topics/t", 0, {"version": 1, "config": {}})], []))
    paths = [E("zk-paths", 0, ["/a", "/config", "/config/topics"])]
    assert unlisted(compare(paths, [E("zk-paths", 0, ["/a"])]))


def test_every_listed_difference_names_a_section_of_the_deviations_page() -> None:
    from pathlib import Path
    page = (Path(__file__).resolve().parent.parent / "docs" / "deviations.md").read_text()
    for k in KNOWN:
        assert f"## {k.where}" in page, k.where


def test_merged_phases_count_as_one_and_a_scenarios_own_listed_streams_apply_from_their_step() -> None:
    from compare.diff import merge_phases, scenario_known
    s = parse_compare({**BASE, "steps": ["kill broker:2", "start broker:2", "wait 5s"], "merge.phases": [[2, 3]],
                       "listed": [{"streams": "zk /x", "deviation": "X", "from.step": 2}]})
    assert s.merged == ((2, 3),)
    a = merge_phases([E("zk /a", 1, 1), E("zk /a", 3, 2)], s.merged)
    assert [(e.phase, e.value) for e in a] == [(1, 1), (2, 2)]
    assert compare(a, merge_phases([E("zk /a", 1, 1), E("zk /a", 2, 2)], s.merged), known=[]) == []
    # a checkpoint stream keeps the last entry of a merged range: the first caught the change on one side only
    k = merge_phases([E("metadata@1", 1, "x"), E("metadata@1", 2, "x"), E("metadata@1", 3, "y")], s.merged)
    assert [(e.phase, e.value) for e in k] == [(1, "x"), (2, "y")]
    assert compare(k, merge_phases([E("metadata@1", 1, "x"), E("metadata@1", 2, "y"), E("metadata@1", 3, "y")],
                                   s.merged), known=[]) == []
    known = scenario_known(s)
    assert not unlisted(compare([E("zk /x", 2, 1)], [E("zk /x", 2, 2)], known=known))
    assert unlisted(compare([E("zk /x", 1, 1)], [E("zk /x", 1, 2)], known=known)), "before its step: unlisted"
    with pytest.raises(ScenarioError, match="merge.phases"):
        parse_compare({**BASE, "steps": ["wait 1s"], "merge.phases": [[1, 2]]})
    with pytest.raises(ScenarioError, match="listed"):
        parse_compare({**BASE, "steps": ["wait 1s"], "listed": [{"streams": "(", "deviation": "X"}]})


def test_a_java_members_rebalance_lines_become_the_same_events_as_a_librdkafka_members() -> None:
    """JavaGroupMember records what Kafka's JavaMember program prints: the generation with an assignment
    (once per generation), each assignment, revocation and loss, a generation first seen with a poll."""
    from compare.members import JavaGroupMember
    got: list = []
    m = JavaGroupMember.__new__(JavaGroupMember)   # no JVM: only the translation of its lines
    m.name, m.generation, m.assignment, m.last_event = "g/1", None, set(), 0.0
    m.record = lambda member, event, value: got.append((member, event, value))
    m._seen([{"assigned": ["t/0", "t/1"], "generation": 1, "member": "m1-x"}, {"polled": [], "generation": 1},
             {"revoked": ["t/1"]}, {"assigned": [], "generation": 2, "member": "m1-x"}, {"lost": ["t/0"]},
             {"polled": [], "generation": 3}, {"poll_failed": "WakeupException"}])
    assert [(e, v) for _, e, v in got] == [
        ("joined", {"generation": 1}), ("assigned", ["t/0", "t/1"]), ("revoked", ["t/1"]),
        ("joined", {"generation": 2}), ("assigned", []), ("lost", ["t/0"]), ("joined", {"generation": 3}),
        ("poll_error", "WakeupException")]
    assert m.assignment == set() and m.generation == 3


def test_a_write_in_a_steps_first_millisecond_belongs_to_that_step() -> None:
    """ZooKeeper's transaction times are whole milliseconds; a step's start is not."""
    from compare.normalize import phase_of, phase_starts
    starts = phase_starts({"steps": [{"index": 1, "start_ms": 1000.2}, {"index": 2, "start_ms": 2000.7}]})
    assert [phase_of(t, starts) for t in (999, 1000, 1999, 2000)] == [0, 1, 1, 2]
