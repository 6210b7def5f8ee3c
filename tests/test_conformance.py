"""The conformance suite (conformance/): its comparison's rules and its tables in the unit tier, and a reduced,
representative set of cases on Kafka 2.8.2 and kafkasim side by side (``kafka``; the full run is
``kafkasim conformance``)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from conformance.cases import IGNORED, UNORDERED
from conformance.clusters import fresh_dir
from conformance.compare import compare, generic, matches
from conformance.tables import all_cases
from conformance.wire import decode_response, encode_request


def test_a_difference_has_its_path_and_both_values() -> None:
    a = {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 0}]}]}
    b = {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 3}]}]}
    (d,) = compare(a, b)
    assert (d.path, d.kafka, d.kafkasim, d.known) == ("topics[0].partitions[0].error_code", 0, 3, None)
    assert compare(a, a) == []


def test_ignored_names_anywhere_and_patterns_only_there() -> None:
    a = {"throttle_time_ms": 1, "brokers": [{"node_id": 1, "host": "a"}], "x": {"y": 1}}
    b = {"throttle_time_ms": 2, "brokers": [{"node_id": 2, "host": "b"}], "x": {"y": 2}}
    assert [d.path for d in compare(a, b, ignore={"throttle_time_ms": "r", "node_id": "r", "host": "r"})] == ["x.y"]
    assert compare(a, b, ignore={**IGNORED, "x.y": "r"}) == []
    assert matches("topics[3].partitions[0].leader_id", "topics[*].partitions[*].leader_id")
    assert not matches("topics[3].leader_id", "topics[*].partitions[*].leader_id")
    assert generic("a[1].b[22].c") == "a[*].b[*].c"


def test_unordered_arrays_are_sorted_by_their_key_and_others_are_not() -> None:
    a = {"topics": [{"name": "a", "v": 1}, {"name": "b", "v": 2}], "list": [1, 2]}
    b = {"topics": [{"name": "b", "v": 2}, {"name": "a", "v": 1}], "list": [2, 1]}
    assert [d.path for d in compare(a, b, unordered={"topics": ("name",)})] == ["list[0]", "list[1]"]
    assert {"topics", "brokers", "groups"} <= set(UNORDERED)


def test_lengths_missing_fields_bytes_and_known_differences() -> None:
    diffs = compare({"a": [1, 2], "r": b"xy", "k": 1}, {"a": [1], "r": b"xz", "extra": 0},
                    known={"r": "deviations.md: a reason"})
    got = {d.path: d for d in diffs}
    assert (got["a.length"].kafka, got["a.length"].kafkasim) == (2, 1)
    assert got["r"].known == "deviations.md: a reason"
    assert got["k"].kafkasim == "<absent>" and got["extra"].kafka == "<absent>"
    assert compare({"c": True}, {"c": 1}) != []    # a type change is a difference


def test_the_tables_have_300_cases_every_error_path_and_encode() -> None:
    cases = all_cases()
    assert len(cases) >= 300 and len({c.id for c in cases}) == len(cases)
    names = " ".join(c.id for c in cases)
    for path in ("unknown_member", "illegal_generation", "rebalance_in_progress", "unknown_leader_epoch",
                 "not_coordinator", "not_leader", "offset_out_of_range", "invalid_config", "record_too_large",
                 "unsupported_version", "invalid_replication_factor", "topic_already_exists", "group_id_not_found",
                 "non_empty_group", "not_controller"):
        assert f".{path}" in names, path
    for c in cases:   # every case's request encodes (per-side values stood in)
        def stand_in(v):
            if isinstance(v, str) and v.startswith("$"):
                return 1 if v.endswith(("generation", "producer_id", "producer_epoch")) else "m"
            if isinstance(v, dict):
                return {k: stand_in(x) for k, x in v.items()}
            return [stand_in(x) for x in v] if isinstance(v, list) else v
        frame = encode_request(c.api_key, c.version, stand_in(c.fields), 7)
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4


def test_a_second_run_starts_from_an_empty_clusters_directory(tmp_path: Path) -> None:
    stale = tmp_path / "clusters" / "run" / "reference" / "broker-1" / "data"
    stale.mkdir(parents=True)
    (stale / "meta.properties").write_text("cluster.id=an-earlier-run\n")
    d = fresh_dir(tmp_path / "clusters")
    assert d.is_dir() and list(d.iterdir()) == []
    assert fresh_dir(tmp_path / "new" / "clusters").is_dir()


def test_api_versions_above_the_maximum_decodes_as_a_v0_body() -> None:
    from listener.protocol import RESPONSES, build
    r = build(RESPONSES[18], {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]}, 0)
    r.with_header(correlation_id=5)
    corr, body = decode_response(18, 4, bytes(r.encode(header=True, framed=True))[4:])
    assert corr == 5 and body["error_code"] == 35


# ---------------------------------------------------------------- both clusters (kafka tier)

# one or more cases of every API, the error paths among them
REDUCED = ",".join([
    "ApiVersions.v3.advertised", "ApiVersions.v4.unsupported_version", "Metadata.v0.two_topics",
    "Metadata.v9.all_topics", "Metadata.v11.unknown_topic", "Metadata.v12.unsupported_version",
    "Produce.v8.append", "Produce.v9.record_too_large", "Produce.v7.not_leader", "Fetch.v11.from_start",
    "Fetch.v12.offset_out_of_range", "Fetch.v10.unknown_leader_epoch", "Fetch.v11.not_leader",
    "ListOffsets.v5.by_timestamp", "OffsetForLeaderEpoch.v3.epoch_0", "InitProducerId.v4.idempotent",
    "JoinGroup.v7.new_group", "JoinGroup.v3.new_group", "JoinGroup.v5.unknown_member", "SyncGroup.v5.leader_assigns",
    "SyncGroup.v3.illegal_generation", "Heartbeat.v4.rebalance_in_progress", "Heartbeat.v2.not_coordinator",
    "LeaveGroup.v4.member_leaves", "OffsetCommit.v8.member", "OffsetCommit.v7.unknown_topic",
    "OffsetFetch.v7.all_topics", "FindCoordinator.v3.group", "DescribeGroups.v5.stable", "ListGroups.v4.stable_only",
    "DeleteGroups.v2.non_empty_group", "DeleteGroups.v1.group_id_not_found", "CreateTopics.v7.create_with_config",
    "CreateTopics.v5.invalid_replication_factor", "CreateTopics.v6.topic_already_exists",
    "CreateTopics.v4.invalid_config", "CreateTopics.v7.not_controller", "DeleteTopics.v6.delete",
    "CreatePartitions.v3.grow", "DescribeConfigs.v4.topic_synonyms", "AlterConfigs.v2.invalid_config",
    "IncrementalAlterConfigs.v1.set_and_delete", "DescribeLogDirs.v2.topic",
    "FindCoordinator.v3.transaction", "InitProducerId.v4.transactional_again", "AddPartitionsToTxn.v3.wrong_epoch",
    "EndTxn.v3.no_transaction", "TxnOffsetCommit.v3.commit", "Fetch.v11.read_committed_open",
    "Fetch.v12.read_committed_after_abort", "DeleteRecords.v2.beyond_high_watermark",
    "ElectLeaders.v2.preferred_not_needed", "AlterPartitionReassignments.v0.cancel_none",
    "ListPartitionReassignments.v0.none", "OffsetDelete.v0.subscribed"])


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    """Kafka 2.8.2 and kafkasim, two brokers each, as ``kafkasim conformance`` runs them."""
    from conformance.clusters import Sides
    with Sides(Path(tmp_path_factory.mktemp("conformance"))) as sides:
        yield sides


@pytest.mark.timeout(400)
def test_a_representative_set_answers_as_kafka_does(kafka) -> None:
    from conformance.runner import run
    report = run(kafka, REDUCED)
    assert len(report.results) == len(REDUCED.split(","))
    bad = [f"{r.case.id}: {r.error} {[str(d) for d in r.differences]}" for r in report.results
           if r.status in ("differing", "error")]
    assert bad == []
    assert report.count("equal") >= len(report.results) - 3   # the rest are listed deviations
