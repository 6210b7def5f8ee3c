"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments on the Kafka listener: the
controller serves them, as in Kafka 2.8 (any other broker answers NOT_CONTROLLER: ElectLeaders for each
partition with a top-level NONE, the reassignment APIs at the top level).

Each goes to this broker's controller event thread (``ListenerContext.controller``), whose handlers
(controller/handlers.py) decide through the controller core (controller/elect_request.py,
controller/reassignment.py) and write ZooKeeper fenced by the controller epoch.  ElectLeaders then waits, up to
the request's timeout, until this broker's metadata cache shows each new leader (Kafka's DelayedElectLeader),
else REQUEST_TIMED_OUT for those partitions; a request with no partitions (null) elects every partition the
metadata cache knows and leaves out of its answer those that needed no election.
"""
from __future__ import annotations

import time
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from listener.context import ListenerContext
from listener.protocol import Request
from listener.server import Connection
from kafkacommon import errors
from util.waiting import WaitTimeout, wait_for

TP = tuple[str, int]
CONTROLLER_WAIT_S = 30.0    # how long a request waits for the controller's event thread at most


def _by_topic(rows: dict[TP, Any], make: Any) -> list[dict[str, Any]]:
    topics: dict[str, list] = {}
    for (t, p), value in rows.items():
        topics.setdefault(t, []).append(make(p, value))
    return [dict(name=t, partitions=ps) for t, ps in topics.items()]


def _top_message(code: int) -> str:
    """The reassignment APIs' top-level error_message, as Kafka 2.8.2 answers it: '' for NONE, else the
    error's default message (ApiError(error))."""
    return errors.message(code) or ""


def handlers(ctx: ListenerContext) -> dict[int, Any]:
    def wait_s(timeout_ms: int) -> float:
        return max(timeout_ms / 1000, CONTROLLER_WAIT_S)

    # ------------------------------------------------------------------ ElectLeaders

    def leaders_shown(expected: dict[TP, int], deadline: float) -> set[TP]:
        """DelayedElectLeader: wait until this broker's metadata cache shows each expected leader -> those not."""
        def missing() -> set[TP]:
            return {tp for tp, leader in expected.items()
                    if getattr(ctx.state.metadata.get(tp), "leader", None) != leader}
        try:
            wait_for(lambda: not missing(), max(deadline - time.monotonic(), 0.0), "the elected leaders")
        except WaitTimeout:
            pass
        return missing()

    async def elect_leaders(req: Request, conn: Connection) -> dict[str, Any]:
        b, v = req.body, req.api_version
        election_type = b.election_type if v >= 1 else 0
        every = b.topic_partitions is None
        tps = sorted(ctx.state.metadata) if every else list(dict.fromkeys(
            (t.topic, p) for t in b.topic_partitions for p in t.partitions or []))
        deadline = time.monotonic() + max(b.timeout_ms, 0) / 1000
        if election_type not in (0, 1):   # Kafka 2.8.2: UNKNOWN_SERVER_ERROR (docs/deviations.md)
            answers = {tp: (errors.INVALID_REQUEST, f"Unknown election type {election_type}", -1) for tp in tps}
        elif not ctx.is_controller() or ctx.controller is None:
            answers = {tp: (errors.NOT_CONTROLLER, None, -1) for tp in tps}
        else:
            try:
                answers = await ctx.blocking(ctx.controller.elect_leaders_request, tps, election_type,
                                             wait_s(b.timeout_ms))
            except FutureTimeout:
                answers = {tp: (errors.REQUEST_TIMED_OUT, None, -1) for tp in tps}
            except Exception as e:  # noqa: BLE001 - ZooKeeper failed the controller's event: Kafka's ApiError
                answers = {tp: (errors.UNKNOWN_SERVER_ERROR, repr(e), -1) for tp in tps}
            expected = {tp: a[2] for tp, a in answers.items() if a[0] == errors.NONE}
            if expected:
                late = await ctx.blocking(leaders_shown, expected, deadline)
                answers = {tp: (errors.REQUEST_TIMED_OUT, None, -1) if tp in late else a for tp, a in answers.items()}
        if every:   # an election of every partition answers only those elected or failed
            answers = {tp: a for tp, a in answers.items() if a[0] != errors.ELECTION_NOT_NEEDED}
        results: dict[str, list] = {}
        for (t, p), (code, msg, _leader) in answers.items():
            results.setdefault(t, []).append(dict(partition_id=p, error_code=code, error_message=msg))
        return dict(throttle_time_ms=0, error_code=errors.NONE, replica_election_results=[
            dict(topic=t, partition_result=ps) for t, ps in results.items()])

    # ------------------------------------------------------------------ AlterPartitionReassignments

    async def alter_reassignments(req: Request, conn: Connection) -> dict[str, Any]:
        b = req.body
        requested: dict[TP, tuple[int, ...] | None] = {}
        for t in b.topics or []:
            for p in t.partitions or []:
                requested[(t.name, p.partition_index)] = None if p.replicas is None else tuple(p.replicas)
        if not ctx.is_controller() or ctx.controller is None:
            code, results = errors.NOT_CONTROLLER, {}
        else:
            try:
                code, results = await ctx.blocking(ctx.controller.alter_reassignments, requested, wait_s(b.timeout_ms))
            except FutureTimeout:
                code, results = errors.REQUEST_TIMED_OUT, {}
            except Exception:  # noqa: BLE001 - ZooKeeper failed the controller's event
                code, results = errors.UNKNOWN_SERVER_ERROR, {}
        if code != errors.NONE:
            return dict(throttle_time_ms=0, error_code=code, error_message=_top_message(code), responses=[])
        return dict(throttle_time_ms=0, error_code=errors.NONE, error_message="", responses=_by_topic(
            results, lambda p, r: dict(partition_index=p, error_code=r[0], error_message=r[1])))

    # ------------------------------------------------------------------ ListPartitionReassignments

    async def list_reassignments(req: Request, conn: Connection) -> dict[str, Any]:
        b = req.body
        tps = None if b.topics is None else [(t.name, p) for t in b.topics for p in t.partition_indexes or []]
        if not ctx.is_controller() or ctx.controller is None:
            code, found = errors.NOT_CONTROLLER, {}
        else:
            try:
                code, found = await ctx.blocking(ctx.controller.list_reassignments, tps, wait_s(b.timeout_ms))
            except FutureTimeout:
                code, found = errors.REQUEST_TIMED_OUT, {}
            except Exception:  # noqa: BLE001 - ZooKeeper failed the controller's event
                code, found = errors.UNKNOWN_SERVER_ERROR, {}
        if code != errors.NONE:
            return dict(throttle_time_ms=0, error_code=code, error_message=_top_message(code), topics=[])
        return dict(throttle_time_ms=0, error_code=errors.NONE, error_message="", topics=_by_topic(
            found, lambda p, f: dict(partition_index=p, replicas=list(f[0]), adding_replicas=list(f[1]),
                                     removing_replicas=list(f[2]))))

    return {43: elect_leaders, 45: alter_reassignments, 46: list_reassignments}
