"""A hosted partition's topic configs, resolved and applied, at its opening and live (a mixin of
``ReplicaManager``).

A log's :class:`kafkacommon.topic_config.LogConfig` is its topic's overrides (``/config/topics/<t>``) over
the broker's defaults (its dynamic configs, then cluster.yaml, then Kafka's).  It is resolved when the
broker first hosts the partition, and again when the topic's configs change (a ``topics/<t>`` change
notification: :meth:`reconfigure_topic`) or the broker's defaults do (``brokers/<id>`` or
``brokers/<default>``: :meth:`reconfigure_all`), as Kafka's TopicConfigHandler and DynamicLogConfig do.
What reads the ``LogConfig`` at each use (retention, the cleaner, max.message.bytes, the append rules)
takes the new one at once; what the log and the replication core keep (roll sizes and times, index and
flush settings, min.insync.replicas) is set here.
"""
from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from kafkacommon.topic_config import LogConfig, log_config

if TYPE_CHECKING:
    from node.replicas.hosted import Hosted
    from replication.partition_types import ReplicaSettings


class LogSettingsMixin:
    hosted: dict[tuple[str, int], "Hosted"]
    events: Any
    settings: "ReplicaSettings"
    _log_default: Callable[[str], Any]

    def resolve_log_config(self, topic: str, overrides: dict) -> LogConfig:
        """``overrides`` over the broker's defaults; overrides that do not parse (written into ZooKeeper by
        hand) are reported and the broker defaults used."""
        try:
            return log_config(overrides, self._log_default)
        except ValueError as e:
            self.events.emit("topic_config_invalid", topic=topic, error=str(e), config=dict(overrides))
            return log_config({}, self._log_default)

    def apply_log_config(self, h: "Hosted", overrides: dict, lc: LogConfig) -> None:
        """With or without ``h.cond`` (it is re-entrant): the log and the replication core take ``lc``."""
        with h.cond:
            h.config, h.log_config = dict(overrides), lc
            if not h.log.closed:
                h.log.configure(segment_bytes=lc.segment_bytes, segment_ms=lc.max_segment_ms,
                                index_interval_bytes=lc.index_interval_bytes, segment_jitter_ms=lc.segment_jitter_ms,
                                max_index_bytes=lc.segment_index_bytes, flush_messages=lc.flush_messages,
                                file_delete_delay_ms=lc.file_delete_delay_ms)
            h.repl.settings = replace(self.settings, min_insync_replicas=lc.min_insync_replicas)

    def topic_setting(self, tp: tuple[str, int], key: str, default: Any) -> Any:
        """A hosted partition's effective topic config (e.g. max.message.bytes), else ``default``."""
        h = self.hosted.get(tp)
        return default if h is None else getattr(h.log_config, key.replace(".", "_"), default)

    def reconfigure_topic(self, topic: str, overrides: dict) -> list[int]:
        """The topic's configs changed: every hosted partition of it takes them (-> those partitions)."""
        done = []
        for (t, p), h in sorted(list(self.hosted.items())):
            if t == topic:
                self.apply_log_config(h, overrides, self.resolve_log_config(topic, overrides))
                done.append(p)
        return done

    def reconfigure_all(self) -> int:
        """The broker's defaults changed: every hosted partition resolves its own overrides again."""
        items = sorted(list(self.hosted.items()))
        for (t, _p), h in items:
            self.apply_log_config(h, h.config, self.resolve_log_config(t, h.config))
        return len(items)


def flusher_due(started_ms: int, now_ms: int, ran: threading.Event) -> bool:
    """Kafka's log flusher (``flushDirtyLogs``) runs once 30 s after the start, then every
    ``log.flush.scheduler.interval.ms``, whose default is never (kafkasim has no such key)."""
    return not ran.is_set() and now_ms - started_ms >= 30_000
