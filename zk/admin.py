"""Topic administration, as kafka-topics.sh does it against ZooKeeper.

Creating a topic writes /brokers/topics/<t> with a replica assignment (Kafka's
round-robin placement over the live brokers, from a random start); the
controller sees it through its watch and elects the first leaders.  Deleting
one writes /admin/delete_topics/<t>; the controller deletes the topic's
znodes, tells the replicas to delete their data, and removes the request.
"""
from __future__ import annotations

import difflib
import random
import re
from typing import Any, Callable

from kafkacommon.assignment import AssignmentError, assign_replicas
from kafkacommon.metadata import TopicAssignment
from kafkacommon.topic_config import TOPIC_KEYS
from util.waiting import wait_for
from zk import paths
from zk.client import ZkClient
from zk.errors import NodeExists

LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME = 249


class TopicError(ValueError):
    """A topic request that cannot be carried out; the message says why."""


#: Topic-level configs kafkasim understands, with their parsers (Kafka's names and bounds): kafkacommon/topic_config.py.
TOPIC_CONFIGS: dict[str, Callable[[str], Any]] = {name: k.parse for name, k in TOPIC_KEYS.items()}


def parse_configs(items: list[str]) -> dict[str, Any]:
    """['k=v', ...] -> typed configs; an unknown key or a bad value is an error naming it."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise TopicError(f"config {item!r}: expected key=value")
        key, value = (x.strip() for x in item.split("=", 1))
        if key not in TOPIC_CONFIGS:
            near = difflib.get_close_matches(key, TOPIC_CONFIGS, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise TopicError(f"unknown topic config {key!r}{hint}; known: {', '.join(sorted(TOPIC_CONFIGS))}")
        try:
            out[key] = TOPIC_CONFIGS[key](value)
        except ValueError as e:
            raise TopicError(f"config {key}={value!r}: {e}") from None
    return out


def validate_name(topic: str) -> None:
    if topic in (".", "..") or not LEGAL_NAME.match(topic) or len(topic) > MAX_NAME:
        raise TopicError(f"illegal topic name {topic!r}: use up to {MAX_NAME} of [a-zA-Z0-9._-], not '.' or '..'")


def create_topic(zk: ZkClient, topic: str, partitions: int, replication_factor: int,
                 configs: dict[str, Any], timeout_s: float = 30.0,
                 rng: random.Random | None = None,
                 assignment: dict[int, tuple[int, ...]] | None = None) -> TopicAssignment:
    """Write the topic's assignment (``assignment``, or drawn as Kafka's AdminUtils draws it), then wait
    until the controller has given every partition a leader."""
    validate_name(topic)
    if assignment is not None:
        return _create(zk, topic, assignment, "%032x" % (rng or random.Random()).getrandbits(128), configs,
                       timeout_s)
    live = sorted(zk.read_brokers())
    if partitions < 1:
        raise TopicError(f"--partitions must be >= 1, got {partitions}")
    if replication_factor < 1:
        raise TopicError(f"--replication-factor must be >= 1, got {replication_factor}")
    if replication_factor > len(live):
        raise TopicError(f"replication factor {replication_factor} is larger than the {len(live)} live brokers {live}")
    rng = rng or random.Random()
    try:
        assignment = assign_replicas(partitions, replication_factor, live,
                                     start_index=rng.randrange(len(live)), shift=rng.randrange(len(live)))
    except AssignmentError as e:
        raise TopicError(str(e)) from None
    return _create(zk, topic, assignment, "%032x" % rng.getrandbits(128), configs, timeout_s)


def _create(zk: ZkClient, topic: str, assignment: dict[int, tuple[int, ...]], topic_id: str,
            configs: dict[str, Any], timeout_s: float) -> TopicAssignment:
    partitions = len(assignment)
    a = TopicAssignment(topic, assignment, topic_id, configs)
    try:
        zk.create_topic_znode(a)
    except NodeExists:
        raise TopicError(f"topic {topic!r} already exists") from None

    def led() -> bool:
        states = zk.read_states([(topic, p) for p in assignment])
        return len(states) == partitions and all(s.leader >= 0 for s, _ in states.values())

    wait_for(led, timeout_s, f"every partition of {topic} to have a leader")
    return a


def delete_topic(zk: ZkClient, topic: str, timeout_s: float = 30.0) -> None:
    """Request the deletion and wait for the controller to carry it out (or refuse it)."""
    if topic == paths.OFFSETS_TOPIC:
        raise TopicError(f"{topic} is an internal topic and cannot be deleted")
    if zk.exists(paths.topic(topic)) is None:
        raise TopicError(f"topic {topic!r} does not exist")
    zk.request_topic_deletion(topic)
    wait_for(lambda: zk.exists(paths.delete_topic(topic)) is None, timeout_s,
             f"the controller to handle the deletion of {topic}")
    if zk.exists(paths.topic(topic)) is not None:
        raise TopicError(f"the controller refused to delete {topic!r} (delete.topic.enable is false?)")


def list_topics(zk: ZkClient) -> list[str]:
    return sorted(zk.get_children(paths.TOPICS))
