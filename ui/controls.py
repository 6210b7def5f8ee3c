"""The page's controls: what the CLI does, through the same ``launcher.cluster.Cluster`` and client library.

Every request becomes one ``ui_action`` line in ``<events dir>/ui.jsonl`` (docs/events.md), written right
after the action was carried out, whether it succeeded or not.
"""
from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

from node.events import EventLog
from node.server.session_file import SessionFile
from zk.client import expire_session

SIGNALS = {"kill": signal.SIGKILL, "terminate": signal.SIGTERM, "pause": signal.SIGSTOP,
           "resume": signal.SIGCONT}
BROKER_ACTIONS = frozenset({*SIGNALS, "start", "expire-session"})
ACTIONS = BROKER_ACTIONS | {"preferred-election", "produce", "member-start", "member-stop"}


class ControlError(ValueError):
    pass


class Controls:
    def __init__(self, cluster: Any, config_path: Path, log_path: Path):
        self.cluster = cluster
        self.config_path = config_path
        self.log = EventLog(log_path, -1)
        self._members: dict[str, tuple[Any, threading.Event, threading.Thread]] = {}
        self._n = 0

    def close(self) -> None:
        for cid in list(self._members):
            try:
                self._member_stop(cid)
            except Exception:
                pass
        self.log.close()

    def run(self, req: dict[str, Any], remote: str | None = None) -> dict[str, Any]:
        action = req.get("action")
        if action not in ACTIONS:
            raise ControlError(f"unknown action {action!r}: one of {', '.join(sorted(ACTIONS))}")
        target = req.get("broker")
        if action in BROKER_ACTIONS:
            if not isinstance(target, int) or target not in {b.id for b in self.cluster.cfg.brokers}:
                raise ControlError(f"{action}: 'broker' must be one of the cluster's broker ids, got {target!r}")
        params = {k: v for k, v in req.items() if k not in ("action", "broker")}
        ok, error, detail = True, None, ""
        try:
            detail = self._do(action, target, req)
        except Exception as e:  # the action failed: said on the page and in the log
            ok, error = False, f"{type(e).__name__}: {e}"
        self.log.emit("ui_action", action=action, target=target, params=params, ok=ok, error=error,
                      detail=detail, remote=remote)
        return {"ok": ok, "error": error, "detail": detail}

    def refused(self, action: Any, remote: str | None, why: str) -> None:
        """A request turned away before anything was done (no valid token, another site, not JSON): logged all
        the same; ``action`` None when it was refused before its body was read."""
        self.log.emit("ui_action", action="unread" if action is None else str(action), target=None, params={}, ok=False, error=f"refused: {why}",
                      detail="", remote=remote)

    def _do(self, action: str, b: int | None, req: dict[str, Any]) -> str:
        if action in SIGNALS:
            pid = self.cluster.signal_broker(b, SIGNALS[action])
            return f"broker {b} (pid {pid}): sent {SIGNALS[action].name}"
        if action == "start":
            return f"broker {b} started (pid {self.cluster.start_broker(b)})"
        if action == "expire-session":
            creds = SessionFile(self.cluster.cfg.broker(b).log_dir / "zk-session.json").credentials()
            if creds is None:
                raise RuntimeError(f"broker {b} has recorded no ZooKeeper session")
            expire_session(self.cluster.connect, *creds)
            return f"broker {b}: ZooKeeper session 0x{creds[0]:x} expired"
        if action == "preferred-election":
            return f"preferred leader election: {self.cluster.elect_preferred_leaders()} partition(s) moved"
        if action == "produce":
            topic = _text(req, "topic")
            count = int(req.get("count") or 1)
            if not 1 <= count <= 10_000:
                raise ControlError("produce: 'count' must be 1..10000")
            value = str(req.get("value") or "ui")
            return self._produce(topic, req.get("partition"), req.get("key"),
                                 [value if count == 1 else f"{value}-{i}" for i in range(count)])
        if action == "member-start":
            return self._member_start(_text(req, "group"), _text(req, "topic"))
        return self._member_stop(_text(req, "member"))

    def _produce(self, topic: str, partition: int | None, key: str | None, values: list[str]) -> str:
        """As ``kafkasim produce --verbose --acks all``: each record's partition and offset, then the count."""
        from client.metadata import ClusterClient
        from client.producer import Producer, parse_acks

        lines = []
        with ClusterClient([f"{b.host}:{b.port}" for b in self.cluster.cfg.brokers]) as cc:
            producer = Producer(cc, acks=parse_acks("all"), request_timeout_ms=10_000)
            for v in values:
                md = producer.send(topic, v.encode(), key=None if key is None else key.encode(), partition=partition)
                lines.append(f"{md.topic}-{md.partition}@{md.offset} (leader epoch {md.leader_epoch})")
        lines.append(f"{len(values)} records sent")
        return "\n".join(lines)[-2000:]

    def _member_start(self, group: str, topic: str) -> str:
        from client.group import GroupMember
        from client.metadata import ClusterClient

        self._n += 1
        cid = f"ui-{group}-{self._n}"
        cc = ClusterClient([f"{b.host}:{b.port}" for b in self.cluster.cfg.brokers])
        m = GroupMember(cc, group, [topic], client_id=cid, session_timeout_ms=6000, heartbeat_interval_ms=500)
        stop = threading.Event()

        def loop() -> None:  # consume and commit, as a console consumer in a group would
            while not stop.is_set():
                try:
                    m.poll(200)
                    if offsets := m.positions():
                        m.commit(offsets)
                except Exception:
                    stop.wait(0.2)
        t = threading.Thread(target=loop, daemon=True, name=cid)
        self._members[cid] = (m, stop, t)
        t.start()
        return f"member {cid} started in group {group} on {topic}"

    def _member_stop(self, cid: str) -> str:
        if cid not in self._members:
            raise ControlError(f"no member {cid!r} started here (started: {', '.join(self._members) or 'none'})")
        m, stop, t = self._members.pop(cid)
        stop.set()
        t.join(10)
        m.close(leave=True)
        return f"member {cid} left"

    def members(self) -> list[str]:
        return sorted(self._members)


def _text(req: dict[str, Any], key: str) -> str:
    v = req.get(key)
    if not isinstance(v, str) or not v.strip():
        raise ControlError(f"'{key}' is required")
    return v.strip()
