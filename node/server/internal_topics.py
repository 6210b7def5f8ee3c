"""Kafka's lazy creation of an internal topic (``__consumer_offsets``, ``__transaction_state``) by the broker a
client asked: on a FindCoordinator (Kafka 2.8's ``KafkaApis``), or on a Metadata request that allows topic creation
(its ``DefaultAutoTopicCreationManager``).

The broker places the topic over the live brokers of its metadata cache, if there are at least the topic's
replication factor of them, and writes ``/config/topics/<t>`` then ``/brokers/topics/<t>``; the controller does
the rest.  One creation at a time, off the caller's thread; once this broker (or another, first) made it, never
again.
"""
from __future__ import annotations

import random
import threading
from typing import Any, Callable

from zk.errors import NodeExists


class InternalTopic:
    """One internal topic this broker creates when asked.  ``settings()`` gives (partitions, replication factor,
    the placement's config or None for the default compacted one, the topic config znode's or None for the
    placement's) as configured now; ``event``: the prefix of its two event types (``<event>_topic_create_requested``,
    ``<event>_topic_not_created``)."""

    def __init__(self, name: str, factor_key: str, event: str, state: Any, zk: Any, events: Any,
                 settings: Callable[[], tuple[int, int, dict | None, dict | None]]) -> None:
        self.name, self.factor_key, self.event = name, factor_key, event
        self.state, self.zk, self.events = state, zk, events
        self.settings = settings
        self._creating = threading.Lock()
        self._created = False

    def create(self) -> bool:
        """Start creating it, unless made or under way -> False when fewer brokers are live than its replication
        factor (then nothing is created: ``<event>_topic_not_created`` says why)."""
        enough = self.state.enough_live_brokers(self.settings()[1])
        if self._created or not self._creating.acquire(blocking=False):
            return enough
        threading.Thread(target=self._create, daemon=True, name=f"{self.event}-topic-create").start()
        return enough

    def _create(self) -> None:
        try:
            partitions, rf, config, znode_config = self.settings()
            a, why = self.state.internal_topic_to_create(self.name, partitions, rf, random.randrange, config=config,
                                                         factor_key=self.factor_key)
            if a is None:
                if why != "exists":
                    self.events.emit(f"{self.event}_topic_not_created", reason=why)
                return
            try:
                self.zk.create_topic_znode(a, znode_config)
            except NodeExists:
                self._created = True  # another broker created it first
                return
            self._created = True
            self.events.emit(f"{self.event}_topic_create_requested", partitions=len(a.partitions),
                             replication_factor=len(a.partitions[0]), topic_id=a.topic_id)
        except Exception as e:  # ZooKeeper unreachable: the next request tries again
            self.events.emit(f"{self.event}_topic_not_created", reason=repr(e))
        finally:
            self._creating.release()
