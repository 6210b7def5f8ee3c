"""ApiVersions, Metadata and FindCoordinator on the Kafka listener.

Metadata comes from this broker's metadata cache (the controller's
UpdateMetadata), as Kafka's does; brokers are the live ones, each at its
advertised Kafka listener.  A Metadata request for an unknown topic creates it
(``auto.create.topics.enable`` and the request's ``allow_auto_topic_creation``)
through ZooKeeper as Kafka 2.8's broker does (zk/admin.py), from any broker; an
internal topic (``__consumer_offsets``, ``__transaction_state``) is created as the
broker creates it for a FindCoordinator, with its own partitions, replication
factor and configs.  CreateTopics, DeleteTopics and CreatePartitions are
listener/admin.py's.
"""
from __future__ import annotations

from typing import Any

from coordinator.messages import FindCoordinatorRequest
from listener.context import ListenerContext
from listener.protocol import API_VERSIONS, SUPPORTED, Request
from listener.server import Connection
from kafkacommon import errors
from transactions.config import TRANSACTION_STATE_TOPIC
from zk.admin import TopicError, create_topic, validate_name
from zk.paths import OFFSETS_TOPIC

UNSUPPORTED_VERSION = 35
#: Kafka's ``Topic.isInternal``: Metadata marks these ``is_internal``
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


def response_version(req: Request, values: dict[str, Any]) -> int:
    """ApiVersions answers an error (an unsupported version) with a v0 body, as Kafka does."""
    if req.api_key == API_VERSIONS and values.get("error_code"):
        return 0
    return req.api_version


def handlers(ctx: ListenerContext) -> dict[int, Any]:
    async def api_versions(req: Request, conn: Connection) -> dict[str, Any]:
        if req.body is None:
            # above our maximum: error 35 and, as Kafka 2.8's ApiVersionsRequest.getErrorResponse, only
            # ApiVersions' own range (the client retries with a version in it), in a v0 body
            lo, hi = SUPPORTED[API_VERSIONS]
            return dict(error_code=UNSUPPORTED_VERSION,
                        api_keys=[dict(api_key=API_VERSIONS, min_version=lo, max_version=hi)])
        keys = [dict(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(SUPPORTED.items())]
        # v3's finalized features: none, in epoch 0 (Kafka 2.8's controller writes an empty /feature znode at
        # inter.broker.protocol.version 2.8, version 0: its brokers' FinalizedFeatureCache has epoch 0)
        return dict(error_code=errors.NONE, api_keys=keys, throttle_time_ms=0, finalized_features_epoch=0)

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
                if auto and name in INTERNAL_TOPICS:
                    # Kafka 2.8.2's AutoTopicCreationManager: an internal topic with its own partitions, replication
                    # factor and configs; INVALID_REPLICATION_FACTOR below that many live brokers
                    made = ctx.create_internal_topic(name)
                    if made is not None:
                        code = errors.LEADER_NOT_AVAILABLE if made else errors.INVALID_REPLICATION_FACTOR
                elif auto and auto_create(name):
                    code = errors.LEADER_NOT_AVAILABLE   # as Kafka answers for a topic it just created
                topics.append(dict(error_code=code, name=name, is_internal=name in INTERNAL_TOPICS, partitions=[]))
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
            topics.append(dict(error_code=errors.NONE, name=name, is_internal=name in INTERNAL_TOPICS,
                               partitions=parts))
        return dict(throttle_time_ms=0, brokers=brokers, cluster_id=ctx.cluster_id,
                    controller_id=state.controller_id if state.controller_id in live else -1, topics=topics)

    creating: set[str] = set()

    def auto_create(name: str) -> bool:
        """Start creating ``name`` (auto.create.topics.enable) on the pool; False: not a legal name."""
        try:
            validate_name(name)
        except TopicError:
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
        # Kafka 2.8 answers every FindCoordinator with its error's message: Errors.message(), "NONE" for none
        key_type = req.body.key_type if req.api_version >= 1 else 0
        if key_type == 1:   # a transactional id: its __transaction_state partition's leader
            r = ctx.txns.find_coordinator(req.body.key)
        elif key_type == 0:
            r = ctx.groups.find_coordinator(FindCoordinatorRequest(req.body.key))
        else:
            return dict(throttle_time_ms=0, error_code=errors.INVALID_REQUEST,
                        error_message=errors.message(errors.INVALID_REQUEST), node_id=-1, host="", port=-1)
        ep = ctx.endpoint_of(r.node_id) if r.error_code == errors.NONE else None
        if ep is None:
            code = r.error_code or errors.COORDINATOR_NOT_AVAILABLE
            return dict(throttle_time_ms=0, error_code=code, error_message=errors.message(code), node_id=-1, host="",
                        port=-1)
        return dict(throttle_time_ms=0, error_code=errors.NONE, error_message="NONE", node_id=r.node_id,
                    host=ep[0], port=ep[1])

    return {18: api_versions, 3: metadata, 10: find_coordinator}
