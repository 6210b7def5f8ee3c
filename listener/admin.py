"""CreateTopics, DeleteTopics and CreatePartitions on the Kafka listener: only the controller serves them,
as in Kafka 2.8 (KafkaApis answers NOT_CONTROLLER on any other broker; clients find the controller through
Metadata and ask it again).

The controller broker does what Kafka's ZkAdminManager does: it checks the request, writes ZooKeeper
(zk/admin.py: the topic's configs then its assignment; a topic's new assignment; a deletion request), and
waits, up to the request's timeout, until its own metadata cache shows the result (every partition led, or
the topic gone), else answers REQUEST_TIMED_OUT; a timeout of 0 or less answers that at once, after the
writes.  The controller's watches do the rest.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from listener.configs import IO_ERRORS, io_error, topic_entries
from listener.context import ListenerContext
from listener.protocol import Request
from listener.server import Connection
from kafkacommon import errors
from util.waiting import WaitTimeout, wait_for
from zk import paths
from zk.admin import TopicError, add_partitions, check_new_topic, delete_topic, draw_assignment, write_topic

NO_NUM_PARTITIONS = NO_REPLICATION_FACTOR = -1


def handlers(ctx: ListenerContext) -> dict[int, Any]:
    def led(topic: str, partitions: int) -> Callable[[], bool]:
        """DelayedCreatePartitions' test, on this broker's metadata cache: every partition has a leader."""
        def check() -> bool:
            infos = [ctx.state.metadata.get((topic, p)) for p in range(partitions)]
            return all(i is not None and i.leader >= 0 for i in infos)
        return check

    def await_(cond: Callable[[], bool], deadline: float, what: str) -> int:
        try:
            wait_for(cond, max(deadline - time.monotonic(), 0.0), what)
        except WaitTimeout:
            return errors.REQUEST_TIMED_OUT
        return errors.NONE

    # ------------------------------------------------------------------ CreateTopics

    def create_one(t: Any, validate_only: bool) -> tuple[int, str | None, dict | None]:
        """ZkAdminManager.createTopics for one topic: -> (error, message, the written assignment or None)."""
        if t.name in ctx.state.topic_partitions:
            return errors.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.", None
        nulls = [c.name for c in t.configs if c.value is None]
        if nulls:
            return errors.INVALID_REQUEST, f"Null value not supported for topic configs : {','.join(nulls)}", None
        if (t.num_partitions != NO_NUM_PARTITIONS or t.replication_factor != NO_REPLICATION_FACTOR) and t.assignments:
            return (errors.INVALID_REQUEST, "Both numPartitions or replicationFactor and replicasAssignments were set. "
                                            "Both cannot be used at the same time.", None)
        configs = {c.name: c.value for c in t.configs}
        try:
            if t.assignments:
                assignment = {a.partition_index: tuple(a.broker_ids) for a in t.assignments}
            else:
                n = ctx.num_partitions if t.num_partitions == NO_NUM_PARTITIONS else t.num_partitions
                rf = ctx.default_replication_factor if t.replication_factor == NO_REPLICATION_FACTOR \
                    else t.replication_factor
                assignment = draw_assignment(sorted(ctx.state.live_brokers), n, rf)
            check_new_topic(ctx.zk, t.name, assignment, configs)
            if not validate_only:
                write_topic(ctx.zk, t.name, assignment, configs)
        except TopicError as e:
            return e.code, str(e), None
        except IO_ERRORS as e:
            return (*io_error(e), None)
        return errors.NONE, None, assignment

    def create_result(t: Any, code: int, msg: str | None, assignment: dict | None, v: int) -> dict[str, Any]:
        if code != errors.NONE or assignment is None:
            return dict(name=t.name, error_code=code, error_message=msg, num_partitions=-1, replication_factor=-1,
                        configs=[], topic_config_error_code=errors.NONE)
        configs = {c.name: c.value for c in t.configs}
        entries = topic_entries(ctx, configs, None, False, False) if v >= 5 else []
        return dict(name=t.name, error_code=code, error_message=msg, num_partitions=len(assignment),
                    replication_factor=len(assignment[min(assignment)]) if assignment else -1,
                    topic_config_error_code=errors.NONE,
                    configs=[dict(name=e["name"], value=e["value"], read_only=False, config_source=e["config_source"],
                                  is_sensitive=False) for e in entries])

    async def create_topics(req: Request, conn: Connection) -> dict[str, Any]:
        body, v = req.body, req.api_version
        names = [t.name for t in body.topics]
        if not ctx.is_controller():
            # Kafka 2.8.2 answers an empty message here (conformance CreateTopics.*.not_controller)
            return dict(throttle_time_ms=0, topics=[dict(name=n, error_code=errors.NOT_CONTROLLER, error_message="",
                                                          num_partitions=-1, replication_factor=-1, configs=[])
                                                     for n in names])
        deadline = time.monotonic() + max(body.timeout_ms, 0) / 1000
        out, made = [], []
        for t in body.topics:
            if names.count(t.name) > 1:
                out.append(create_result(t, errors.INVALID_REQUEST, "Found multiple entries for this topic.", None, v))
                continue
            code, msg, assignment = await ctx.blocking(create_one, t, bool(body.validate_only))
            out.append(create_result(t, code, msg, assignment, v))
            if code == errors.NONE and not body.validate_only:
                made.append((out[-1], t.name, len(assignment)))
        for result, name, n in made:
            code = errors.REQUEST_TIMED_OUT if body.timeout_ms <= 0 else await ctx.blocking(
                await_, led(name, n), deadline, f"every partition of {name} to have a leader")
            if code != errors.NONE:
                result.update(error_code=code, error_message=None, num_partitions=-1, replication_factor=-1, configs=[])
        return dict(throttle_time_ms=0, topics=out)

    # ------------------------------------------------------------------ DeleteTopics

    def delete_one(name: str, timeout_ms: int) -> tuple[int, str | None]:
        if name not in ctx.state.topic_partitions:
            return errors.UNKNOWN_TOPIC_OR_PARTITION, None
        if name == paths.OFFSETS_TOPIC:
            return errors.INVALID_REQUEST, f"{name} is an internal topic and cannot be deleted"
        try:
            delete_topic(ctx.zk, name, timeout_s=max(timeout_ms, 1) / 1000)
        except WaitTimeout:
            return errors.REQUEST_TIMED_OUT, None
        except IO_ERRORS as e:   # TopicError among them
            return io_error(e)
        return errors.NONE, None

    async def delete_topics(req: Request, conn: Connection) -> dict[str, Any]:
        v = req.api_version
        names = req.body.topic_names if v <= 5 else [t.name for t in req.body.topics]
        if not ctx.is_controller():
            code = errors.NOT_CONTROLLER
        elif not ctx.delete_topic_enable:
            code = errors.INVALID_REQUEST if v < 3 else errors.TOPIC_DELETION_DISABLED
        else:
            code = None
        out = []
        for name in names:
            c, msg = (code, None) if code is not None else await ctx.blocking(delete_one, name, req.body.timeout_ms)
            out.append(dict(name=name, error_code=c, error_message=msg))
        return dict(throttle_time_ms=0, responses=out)

    # ------------------------------------------------------------------ CreatePartitions

    def partitions_one(t: Any, validate_only: bool) -> tuple[int, str | None]:
        manual = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
        try:
            if ctx.zk.exists(paths.delete_topic(t.name)) is not None:
                return errors.INVALID_TOPIC_EXCEPTION, "The topic is queued for deletion."
            add_partitions(ctx.zk, t.name, t.count, manual, validate_only)
        except IO_ERRORS as e:   # TopicError among them
            return io_error(e)
        return errors.NONE, None

    async def create_partitions(req: Request, conn: Connection) -> dict[str, Any]:
        body = req.body
        names = [t.name for t in body.topics]
        if not ctx.is_controller():
            return dict(throttle_time_ms=0, results=[dict(name=n, error_code=errors.NOT_CONTROLLER,
                                                           error_message=None) for n in names])
        deadline = time.monotonic() + max(body.timeout_ms, 0) / 1000
        out, made = [], []
        for t in body.topics:
            if names.count(t.name) > 1:
                out.append(dict(name=t.name, error_code=errors.INVALID_REQUEST, error_message="Duplicate topic in request."))
                continue
            code, msg = await ctx.blocking(partitions_one, t, bool(body.validate_only))
            out.append(dict(name=t.name, error_code=code, error_message=msg))
            if code == errors.NONE and not body.validate_only:
                made.append((out[-1], t.name, t.count))
        for result, name, n in made:
            code = errors.REQUEST_TIMED_OUT if body.timeout_ms <= 0 else await ctx.blocking(
                await_, led(name, n), deadline, f"the new partitions of {name} to have leaders")
            result["error_code"] = code
        return dict(throttle_time_ms=0, results=out)

    return {19: create_topics, 20: delete_topics, 37: create_partitions}

