"""A simulated broker's config-change listener: node/shells/config_listener.py's job on the simulated world.

Each broker watches ``/config/changes`` in the ZooKeeper model and applies every change notification once,
in order (zk/rules.py's rules: which to take, when one is obsolete): a topic's configs reach its hosted
partitions (their ``min.insync.replicas``, which the replication core enforces) and the controller, if this
broker is it, reads the configs again (an unclean election newly allowed happens then); a broker's
dynamic configs reach the controller the same way.  Each is a ``config_changed`` event.
"""
from __future__ import annotations

from typing import Any

from zk import rules
from sim.zkdoor import CONNECTION_ERRORS

RETRY_MS = 200.0


class SimConfigListener:
    def __init__(self, broker) -> None:
        self.b = broker
        self.last_sequence = -1
        self._ctimes: dict[str, int] = {}

    def _watch(self, _ev: Any) -> None:
        self.process()

    def process(self) -> None:
        """Apply the notifications not seen yet (a lost connection: again shortly), purge obsolete ones."""
        b = self.b
        if not b.running or b.zk is None:
            return
        try:
            children = b.zk.read_config_changes(watch=self._watch)
            for name in rules.changes_to_process(children, self.last_sequence):
                got = b.zk.read_config_change(name)
                if got is not None:
                    self._ctimes[name] = got[1]
                    self.apply(name, got[0])
                self.last_sequence = rules.change_sequence(name)
            for name in sorted(self._ctimes):
                if rules.change_obsolete(self._ctimes[name], b.now()):
                    b.zk.delete_config_change(name)
                    del self._ctimes[name]
        except CONNECTION_ERRORS:
            b.world.on_node(b.node, RETRY_MS, self.process)

    def apply(self, name: str, entity_path: str) -> None:
        b = self.b
        try:
            kind, entity = rules.parse_entity_path(entity_path)
        except ValueError as e:
            b.emit("config_change_skipped", notification=name, reason=str(e))
            return
        if kind == "topics":
            config = b.zk.read_entity_config(entity_path)
            count = b.replicas.reconfigure_topic(entity, config)
        elif kind == "brokers" and entity in ("<default>", str(b.id)):
            config, count = b.zk.read_entity_config(entity_path), 0
        elif kind == "brokers":
            return
        else:
            b.emit("config_change_skipped", notification=name, reason=f"kafkasim has no {kind} configs")
            return
        b.controller.config_changed()
        b.emit("config_changed", notification=name, entity_type=kind, entity_name=entity, config=dict(config),
               applied_to=count)
