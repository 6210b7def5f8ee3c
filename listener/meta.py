"""ApiVersions, Metadata, FindCoordinator, CreateTopics and DeleteTopics on the Kafka listener.

Metadata comes from this broker's metadata cache (the controller's
UpdateMetadata), as Kafka's does; brokers are the live ones, each at its
advertised Kafka listener.  Topics are created and deleted through ZooKeeper
exactly as ``kafkasim topics`` (zk/admin.py) does.
"""
from __future__ import annotations

from typing import Any

from kafka.errors import (InvalidConfigurationError, InvalidPartitionsError, InvalidReplicationFactorError,
                          InvalidRequestError, InvalidTopicError, TopicAlreadyExistsError,
                          TopicDeletionDisabledError, UnknownTopicOrPartitionError)

from coordinator.messages import FindCoordinatorRequest
from listener.context import ListenerContext
from listener.protocol import API_VERSIONS, SUPPORTED, Request
from listener.server import Connection
from kafkacommon import errors
from util.waiting import WaitTimeout
from zk.admin import LEGAL_NAME, MAX_NAME, TopicError, create_topic, delete_topic, parse_configs, validate_name
from zk.paths import OFFSETS_TOPIC

UNSUPPORTED_VERSION = 35


def response_version(req: Request, values: dict[str, Any]) -> int:
    """ApiVersions answers an error (an unsupported version) with a v0 body, as Kafka does."""
    if req.api_key == API_VERSIONS and values.get("error_code"):
        return 0
    return req.api_version


def topic_name_error(name: str) -> str | None:
    """Why Kafka 2.8 refuses a topic name (org.apache.kafka.common.internals.Topic.validate), in its words."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_NAME:
        return f"Topic name is illegal, it can't be longer than {MAX_NAME} characters, topic name: {name}"
    if not LEGAL_NAME.match(name):
        return (f'Topic name "{name}" is illegal, it contains a character other than ASCII alphanumerics, '
                "'.', '_' and '-'")
    return None


def handlers(ctx: ListenerContext) -> dict[int, Any]:
    async def api_versions(req: Request, conn: Connection) -> dict[str, Any]:
        keys = [dict(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(SUPPORTED.items())]
        if req.body is None:  # above our maximum: error 35 and the ranges, in a v0 body
            return dict(error_code=UNSUPPORTED_VERSION, api_keys=keys)
        return dict(error_code=errors.NONE, api_keys=keys, throttle_time_ms=0)

    async def metadata(req: Request, conn: Connection) -> dict[str, Any]:
        v, body, state = req.api_version, req.body, ctx.state
        live = dict(state.live_brokers)
        brokers = []
        for bid in sorted(live):
            ep = ctx.endpoint_of(bid)
            if ep is not None:
                brokers.append(dict(node_id=bid, host=ep[0], port=ep[1], rack=ctx.rack_of(bid)))
        by_topic: dict[str, list] = {}
        for (t, _p), info in list(state.metadata.items()):
            by_topic.setdefault(t, []).append(info)
        if body.topics is None or (v == 0 and not body.topics):
            names = sorted(by_topic)
        else:
            names = [t.name for t in body.topics]
        topics = []
        auto = ctx.auto_create_topics and (v < 4 or body.allow_auto_topic_creation)
        for name in names:
            infos = sorted(by_topic.get(name, ()), key=lambda i: i.partition)
            if not infos:
                code = errors.UNKNOWN_TOPIC_OR_PARTITION
                if auto and name != OFFSETS_TOPIC and auto_create(name):
                    code = errors.LEADER_NOT_AVAILABLE   # as Kafka answers for a topic it just created
                topics.append(dict(error_code=code, name=name, is_internal=False, partitions=[]))
                continue
            parts = []
            for i in infos:
                offline = [r for r in i.replicas if r not in live]
                code = errors.NONE
                if i.leader < 0 or i.leader not in live:
                    code = errors.LEADER_NOT_AVAILABLE
                elif v == 0 and offline:
                    code = 9  # REPLICA_NOT_AVAILABLE: only v0 reports offline replicas as an error
                # Kafka 2.8's MetadataCache: a leader that is not live is no leader (-1)
                parts.append(dict(error_code=code, partition_index=i.partition, leader_id=i.leader if i.leader in live
                                  else -1, leader_epoch=i.leader_epoch, replica_nodes=list(i.replicas),
                                  isr_nodes=list(i.isr), offline_replicas=offline))
            topics.append(dict(error_code=errors.NONE, name=name, is_internal=name == OFFSETS_TOPIC,
                               partitions=parts))
        return dict(throttle_time_ms=0, brokers=brokers, cluster_id=ctx.cluster_id,
                    controller_id=state.controller_id if state.controller_id in live else -1, topics=topics)

    creating: set[str] = set()

    def auto_create(name: str) -> bool:
        """Start creating ``name`` (auto.create.topics.enable) on the pool; False: not a legal name."""
        if topic_name_error(name):
            return False
        if name in creating:
            return True
        creating.add(name)

        def create() -> None:
            try:
                rf = min(ctx.default_replication_factor, max(len(ctx.state.live_brokers), 1))
                create_topic(ctx.zk, name, ctx.num_partitions, rf, {}, timeout_s=30)
            except Exception:  # already made by another broker, or no leaders yet: the client asks again
                pass
            finally:
                creating.discard(name)
        ctx.pool.submit(create)
        return True

    async def find_coordinator(req: Request, conn: Connection) -> dict[str, Any]:
        key_type = req.body.key_type if req.api_version >= 1 else 0
        if key_type == 1:   # a transactional id: its __transaction_state partition's leader
            r = ctx.txns.find_coordinator(req.body.key)
        elif key_type == 0:
            r = ctx.groups.find_coordinator(FindCoordinatorRequest(req.body.key))
        else:
            return dict(throttle_time_ms=0, error_code=errors.INVALID_REQUEST, error_message=None, node_id=-1,
                        host="", port=-1)
        ep = ctx.endpoint_of(r.node_id) if r.error_code == errors.NONE else None
        if ep is None:
            code = r.error_code or errors.COORDINATOR_NOT_AVAILABLE
            return dict(throttle_time_ms=0, error_code=code, error_message=None, node_id=-1, host="", port=-1)
        return dict(throttle_time_ms=0, error_code=errors.NONE, error_message=None, node_id=r.node_id,
                    host=ep[0], port=ep[1])

    def create_one(t: Any, timeout_ms: int, validate_only: bool) -> tuple[int, str | None, int, int]:
        """Kafka 2.8's checks (ZkAdminManager.createTopics), in its order and with its messages: the tools
        print them as they come (kafka-topics.sh: "Error while executing topic command : <message>")."""
        partitions = ctx.num_partitions if t.num_partitions == -1 else t.num_partitions
        rf = ctx.default_replication_factor if t.replication_factor == -1 else t.replication_factor
        if t.name in ctx.state.topic_partitions:
            return TopicAlreadyExistsError.errno, f"Topic '{t.name}' already exists.", partitions, rf
        if t.assignments:
            return InvalidRequestError.errno, "manual replica assignments are not supported", partitions, rf
        if partitions < 1:
            return InvalidPartitionsError.errno, "Number of partitions must be larger than 0.", partitions, rf
        if rf < 1:
            return InvalidReplicationFactorError.errno, "Replication factor must be larger than 0.", partitions, rf
        live = len(ctx.zk.read_brokers())  # as Kafka's AdminZkClient: the brokers registered in ZooKeeper
        if rf > live:
            return (InvalidReplicationFactorError.errno,
                    f"Replication factor: {rf} larger than available brokers: {live}.", partitions, rf)
        illegal = topic_name_error(t.name)
        if illegal:
            return InvalidTopicError.errno, illegal, partitions, rf
        try:
            configs = parse_configs([f"{c.name}={c.value}" for c in t.configs])
        except TopicError as e:
            return InvalidConfigurationError.errno, str(e), partitions, rf
        if validate_only:
            return errors.NONE, None, partitions, rf
        try:
            create_topic(ctx.zk, t.name, partitions, rf, configs, timeout_s=max(timeout_ms, 0) / 1000)
        except WaitTimeout:
            if timeout_ms > 0:
                return errors.REQUEST_TIMED_OUT, "partitions not all led yet", partitions, rf
        except TopicError as e:
            if "already exists" in str(e):   # created by another broker's request a moment ago
                return TopicAlreadyExistsError.errno, f"Topic '{t.name}' already exists.", partitions, rf
            return InvalidRequestError.errno, str(e), partitions, rf
        return errors.NONE, None, partitions, rf

    async def create_topics(req: Request, conn: Connection) -> dict[str, Any]:
        out = []
        for t in req.body.topics:
            code, msg, n, rf = await ctx.blocking(create_one, t, req.body.timeout_ms, req.body.validate_only)
            out.append(dict(name=t.name, error_code=code, error_message=msg, num_partitions=n if not code else -1,
                            replication_factor=rf if not code else -1, configs=[]))   # Kafka: [] on an error too
        return dict(throttle_time_ms=0, topics=out)

    def delete_one(name: str, timeout_ms: int) -> tuple[int, str | None]:
        if not ctx.delete_topic_enable:
            return TopicDeletionDisabledError.errno, "delete.topic.enable is false"
        if name == OFFSETS_TOPIC:
            return InvalidRequestError.errno, f"{name} is an internal topic and cannot be deleted"
        try:
            delete_topic(ctx.zk, name, timeout_s=max(timeout_ms, 1) / 1000)
        except WaitTimeout:
            return errors.REQUEST_TIMED_OUT, "the controller has not deleted it yet"
        except TopicError as e:
            if "does not exist" in str(e):
                return UnknownTopicOrPartitionError.errno, str(e)
            return InvalidRequestError.errno, str(e)
        return errors.NONE, None

    async def delete_topics(req: Request, conn: Connection) -> dict[str, Any]:
        names = req.body.topic_names if req.api_version <= 5 else [t.name for t in req.body.topics]
        out = []
        for name in names:
            code, msg = await ctx.blocking(delete_one, name, req.body.timeout_ms)
            out.append(dict(name=name, error_code=code, error_message=msg))
        return dict(throttle_time_ms=0, responses=out)

    return {18: api_versions, 3: metadata, 10: find_coordinator, 19: create_topics, 20: delete_topics}
