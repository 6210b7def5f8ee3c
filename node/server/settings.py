"""The settings each of a broker's parts takes, read from the cluster's config (cluster.yaml and its defaults)."""
from __future__ import annotations

from controller.core import ControllerSettings
from node.config import ClusterConfig
from replication.partition_types import ReplicaSettings


def group_config(cfg: ClusterConfig, planted: frozenset[str] = frozenset()):
    from coordinator.core import GroupConfig
    g = cfg.get
    return GroupConfig(
        commit_required_acks=1 if "commit-before-hw" in planted else g("offsets.commit.required.acks"),
        check_commit_generation="fenced-generation-commit" not in planted,
        min_session_timeout_ms=g("group.min.session.timeout.ms"),
        max_session_timeout_ms=g("group.max.session.timeout.ms"),
        initial_rebalance_delay_ms=g("group.initial.rebalance.delay.ms"),
        max_size=g("group.max.size"),
        offset_metadata_max_bytes=g("offset.metadata.max.bytes"),
        offsets_retention_ms=g("offsets.retention.minutes") * 60_000,
        offsets_retention_check_interval_ms=g("offsets.retention.check.interval.ms"),
        commit_timeout_ms=g("offsets.commit.timeout.ms"))

def txn_config(cfg: ClusterConfig):
    from transactions.config import TxnConfig
    g = cfg.get
    return TxnConfig(
        transactional_id_expiration_ms=g("transactional.id.expiration.ms"),
        max_timeout_ms=g("transaction.max.timeout.ms"),
        abort_timed_out_interval_ms=g("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        remove_expired_interval_ms=g("transaction.remove.expired.transaction.cleanup.interval.ms"),
        request_timeout_ms=g("request.timeout.ms"))


def controller_settings(cfg: ClusterConfig, broker_id: int) -> ControllerSettings:
    g = cfg.get
    return ControllerSettings(
        broker_id=broker_id,
        offsets_partitions=g("offsets.topic.num.partitions"),
        offsets_replication_factor=g("offsets.topic.replication.factor"),
        unclean_leader_election=g("unclean.leader.election.enable"),
        auto_leader_rebalance=g("auto.leader.rebalance.enable"),
        imbalance_check_interval_ms=g("leader.imbalance.check.interval.seconds") * 1000,
        imbalance_percentage=g("leader.imbalance.per.broker.percentage"),
        metadata_resend_interval_ms=g("kafkasim.controller.metadata.resend.interval.ms"),
        delete_topic_enable=g("delete.topic.enable"),
        expected_brokers=len(cfg.brokers),
        offsets_create_grace_ms=g("kafkasim.offsets.topic.create.grace.ms"),
        offsets_eager_create=g("kafkasim.offsets.topic.eager.create"),
        kip841_enable=g("kafkasim.isr.kip841.enable"),
        offsets_segment_bytes=g("offsets.topic.segment.bytes"),
    )


def replica_settings(cfg: ClusterConfig) -> ReplicaSettings:
    g = cfg.get
    return ReplicaSettings(g("replica.lag.time.max.ms"), g("min.insync.replicas"), g("kafkasim.isr.kip841.enable"))
