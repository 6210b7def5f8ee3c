"""What the listener's handlers reach on their broker: the same cores the gRPC path uses."""
from __future__ import annotations

import asyncio
import base64
import uuid
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class ListenerContext:
    broker_id: int
    state: Any                      # replication.broker_state.BrokerState: metadata cache, live brokers, controller
    replicas: Any                   # node.replicas.replica_manager.ReplicaManager: produce, fetch, offsets
    groups: Any                     # node.server.groups_servicer.GroupsDoor: the group coordinator's typed door
    txns: Any                       # node.server.txn_door.TxnDoor: the transaction coordinator's door
    producer_ids: Callable[[], int]  # the next producer id (a block at a time from ZooKeeper; may block)
    zk: Any                         # zk.client.ZkClient: topic administration (as kafka-topics.sh does it)
    endpoint_of: Callable[[int], tuple[str, int] | None]   # a broker's advertised Kafka listener
    rack_of: Callable[[int], str | None]
    cluster_id: str
    pool: Executor                  # blocking work: long polls, acks=all waits, topic creation
    message_max_bytes: int = 1048588
    num_partitions: int = 1
    default_replication_factor: int = 1
    delete_topic_enable: bool = True
    auto_create_topics: bool = True
    topic_config: Callable[[str], dict] = lambda topic: {}   # a topic's config overrides (ZooKeeper)
    broker_config: Any = None       # node.dynamic_config.DynamicBrokerConfig: the broker's defaults and dynamic configs
    is_controller: Callable[[], bool] = lambda: False   # this broker is the active controller
    # node.shells.controller_shell.ControllerShell: the requests the controller serves (ElectLeaders, reassignments)
    controller: Any = None
    # an internal topic (__consumer_offsets, __transaction_state) named in a Metadata request that may create topics:
    # starts creating it (returns at once); False when fewer brokers are live than its replication factor; None when
    # this broker does not create it (the controller creates __consumer_offsets unless it is created lazily)
    create_internal_topic: Callable[[str], bool | None] = lambda topic: None

    async def blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the pool, awaited on the listener's loop."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)


def cluster_id_for(zookeeper_connect: str) -> str:
    """A stable cluster id per ZooKeeper connect string (and chroot), in Kafka's form (22 chars of
    URL-safe base64 of a UUID)."""
    u = uuid.uuid5(uuid.NAMESPACE_URL, "kafkasim:" + zookeeper_connect)
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")
