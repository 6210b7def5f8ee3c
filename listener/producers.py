"""InitProducerId on the Kafka listener: producer ids for idempotent producers.

As Kafka 2.8 does in ZooKeeper mode, each broker claims blocks of 1,000 ids from
/latest_producer_id_block (a conditional update, so no two brokers hand out the
same id) and gives a producer without a transactional id a fresh id with epoch 0.
Transactions are not supported: a transactional id is refused.
"""
from __future__ import annotations

import threading
from typing import Any

from listener.context import ListenerContext
from listener.protocol import Request
from listener.server import Connection
from kafkacommon import errors

BLOCK_SIZE = 1000


class ProducerIds:
    def __init__(self, zk: Any, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._lock = threading.Lock()
        self._next, self._end = 0, -1

    def next_id(self) -> int:
        with self._lock:
            if self._next > self._end:
                self._next, self._end = self.zk.allocate_producer_id_block(self.broker_id, BLOCK_SIZE)
            pid = self._next
            self._next += 1
            return pid


def handlers(ctx: ListenerContext) -> dict[int, Any]:
    ids = ProducerIds(ctx.zk, ctx.broker_id)

    async def init_producer_id(req: Request, conn: Connection) -> dict[str, Any]:
        if req.body.transactional_id is not None:
            return dict(throttle_time_ms=0, error_code=errors.INVALID_REQUEST, producer_id=-1, producer_epoch=-1)
        try:
            pid = await ctx.blocking(ids.next_id)
        except Exception:  # ZooKeeper unreachable: the client retries
            return dict(throttle_time_ms=0, error_code=errors.COORDINATOR_NOT_AVAILABLE, producer_id=-1,
                        producer_epoch=-1)
        return dict(throttle_time_ms=0, error_code=errors.NONE, producer_id=pid, producer_epoch=0)

    return {22: init_producer_id}
