"""Producer ids a block at a time (Kafka 2.8's ProducerIdManager in ZooKeeper mode).

Each broker claims blocks of 1,000 ids from /latest_producer_id_block (a conditional update, so no two
brokers hand out the same id: ``ZkClient.allocate_producer_id_block``) and hands them out in order: to an
idempotent producer's InitProducerId, and to the transaction coordinator for a new transactional id (or a
producer id rotated after its epochs ran out).
"""
from __future__ import annotations

import threading
from typing import Any

BLOCK_SIZE = 1000


class ProducerIds:
    def __init__(self, zk: Any, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._lock = threading.Lock()
        self._next, self._end = 0, -1

    def next_id(self) -> int:
        """The next id; claims a block from ZooKeeper when the current one is used up (raises ZkError when
        ZooKeeper cannot be reached)."""
        with self._lock:
            if self._next > self._end:
                self._next, self._end = self.zk.allocate_producer_id_block(self.broker_id, BLOCK_SIZE)
            pid = self._next
            self._next += 1
            return pid
