"""InitProducerId on the Kafka listener: producer ids for idempotent and transactional producers.

Without a transactional id, a producer gets a fresh id (from the broker's block of ids claimed in ZooKeeper,
zk/producer_ids.py) and epoch 0, as Kafka 2.8 does.  With one, the request goes to the transaction
coordinator of the id (node/server/txn_door.py; NOT_COORDINATOR elsewhere), which bumps the epoch, fences
an older producer, and may answer CONCURRENT_TRANSACTIONS while it aborts an open transaction.  A producer
id without an epoch (or the other way round) is INVALID_REQUEST; before v4 PRODUCER_FENCED is answered as
INVALID_PRODUCER_EPOCH, as Kafka does for older clients.
"""
from __future__ import annotations

from typing import Any

from listener.context import ListenerContext
from listener.protocol import Request
from listener.server import Connection
from kafkacommon import errors
from transactions.messages import InitProducerIdRequest


def handlers(ctx: ListenerContext) -> dict[int, Any]:
    async def init_producer_id(req: Request, conn: Connection) -> dict[str, Any]:
        body, v = req.body, req.api_version
        pid, epoch = (body.producer_id, body.producer_epoch) if v >= 3 else (-1, -1)
        if (pid == -1) != (epoch == -1):
            return dict(throttle_time_ms=0, error_code=errors.INVALID_REQUEST, producer_id=-1, producer_epoch=-1)
        if body.transactional_id is not None:
            r = await ctx.txns.init_producer_id(InitProducerIdRequest(body.transactional_id,
                                                                      body.transaction_timeout_ms, pid, epoch))
            code = r.error_code
            if v < 4 and code == errors.PRODUCER_FENCED:
                code = errors.INVALID_PRODUCER_EPOCH
            return dict(throttle_time_ms=0, error_code=code, producer_id=r.producer_id, producer_epoch=r.producer_epoch)
        try:
            new = await ctx.blocking(ctx.producer_ids)
        except Exception:  # ZooKeeper unreachable: the client retries
            return dict(throttle_time_ms=0, error_code=errors.COORDINATOR_NOT_AVAILABLE, producer_id=-1,
                        producer_epoch=-1)
        return dict(throttle_time_ms=0, error_code=errors.NONE, producer_id=new, producer_epoch=0)

    return {22: init_producer_id}
