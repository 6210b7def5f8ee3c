"""Cases of ApiVersions (and unsupported versions), topic administration and configs: CreateTopics,
DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeLogDirs."""
from __future__ import annotations

from typing import Any

from conformance.cases import LOG_DIR_SIZE, OLD_VERSIONS, STATIC_IS_DEFAULT, Case, each_version, static_is_default
from conformance.side import Produce, Topic

T1 = [Topic("t1", 1, 2), Produce("t1", 0, 5)]
SHARED_APIS: set[int] = set()   # filled by the runner: the APIs both sides advertise


def both_sides_apis(r: dict[str, Any]) -> dict[str, Any]:
    if SHARED_APIS and isinstance(r.get("api_keys"), list):
        r["api_keys"] = [k for k in r["api_keys"] if k["api_key"] in SHARED_APIS]
    return r


def create(name: str, partitions: int = 2, rf: int = 1, configs: dict[str, str] | None = None,
           validate_only: bool = False) -> Any:
    return {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 30000, "validate_only": validate_only}


def delete(names: list[str]) -> Any:
    return {"topic_names": names, "topics": [{"name": n, "topic_id": None} for n in names], "timeout_ms": 30000}


def partitions(name: str, count: int, assignments: list[list[int]] | None = None) -> Any:
    return {"topics": [{"name": name, "count": count,
                        "assignments": None if assignments is None else [{"broker_ids": a} for a in assignments]}],
            "timeout_ms": 30000, "validate_only": False}


def describe(rtype: int, name: str, keys: list[str] | None = None, synonyms: bool = False) -> Any:
    return {"resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
            "include_synonyms": synonyms, "include_documentation": False}


def alter(name: str, configs: dict[str, str], validate_only: bool = False, rtype: int = 2) -> Any:
    return {"resources": [{"resource_type": rtype, "resource_name": name,
                           "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "validate_only": validate_only}


def incremental(name: str, ops: list[tuple[str, int, str | None]], validate_only: bool = False) -> Any:
    return {"resources": [{"resource_type": 2, "resource_name": name, "configs": [
        {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}], "validate_only": validate_only}


TOPIC, BROKER = 2, 4
BROKER_KEYS = ["min.insync.replicas", "message.max.bytes", "num.partitions", "default.replication.factor",
               "log.retention.ms", "unclean.leader.election.enable", "auto.create.topics.enable"]


def cases() -> list[Case]:
    out: list[Case] = []
    out += each_version("advertised", 18, range(0, 4), {"client_software_name": "kafkasim-conformance",
                                                        "client_software_version": "1.0"},
                        view=both_sides_apis, view_reason="compared over the APIs both sides advertise: "
                        "kafkasim implements a subset (docs/kafka-listener.md)",
                        known={"api_keys[*].min_version": OLD_VERSIONS})
    out += [Case("ApiVersions.v4.unsupported_version", 18, 4, {"client_software_name": "kafkasim-conformance",
                                                                "client_software_version": "1.0"},
                 view=both_sides_apis, view_reason="as ApiVersions.advertised", frame_version=4)]
    # a version above both sides' maximum (the body of version ``enc``, the header naming ``v``): Kafka cannot
    # parse the request and closes the connection
    for api, v, enc, f in [(3, 12, 11, {"topics": [{"name": "t1"}], "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False}),
                      (11, 8, 7, {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                               "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                               "protocols": []}),
                      (12, 5, 4, {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}),
                      (19, 8, 7, create("never", 1, 1)),
                      (9, 8, 7, {"group_id": "g", "topics": None, "require_stable": False}),
                      (2, 7, 6, {"replica_id": -1, "isolation_level": 0, "topics": []})]:
        out.append(Case(f"{Case('', api, v, {}).api}.v{v}.unsupported_version", api, enc, f, setup=T1,
                        frame_version=v))

    CT = range(2, 8)
    static = {"view": static_is_default, "view_reason": STATIC_IS_DEFAULT}
    out += each_version("create", 19, CT, lambda v: create(f"created-{v}", 2, 1), target="controller",
                        ignore={"topic_id": "a topic id is a random UUID"}, **static)
    out += each_version("create_with_config", 19, CT, lambda v: create(f"created-cfg-{v}", 1, 2,
                                                                        {"retention.ms": "1234567",
                                                                         "cleanup.policy": "compact"}),
                        target="controller", ignore={"topic_id": "a topic id is a random UUID"}, **static)
    out += each_version("validate_only", 19, CT, lambda v: create(f"validated-{v}", 3, 2, validate_only=True),
                        target="controller", ignore={"topic_id": "a topic id is a random UUID"}, **static)
    out += each_version("topic_already_exists", 19, CT, create("t1", 1, 1), target="controller", setup=T1)
    out += each_version("invalid_replication_factor", 19, CT, lambda v: create(f"rf-{v}", 1, 3),
                        target="controller")
    out += each_version("invalid_partitions", 19, CT, lambda v: create(f"parts-{v}", 0, 1), target="controller")
    out += each_version("invalid_config", 19, CT, lambda v: create(f"cfg-{v}", 1, 1, {"cleanup.policy": "bogus"}),
                        target="controller")
    out += each_version("unknown_config", 19, CT, lambda v: create(f"ucfg-{v}", 1, 1, {"no.such.config": "1"}),
                        target="controller")
    out += each_version("invalid_topic_name", 19, CT, create("bad/name", 1, 1), target="controller")
    out += each_version("not_controller", 19, CT, lambda v: create(f"nc-{v}", 1, 1), target="other:controller")

    DT = range(1, 7)
    out += each_version("delete", 20, DT, lambda v: delete([f"doomed-{v}"]), target="controller",
                        setup=lambda v: [Topic(f"doomed-{v}", 1, 1)])
    out += each_version("unknown_topic", 20, DT, delete(["no-such-topic"]), target="controller")
    out += each_version("not_controller", 20, DT, delete(["t1"]), target="other:controller", setup=T1)

    CP = range(0, 4)
    out += each_version("grow", 37, CP, lambda v: partitions(f"grow-{v}", 3, [[2], [1]]), target="controller",
                        setup=lambda v: [Topic(f"grow-{v}", 1, 1)])
    out += each_version("shrink", 37, CP, partitions("t3", 2), target="controller",
                        setup=[Topic("t3", 3, 2)])
    out += each_version("unknown_topic", 37, CP, partitions("no-such-topic", 3), target="controller")
    out += each_version("bad_assignment", 37, CP, partitions("t1", 2, [[7]]), target="controller", setup=T1)
    out += each_version("not_controller", 37, CP, partitions("t1", 2), target="other:controller", setup=T1)

    DC = range(1, 5)
    out += each_version("topic", 32, DC, describe(TOPIC, "t1"), setup=T1, **static)
    out += each_version("topic_keys", 32, DC, describe(TOPIC, "t1", ["retention.ms", "cleanup.policy"]), setup=T1,
                        **static)
    out += each_version("topic_synonyms", 32, DC, describe(TOPIC, "small", ["max.message.bytes"], synonyms=True),
                        setup=[Topic("small", 1, 2, {"max.message.bytes": "200"})], **static)
    out += each_version("unknown_topic", 32, DC, describe(TOPIC, "no-such-topic"))
    out += each_version("broker_keys", 32, DC, describe(BROKER, "1", BROKER_KEYS), target="broker:1", **static)

    AC = range(0, 3)
    out += each_version("set", 33, AC, lambda v: alter(f"altered-{v}", {"retention.ms": "7654321"}),
                        setup=lambda v: [Topic(f"altered-{v}", 1, 1)])
    out += each_version("invalid_config", 33, AC, alter("t1", {"retention.ms": "soon"}), setup=T1)
    out += each_version("unknown_config", 33, AC, alter("t1", {"no.such.config": "1"}), setup=T1)
    out += each_version("unknown_topic", 33, AC, alter("no-such-topic", {"retention.ms": "1"}))
    out += each_version("validate_only", 33, AC, alter("t1", {"retention.ms": "1"}, validate_only=True), setup=T1)

    IA = range(0, 2)
    out += each_version("set_and_delete", 44, IA, lambda v: incremental(
        f"incr-{v}", [("retention.ms", 0, "111111"), ("cleanup.policy", 1, None)]),
        setup=lambda v: [Topic(f"incr-{v}", 1, 1, {"cleanup.policy": "compact"})])
    out += each_version("invalid_config", 44, IA, incremental("t1", [("retention.ms", 0, "soon")]), setup=T1)
    out += each_version("unknown_topic", 44, IA, incremental("no-such-topic", [("retention.ms", 0, "1")]))
    out += each_version("append_to_list", 44, IA, lambda v: incremental(
        f"incr-list-{v}", [("cleanup.policy", 2, "compact")]), setup=lambda v: [Topic(f"incr-list-{v}", 1, 1)])

    DL = range(1, 3)
    out += each_version("topic", 35, DL, {"topics": [{"topic": "t1", "partitions": [0]}]}, target="leader:t1:0",
                        setup=T1, ignore={"log_dir": "each side's own directories",
                                          "total_bytes": "each side's own disk",
                                          "usable_bytes": "each side's own disk"},
                        known={"results[*].topics[*].partitions[*].partition_size": LOG_DIR_SIZE})
    return out
