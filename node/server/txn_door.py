"""The transaction coordinator's door for the Kafka listener: FindCoordinator for transactional ids, and one
coroutine per transactional API, on :mod:`transactions.messages` types.

FindCoordinator (key type 1) is answered from this broker's metadata cache: the leader of the id's
``__transaction_state`` partition, or COORDINATOR_NOT_AVAILABLE; a cache with no such topic has the broker
create it first (Kafka creates it on the first transactional FindCoordinator).  The other APIs go to this
broker's :class:`node.shells.txn_shell.TxnShell` on a pool thread (a new transactional id may take a
producer id block from ZooKeeper), and their answers are awaited on the listener's loop.
"""
from __future__ import annotations

import asyncio
from concurrent.futures import Executor, Future
from typing import Any, Callable

from coordinator.messages import FindCoordinatorResponse
from kafkacommon import errors
from kafkacommon.hashing import partition_for
from node.shells.txn_shell import TxnShell
from transactions import messages as t
from transactions.config import TRANSACTION_STATE_TOPIC

_EXTRA_WAIT_S = 30.0


class TxnDoor:
    def __init__(self, state: Any, shell: TxnShell, pool: Executor | None,
                 create_topic: Callable[[], None] | None, offsets_partitions: Callable[[], int]) -> None:
        self.state = state
        self.shell = shell
        self.pool = pool
        self.create_topic = create_topic            # lazy creation of __transaction_state (returns at once)
        self.offsets_partitions = offsets_partitions

    def find_coordinator(self, key: str) -> FindCoordinatorResponse:
        p = self.shell.partition_of(key)
        info = self.state.metadata.get((TRANSACTION_STATE_TOPIC, p))
        if TRANSACTION_STATE_TOPIC not in self.state.topic_partitions:
            if self.create_topic is not None:
                self.create_topic()
            return FindCoordinatorResponse(errors.COORDINATOR_NOT_AVAILABLE)
        if info is None or info.leader < 0 or info.leader not in self.state.live_brokers:
            return FindCoordinatorResponse(errors.COORDINATOR_NOT_AVAILABLE, partition=p)
        host, port, _ = self.state.live_brokers[info.leader]
        return FindCoordinatorResponse(errors.NONE, info.leader, host, port, p)

    async def _ask(self, submit: Callable[[Any, bool], Future | None], req: Any) -> Any:
        fut = await asyncio.get_running_loop().run_in_executor(self.pool, submit, req, True)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(fut),
                                          self.shell.config.max_timeout_ms / 1000 + _EXTRA_WAIT_S)
        except asyncio.TimeoutError:
            return req.error_response(errors.NOT_COORDINATOR)

    async def init_producer_id(self, req: t.InitProducerIdRequest) -> t.InitProducerIdResponse:
        return await self._ask(self.shell.init_producer_id, req)

    async def add_partitions(self, req: t.AddPartitionsToTxnRequest) -> t.AddPartitionsToTxnResponse:
        return await self._ask(self.shell.add_partitions, req)

    async def add_offsets(self, req: t.AddOffsetsToTxnRequest) -> t.TxnErrorResponse:
        """The group's __consumer_offsets partition joins the transaction."""
        p = partition_for(req.group_id, self.offsets_partitions())
        return await self._ask(self.shell.add_offsets, t.AddOffsetsToTxnRequest(
            req.transactional_id, req.producer_id, req.producer_epoch, req.group_id, p))

    async def end_txn(self, req: t.EndTxnRequest) -> t.TxnErrorResponse:
        return await self._ask(self.shell.end_txn, req)
