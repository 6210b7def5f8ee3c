"""The broker's config-change listener (Kafka 2.8's DynamicConfigManager over its
ZkNodeChangeNotificationListener): every broker watches ``/config/changes`` and applies each change
notification once, in order.

A ``topics/<t>`` notification: the topic's configs are read again and every hosted partition of it takes
them (its log and replication settings), and the controller, if this broker is it, reads the configs
again (an unclean election newly allowed happens then).  A ``brokers/<id>`` or ``brokers/<default>`` one for
this broker: its dynamic configs are read again and every hosted log resolves its defaults anew.  Each is a
``config_changed`` event.  Notifications older than 15 minutes are purged by whoever sees them.  At the
start, and after the ZooKeeper connection comes back (watches may have been lost with a session), every
notification present is looked at again; applying one twice changes nothing.  Which notifications to take,
and when one is obsolete, is zk/rules.py's.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from zk import rules
from zk.client import ZkClient
from zk.errors import CONNECTION_ERRORS, ZkError

log = logging.getLogger(__name__)
RETRY_S = 1.0


class ConfigChangeListener:
    def __init__(self, zk: ZkClient, emit: Callable[..., Any], on_topic: Callable[[str, dict], int],
                 on_broker: Callable[[str, dict], int | None], clock_ms: Callable[[], int] = lambda: int(
                     time.time() * 1000)) -> None:
        """``on_topic(topic, config)`` -> partitions reconfigured; ``on_broker(entity, config)`` -> logs
        reconfigured, or None when the entity is another broker's."""
        self.zk = zk
        self.emit = emit
        self.on_topic = on_topic
        self.on_broker = on_broker
        self.clock_ms = clock_ms
        self.last_sequence = -1
        self._ctimes: dict[str, int] = {}
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="config-change-listener", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._wake.set()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()

    def on_session_state(self, state: str) -> None:
        """kazoo's state listener: once connected again, look at every notification (a lost session took the
        watch with it)."""
        if state == "CONNECTED":
            self._wake.set()

    def _watch(self, _event: Any) -> None:
        self._wake.set()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stopped.is_set():
                return
            try:
                self.process()
            except (ZkError, *CONNECTION_ERRORS) as e:
                log.warning("config changes not read yet: %r", e)
                if self._stopped.wait(RETRY_S):
                    return
                self._wake.set()
            except Exception:   # keep the listener alive, and say what happened
                log.exception("config change processing failed")

    def process(self) -> int:
        """Apply the notifications not seen yet, then purge the obsolete ones; -> how many were applied."""
        children = self.zk.read_config_changes(watch=self._watch)
        applied = 0
        for name in rules.changes_to_process(children, self.last_sequence):
            try:
                got = self.zk.read_config_change(name)
            except ValueError as e:   # not a notification kafkasim can read: say so, and go on
                self.emit("config_change_skipped", notification=name, reason=str(e))
                got = None
            if got is not None:
                entity_path, ctime = got
                self._ctimes[name] = ctime
                self.apply(name, entity_path)
                applied += 1
            self.last_sequence = rules.change_sequence(name)
        now = self.clock_ms()
        for name in sorted(self._ctimes):
            if rules.change_obsolete(self._ctimes[name], now):
                self.zk.delete_config_change(name)
                del self._ctimes[name]
        for name in set(self._ctimes) - set(children):
            self._ctimes.pop(name, None)
        return applied

    def apply(self, name: str, entity_path: str) -> None:
        try:
            kind, entity = rules.parse_entity_path(entity_path)
        except ValueError as e:
            self.emit("config_change_skipped", notification=name, reason=str(e))
            return
        if kind not in ("topics", "brokers"):
            self.emit("config_change_skipped", notification=name, reason=f"kafkasim has no {kind} configs")
            return
        try:
            config = self.zk.read_entity_config(entity_path)
        except ValueError as e:
            self.emit("config_change_skipped", notification=name, reason=str(e))
            return
        count = self.on_topic(entity, config) if kind == "topics" else self.on_broker(entity, config)
        if count is not None:
            self.emit("config_changed", notification=name, entity_type=kind, entity_name=entity,
                      config=dict(config), applied_to=count)
