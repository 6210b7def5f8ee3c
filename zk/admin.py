"""Topic administration, as Kafka 2.8's AdminZkClient does it against ZooKeeper (kafka-topics.sh, and the
controller broker's ZkAdminManager behind CreateTopics and CreatePartitions).

Creating a topic writes its config overrides to /config/topics/<t>, then /brokers/topics/<t> with a
replica assignment (Kafka's round-robin placement over the registered brokers, from a random start, or a
manual one); the controller sees it through its watch and elects the first leaders.  Adding partitions
rewrites /brokers/topics/<t> with the new partitions' assignment; the controller's watch on that znode
elects them.  Deleting a topic writes /admin/delete_topics/<t>; the controller deletes the topic's znodes,
tells the replicas to delete their data, and removes the request.  Changing a topic's configs writes
/config/topics/<t> and a change notification under /config/changes, which every broker applies.
"""
from __future__ import annotations

import difflib
import random
import re
from typing import Any, Mapping, Sequence

from kafkacommon import errors
from kafkacommon.assignment import (AssignmentError, assign_replicas, check_new_topic_assignment,
                                    new_partitions_assignment)
from kafkacommon.metadata import TopicAssignment
from kafkacommon.topic_config import TOPIC_KEYS, ConfigRefused, ConfigValueError, UnknownTopicConfig, validate
from util.waiting import wait_for
from zk import paths
from zk.client import ZkClient
from zk.errors import NodeExists

LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME = 249


class TopicError(ValueError):
    """A topic request that cannot be carried out; the message says why, ``code`` is Kafka's error."""

    def __init__(self, message: str, code: int = errors.INVALID_REQUEST) -> None:
        super().__init__(message)
        self.code = code


def parse_configs(items: list[str]) -> dict[str, str]:
    """['k=v', ...] -> the topic's overrides as stored (strings), each checked as Kafka's LogConfig checks
    it; an unknown key or a bad value is an error naming it (INVALID_CONFIG)."""
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise TopicError(f"config {item!r}: expected key=value", errors.INVALID_CONFIG)
        key, value = (x.strip() for x in item.split("=", 1))
        out[key] = value
    check_configs(out)
    return out


def check_configs(configs: Mapping[str, Any]) -> None:
    """Kafka's LogConfig.validate, then kafkasim's refusals: TopicError(INVALID_CONFIG) naming the key."""
    try:
        validate(configs)
    except (ConfigValueError, ConfigRefused) as e:
        raise TopicError(str(e), errors.INVALID_CONFIG) from None
    except UnknownTopicConfig as e:
        near = difflib.get_close_matches(e.key, TOPIC_KEYS, n=1)
        raise TopicError(str(e) + (f" (did you mean {near[0]}?)" if near else ""), errors.INVALID_CONFIG) from None
    except ValueError as e:   # min.compaction.lag.ms above max.compaction.lag.ms
        raise TopicError(str(e), errors.INVALID_CONFIG) from None


def validate_name(topic: str) -> None:
    """Kafka 2.8's org.apache.kafka.common.internals.Topic.validate, in its words (kafka-topics.sh prints them)."""
    why = None
    if not topic:
        why = "Topic name is illegal, it can't be empty"
    elif topic in (".", ".."):
        why = 'Topic name cannot be "." or ".."'
    elif len(topic) > MAX_NAME:
        why = f"Topic name is illegal, it can't be longer than {MAX_NAME} characters, topic name: {topic}"
    elif not LEGAL_NAME.match(topic):
        why = (f'Topic name "{topic}" is illegal, it contains a character other than ASCII alphanumerics, '
               "'.', '_' and '-'")
    if why is not None:
        raise TopicError(why, errors.INVALID_TOPIC_EXCEPTION)


def check_new_topic(zk: ZkClient, topic: str, assignment: Mapping[int, Sequence[int]],
                    configs: Mapping[str, Any]) -> None:
    """Kafka 2.8's AdminZkClient.validateTopicCreate: the name, not taken (nor colliding: ``.`` and ``_``
    are the same in metric names), a well-formed assignment, valid configs."""
    validate_name(topic)
    if zk.exists(paths.topic(topic)) is not None:
        raise TopicError(f"Topic '{topic}' already exists.", errors.TOPIC_ALREADY_EXISTS)
    if "." in topic or "_" in topic:
        folded = topic.replace(".", "_")
        colliding = sorted(t for t in zk.get_children(paths.TOPICS) if t != topic and t.replace(".", "_") == folded)
        if colliding:
            raise TopicError(f"Topic '{topic}' collides with existing topics: {', '.join(colliding)}",
                             errors.INVALID_TOPIC_EXCEPTION)
    try:
        check_new_topic_assignment(assignment)
    except AssignmentError as e:
        raise TopicError(str(e), e.code) from None
    check_configs(configs)


def draw_assignment(brokers: Sequence[int], partitions: int, replication_factor: int,
                    rng: random.Random | None = None) -> dict[int, tuple[int, ...]]:
    """Kafka's AdminUtils.assignReplicasToBrokers, its start and shift drawn from ``rng``."""
    live = sorted(brokers)
    rng = rng or random.Random()
    n = max(len(live), 1)
    try:
        return assign_replicas(partitions, replication_factor, live, start_index=rng.randrange(n),
                               shift=rng.randrange(n))
    except AssignmentError as e:
        raise TopicError(str(e), e.code) from None


def write_topic(zk: ZkClient, topic: str, assignment: Mapping[int, Sequence[int]], configs: Mapping[str, Any],
                rng: random.Random | None = None) -> TopicAssignment:
    """Write a checked topic: /config/topics/<t>, then /brokers/topics/<t> (with a random topic id)."""
    a = TopicAssignment(topic, {p: tuple(r) for p, r in sorted(assignment.items())},
                        "%032x" % (rng or random.Random()).getrandbits(128), dict(configs))
    try:
        zk.create_topic_znode(a, dict(configs))
    except NodeExists:
        raise TopicError(f"Topic '{topic}' already exists.", errors.TOPIC_ALREADY_EXISTS) from None
    return a


def create_topic(zk: ZkClient, topic: str, partitions: int, replication_factor: int,
                 configs: Mapping[str, Any], timeout_s: float = 30.0,
                 rng: random.Random | None = None,
                 assignment: dict[int, tuple[int, ...]] | None = None) -> TopicAssignment:
    """kafka-topics.sh --create: check and write the topic (``assignment``, or drawn as Kafka's AdminUtils
    draws it over the registered brokers), then wait until the controller has given every partition a
    leader."""
    validate_name(topic)
    if assignment is None:
        assignment = draw_assignment(zk.read_brokers(), partitions, replication_factor, rng)
    check_new_topic(zk, topic, assignment, configs)
    a = write_topic(zk, topic, assignment, configs, rng)

    def led() -> bool:
        states = zk.read_states([(topic, p) for p in assignment])
        return len(states) == len(assignment) and all(s.leader >= 0 for s, _ in states.values())

    wait_for(led, timeout_s, f"every partition of {topic} to have a leader")
    return a


def add_partitions(zk: ZkClient, topic: str, count: int, manual: Sequence[Sequence[int]] | None,
                   validate_only: bool = False) -> dict[int, tuple[int, ...]]:
    """Kafka 2.8's ZkAdminManager.createPartitions for one topic: check, then (unless ``validate_only``)
    write the topic's whole assignment, the new partitions included; -> the new partitions' assignment.
    The caller waits for their leaders.  TopicError carries Kafka's error code."""
    found = zk.read_topic(topic)
    if found is None:
        raise TopicError(f"The topic '{topic}' does not exist.", errors.UNKNOWN_TOPIC_OR_PARTITION)
    a, version, reassigning = found
    if reassigning:
        raise TopicError(f"A partition reassignment is in progress for the topic '{topic}'.",
                         errors.REASSIGNMENT_IN_PROGRESS)
    try:
        added = new_partitions_assignment(topic, a.partitions, sorted(zk.read_brokers()), count, manual)
    except AssignmentError as e:
        raise TopicError(str(e), e.code) from None
    if not validate_only:
        combined = TopicAssignment(topic, {**a.partitions, **added}, a.topic_id)
        try:
            zk.set_topic_assignment(combined, version)
        except Exception as e:   # BadVersion: changed meanwhile (a reassignment, another CreatePartitions)
            raise TopicError(f"the assignment of '{topic}' changed while partitions were being added ({e!r}); "
                             f"try again", errors.REASSIGNMENT_IN_PROGRESS) from None
    return added


def delete_topic(zk: ZkClient, topic: str, timeout_s: float = 30.0) -> None:
    """Request the deletion and wait for the controller to carry it out (or refuse it)."""
    if topic == paths.OFFSETS_TOPIC:
        raise TopicError(f"{topic} is an internal topic and cannot be deleted")
    if zk.exists(paths.topic(topic)) is None:
        raise TopicError(f"Topic `{topic}` to delete does not exist", errors.UNKNOWN_TOPIC_OR_PARTITION)
    zk.request_topic_deletion(topic)
    wait_for(lambda: zk.exists(paths.delete_topic(topic)) is None, timeout_s,
             f"the controller to handle the deletion of {topic}")
    if zk.exists(paths.topic(topic)) is not None:
        raise TopicError(f"the controller refused to delete {topic!r} (delete.topic.enable is false?)")


def change_topic_config(zk: ZkClient, topic: str, configs: Mapping[str, Any]) -> str:
    """Kafka's AdminZkClient.changeTopicConfig: check the topic's new whole config, write it, and notify
    every broker (-> the notification's name)."""
    validate_name(topic)
    if zk.exists(paths.topic(topic)) is None:
        raise TopicError(f"Topic '{topic}' does not exist.", errors.UNKNOWN_TOPIC_OR_PARTITION)
    check_configs(configs)
    return zk.change_entity_config(f"topics/{topic}", dict(configs))


def list_topics(zk: ZkClient) -> list[str]:
    return sorted(zk.get_children(paths.TOPICS))


__all__ = ["TopicError", "add_partitions", "change_topic_config", "check_configs", "check_new_topic",
           "create_topic", "delete_topic", "draw_assignment", "list_topics", "parse_configs", "validate_name",
           "write_topic"]
