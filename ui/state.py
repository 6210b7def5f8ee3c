"""The web view's cluster state, derived from events by a pure reducer.

``ClusterState.apply(event)`` takes one event (a broker's event-log line, a
``ui_action`` line of the UI's own log, a chaos history line, or one of the
live observations the server makes: ``ui_zk``, ``ui_procs``, ``ui_replicas``,
``ui_group``) and changes the state (transactional ids: ui/txn_state.py); nothing here does
I/O or reads a clock.
Live and replay run the same code: replay feeds a finished run's lines in
``mono_ns`` order up to the chosen instant, live feeds them as they are written.

Every change marks what it touched in ``dirty`` so the server can send the
page only the rows that changed (``take_patch``).
"""
from __future__ import annotations

from typing import Any

from kafkacommon.hashing import partition_for
from ui.txn_state import TXN_TOPIC, TxnStateMixin

OFFSETS_TOPIC = "__consumer_offsets"
#: ``ui_action`` / history faults that take a broker away: they open failover rows.
FAULT_ACTIONS = frozenset({"kill", "terminate", "pause", "expire-session", "truncate", "disk-full", "disk-error"})
NOT_FAILOVER = frozenset({"preferred_admin", "auto_rebalance"})
#: How many recent events, controllers and failovers the state keeps.
KEEP_FAILOVERS = 200


def _ms(t_ns: int, t0_ns: int) -> float:
    return round((t_ns - t0_ns) / 1e6, 1)


class ClusterState(TxnStateMixin):
    def __init__(self, offsets_partitions: int = 50) -> None:
        self.n_offsets = offsets_partitions
        self.t_ns = 0
        self.brokers: dict[int, dict[str, Any]] = {}
        self.controller: dict[str, Any] = {"id": None, "epoch": 0}
        self.controllers: list[dict[str, Any]] = []
        self.partitions: dict[str, dict[str, Any]] = {}
        self.coordinators: dict[int, dict[str, Any]] = {}
        self.groups: dict[str, dict[str, Any]] = {}
        self.faults: list[dict[str, Any]] = []
        self.failovers: list[dict[str, Any]] = []
        self.dirty: set[str] = set()
        self._txn_init()          # transactional ids and their coordinators (ui/txn_state.py)

    # ------------------------------------------------------------------ helpers

    def _broker(self, b: int) -> dict[str, Any]:
        br = self.brokers.get(b)
        if br is None:
            br = self.brokers[b] = {"id": b, "status": "unknown", "broker_epoch": None, "session": None,
                                    "registered": None, "pid": None, "offline_dirs": []}
        self.dirty.add("brokers")
        return br

    def _partition(self, topic: str, p: int) -> dict[str, Any]:
        key = f"{topic}-{p}"
        st = self.partitions.get(key)
        if st is None:
            st = self.partitions[key] = {"key": key, "topic": topic, "partition": p, "leader": -1,
                                         "leader_epoch": -1, "isr": [], "replicas": [], "hw": {}, "leo": {},
                                         "zk_version": -1}
        self.dirty.add("p:" + key)
        return st

    def _add_replica(self, st: dict[str, Any], *brokers: int) -> None:
        for b in brokers:
            if b >= 0 and b not in st["replicas"]:
                st["replicas"].append(b)

    def _coordinator(self, p: int) -> dict[str, Any]:
        c = self.coordinators.get(p)
        if c is None:
            c = self.coordinators[p] = {"partition": p, "broker": None, "state": None, "load_ms": None,
                                        "groups": []}
        self.dirty.add(f"c:{p}")
        return c

    def _group(self, g: str) -> dict[str, Any]:
        gr = self.groups.get(g)
        if gr is None:
            p = partition_for(g, self.n_offsets)
            gr = self.groups[g] = {"group": g, "partition": p, "coordinator": None, "state": None,
                                   "generation": None, "protocol": None, "leader": None, "members": {},
                                   "offsets": {}, "lag": {}, "rebalances": 0}
            c = self._coordinator(p)
            if g not in c["groups"]:
                c["groups"].append(g)
        self.dirty.add("g:" + g)
        return gr

    def group_coordinator(self, g: str) -> int | None:
        st = self.partitions.get(f"{OFFSETS_TOPIC}-{partition_for(g, self.n_offsets)}")
        return st["leader"] if st and st["leader"] >= 0 else None

    # ------------------------------------------------------------------ the reducer

    def apply(self, e: dict[str, Any]) -> None:
        if "process" in e and "f" in e and "type" in e and "mono_ns" not in e:
            self._history(e)
            return
        t = e.get("mono_ns", 0)
        self.t_ns = max(self.t_ns, t)
        fn = getattr(self, "_on_" + str(e.get("type")), None)
        if fn is not None:
            fn(e, t)
        w = e.get("broker")
        if isinstance(w, int) and w >= 0 and not str(e.get("type")).startswith("ui_"):
            if w not in self.brokers or self.brokers[w]["status"] == "unknown":
                self._broker(w)["status"] = "up"

    # broker lifecycle
    def _on_broker_starting(self, e: dict, t: int) -> None:
        br = self._broker(e["broker"])
        br.update(status="up", pid=e.get("pid"), registered=False, offline_dirs=[])   # back online on a restart

    def _on_broker_registered(self, e: dict, t: int) -> None:
        self._broker(e["broker"]).update(broker_epoch=e.get("broker_epoch"), session=e.get("session_id"),
                                         registered=True)

    def _on_zk_session_expired(self, e: dict, t: int) -> None:
        self._broker(e["broker"]).update(session="expired", registered=False)

    def _stopped(self, e: dict, t: int) -> None:
        self._broker(e["broker"]).update(status="dead", registered=False, session=None)
        self._left(e["broker"], t)

    _on_broker_stopped = _on_shutdown_timed_out = _on_broker_start_failed = _stopped

    def _left(self, b: int, t: int) -> None:
        if self.controller["id"] == b:
            self.controller = {"id": None, "epoch": self.controller["epoch"]}
            self.dirty.add("controller")

    # controller
    def _on_controller_elected(self, e: dict, t: int) -> None:
        b, epoch = e["broker"], e["epoch"]
        self.controller = {"id": b, "epoch": epoch}
        self.controllers.append({"broker": b, "epoch": epoch, "mono_ns": t, "ts_ms": e.get("ts_ms")})
        self.dirty.update({"controller", "controllers"})
        for row in self._open_rows("detect_ms"):
            if row.get("was_controller") and b not in row["brokers"]:
                row.update(detect_ms=_ms(t, row["t0"]), detect_by="controller_elected")
                self.dirty.add("failovers")
        for row in self.failovers:
            if row["group"] is None and row.get("new_controller") is None and b not in row["brokers"]:
                row.update(new_controller=b, controller_failover_ms=_ms(t, row["t0"]))

    def _on_controller_resigned(self, e: dict, t: int) -> None:
        if self.controller["id"] == e["broker"]:
            self.controller = {"id": None, "epoch": self.controller["epoch"]}
            self.dirty.add("controller")

    def _on_broker_change(self, e: dict, t: int) -> None:
        for b in e.get("dead", []):
            self._broker(b).update(registered=False)
            self._detect(b, t, "broker_change")
        for b in e.get("bounced", []):
            self._detect(b, t, "broker_change")
        for b, ep in (e.get("epochs") or {}).items():
            self._broker(int(b)).update(broker_epoch=ep, registered=True)

    def _on_controlled_shutdown_requested(self, e: dict, t: int) -> None:
        self._detect(e.get("broker_id"), t, "controlled_shutdown")

    # log directories
    def _on_log_dir_failed(self, e: dict, t: int) -> None:
        br = self._broker(e["broker"])
        if e.get("dir") not in br["offline_dirs"]:
            br["offline_dirs"] = br["offline_dirs"] + [e.get("dir")]

    def _on_broker_halted(self, e: dict, t: int) -> None:
        self._broker(e["broker"]).update(status="dead")   # its session (and registration) lives on until it expires

    def _on_replicas_offline(self, e: dict, t: int) -> None:
        offsets = {int(r.rpartition("-")[2]) for r in e.get("replicas", []) if r.startswith(OFFSETS_TOPIC + "-")}
        self._detect(e.get("broker_id"), t, "replicas_offline", partitions=offsets)

    # partition state
    def _on_partition_state_written(self, e: dict, t: int) -> None:
        st = self._partition(e["topic"], e["partition"])
        st.update(leader=e["leader"], leader_epoch=e["leader_epoch"], isr=list(e["isr"]),
                  zk_version=e.get("zk_version", st["zk_version"]))
        self._add_replica(st, e["leader"], *e["isr"])
        if e["topic"] == TXN_TOPIC:
            self.txn_partition_state(e)
        if e["topic"] == OFFSETS_TOPIC:
            c = self._coordinator(e["partition"])
            if c["broker"] != e["leader"]:
                c.update(broker=e["leader"] if e["leader"] >= 0 else None, state=None, load_ms=None)
                for g in c["groups"]:
                    self._group(g)["coordinator"] = c["broker"]
            if e["leader"] >= 0 and e.get("reason") not in NOT_FAILOVER:
                for row in self._open_rows("elect_ms"):
                    if row["partition"] == e["partition"] and e["leader"] != row["old_leader"]:
                        row.update(elect_ms=_ms(t, row["t0"]), new_leader=e["leader"],
                                   elect_reason=e.get("reason"))
                        self.dirty.add("failovers")

    def _role(self, e: dict, t: int) -> None:
        st = self._partition(e["topic"], e["partition"])
        self._add_replica(st, e["broker"], e["leader"], *e.get("isr", []))
        if (e["leader_epoch"], e.get("zk_version", -1)) > (st["leader_epoch"], st["zk_version"]):
            st.update(leader=e["leader"], leader_epoch=e["leader_epoch"], isr=list(e["isr"]),
                      zk_version=e.get("zk_version", -1))

    _on_became_leader = _on_became_follower = _on_isr_updated = _role

    def _on_hw_changed(self, e: dict, t: int) -> None:
        st = self._partition(e["topic"], e["partition"])
        b = str(e["broker"])
        st["hw"][b] = e["new"]
        if st["leo"].get(b, -1) < e["new"]:
            st["leo"][b] = e["new"]
        self._add_replica(st, e["broker"])

    def _on_log_truncated(self, e: dict, t: int) -> None:
        self._partition(e["topic"], e["partition"])["leo"][str(e["broker"])] = e["to_offset"]

    def _on_log_recovered(self, e: dict, t: int) -> None:
        self._partition(e["topic"], e["partition"])["leo"][str(e["broker"])] = e["log_end_offset"]

    # coordinators and groups
    def _on_coordinator_load_started(self, e: dict, t: int) -> None:
        self._coordinator(e["partition"]).update(broker=e["broker"], state="loading", load_ms=None)

    def _on_coordinator_loaded(self, e: dict, t: int) -> None:
        p = e["partition"]
        self._coordinator(p).update(broker=e["broker"], state="loaded", load_ms=e.get("duration_ms"))
        for row in self._open_rows("load_ms"):
            if row["partition"] == p and row.get("new_leader") == e["broker"]:
                row.update(load_ms=_ms(t, row["t0"]), load_duration_ms=e.get("duration_ms"))
                self.dirty.add("failovers")

    def _on_coordinator_unloaded(self, e: dict, t: int) -> None:
        c = self._coordinator(e["partition"])
        if c["broker"] == e["broker"]:
            c["state"] = "unloaded"

    def _group_event(self, e: dict) -> dict[str, Any]:
        gr = self._group(e["group"])
        gr["coordinator"] = e["broker"]
        return gr

    def _on_group_loaded(self, e: dict, t: int) -> None:
        gr = self._group_event(e)
        gr.update(state=e.get("state"), generation=e.get("generation"), protocol=e.get("protocol"),
                  leader=e.get("leader"))
        gr["members"] = {m: gr["members"].get(m, {"assignment": []}) for m in e.get("members", [])}

    def _on_group_created(self, e: dict, t: int) -> None:
        self._group_event(e)

    def _on_group_state_changed(self, e: dict, t: int) -> None:
        gr = self._group_event(e)
        gr.update(state=e.get("to"), generation=e.get("generation", gr["generation"]))
        if e.get("to") == "PreparingRebalance":
            gr["rebalances"] += 1

    def _on_group_generation(self, e: dict, t: int) -> None:
        gr = self._group_event(e)
        gr.update(generation=e.get("generation"), protocol=e.get("protocol"), leader=e.get("leader"))
        gr["members"] = {m: gr["members"].get(m, {"assignment": []}) for m in e.get("members", [])}

    def _on_member_added(self, e: dict, t: int) -> None:
        self._group_event(e)["members"].setdefault(e["member_id"], {"assignment": []})

    def _on_member_removed(self, e: dict, t: int) -> None:
        self._group_event(e)["members"].pop(e["member_id"], None)

    def _on_group_deleted(self, e: dict, t: int) -> None:
        gr = self._group_event(e)
        gr.update(state="Dead", members={}, offsets={}, lag={})

    # the UI's own log and its live observations
    def _on_ui_action(self, e: dict, t: int) -> None:
        action, target = e.get("action"), e.get("target")
        if not e.get("ok", True) or not isinstance(target, int):
            return
        br = self._broker(target)
        if action == "kill":
            br.update(status="dead")
        elif action == "pause":
            br.update(status="paused")
        elif action == "resume":
            br.update(status="up")
        if action in FAULT_ACTIONS:
            self._fault({"id": f"ui-{len(self.faults)}", "kind": action, "brokers": [target], "mono_ns": t,
                         "ts_ms": e.get("ts_ms"), "source": "ui"})

    def _on_ui_zk(self, e: dict, t: int) -> None:
        """What ZooKeeper says now: the registered brokers and their epochs, the controller."""
        reg = {int(b): ep for b, ep in e.get("brokers", {}).items()}
        for b in set(reg) | set(self.brokers):
            br = self.brokers.get(b)
            want = {"registered": b in reg, **({"broker_epoch": reg[b]} if b in reg else {})}
            if br is None or any(br.get(k) != v for k, v in want.items()):
                self._broker(b).update(want)
        cid, epoch = e.get("controller"), e.get("epoch", 0)
        if (cid, epoch) != (self.controller["id"], self.controller["epoch"]) and epoch >= self.controller["epoch"]:
            if cid is not None and not any(c["epoch"] == epoch for c in self.controllers):
                self.controllers.append({"broker": cid, "epoch": epoch, "mono_ns": t, "ts_ms": e.get("ts_ms")})
                self.dirty.add("controllers")
            self.controller = {"id": cid, "epoch": epoch}
            self.dirty.add("controller")
        for key, replicas in (e.get("assignments") or {}).items():
            st = self.partitions.get(key)
            if st is None or st["replicas"] != replicas:
                topic, _, p = key.rpartition("-")
                self._partition(topic, int(p))["replicas"] = list(replicas)

    def _on_ui_procs(self, e: dict, t: int) -> None:
        for b, proc in e.get("brokers", {}).items():
            br = self.brokers.get(int(b))
            now = br["status"] if br is not None else "unknown"
            status = {"running": "up", "paused": "paused", "dead": "dead"}.get(proc.get("state"), now)
            if br is None or (br["status"], br["pid"]) != (status, proc.get("pid")):
                self._broker(int(b)).update(status=status, pid=proc.get("pid"))
                if status == "dead":
                    self._left(int(b), t)

    def _on_ui_replicas(self, e: dict, t: int) -> None:
        """Each live broker's replicas (DescribeBroker): LEO per replica, the HW on the leader."""
        for key, r in e.get("partitions", {}).items():
            topic, _, p = key.rpartition("-")
            st = self.partitions.get(key)
            hw_all = r.get("hw_all") or {}
            if (st is None or any(st["leo"].get(b) != v for b, v in r["leo"].items())
                    or any(st["hw"].get(b) != v for b, v in hw_all.items())):
                st = self._partition(topic, int(p))
                st["leo"].update(r["leo"])
                st["hw"].update(hw_all)

    def _on_ui_group(self, e: dict, t: int) -> None:
        """A describe of one group (members, assignments, committed offsets, lag) made by the server."""
        key = "g:" + e["group"]
        pending, old = key in self.dirty, self.groups.get(e["group"])
        old = dict(old) if old is not None else None   # shallow: the nested dicts below are replaced, not changed
        gr = self._group(e["group"])
        before = dict(gr["offsets"])
        gr.update(state=e.get("state", gr["state"]), generation=e.get("generation", gr["generation"]),
                  protocol=e.get("protocol") or gr["protocol"])
        if e.get("coordinator") is not None:
            gr["coordinator"] = e["coordinator"]
        gr["members"] = {m["member_id"]: {"assignment": m.get("assignment", []), "client_id": m.get("client_id")}
                         for m in e.get("members", [])}
        gr["offsets"] = {k: v for k, v in e.get("offsets", {}).items()}
        gr["lag"] = {}
        for k, v in gr["offsets"].items():   # the lag against the partition leader's HW as last seen
            st = self.partitions.get(k)
            hw = st["hw"].get(str(st["leader"])) if st else None
            if hw is not None and v is not None:
                gr["lag"][k] = max(0, hw - v)
        if any(v is not None and v > (before.get(k) or -1) for k, v in gr["offsets"].items()):
            self._committed(e["group"], t)
        if old == gr and not pending:   # a describe that found nothing new sends the page nothing
            self.dirty.discard(key)

    # chaos history lines (replay of a chaos run)
    def _history(self, op: dict[str, Any]) -> None:
        t = op.get("time", 0)
        self.t_ns = max(self.t_ns, t)
        v = op.get("value") or {}
        if op.get("process") == "nemesis":
            if v.get("phase") == "start":
                brokers = [n for n in v.get("nodes", []) if isinstance(n, int) and not isinstance(n, bool)]
                for b in brokers:
                    br = self._broker(b)
                    if op.get("f") in ("kill", "truncate"):
                        br["status"] = "dead"
                    elif op.get("f") in ("disk-full", "disk-error"):
                        br["disk_fault"] = op.get("f")
                    elif op.get("f") == "pause":
                        br["status"] = "paused"
                self._fault({"id": v.get("fault"), "kind": op.get("f"), "brokers": brokers, "mono_ns": t,
                             "ts_ms": None, "source": "history", "target": v.get("target")})
            elif v.get("phase") == "heal" and v.get("kind") == "pause":
                for n in v.get("nodes", []):
                    if isinstance(n, int) and self.brokers.get(n, {}).get("status") == "paused":
                        self._broker(n)["status"] = "up"
            elif v.get("phase") == "heal" and v.get("kind") in ("disk-full", "disk-error"):
                for n in v.get("nodes", []):
                    if isinstance(n, int) and n in self.brokers:
                        self._broker(n).pop("disk_fault", None)
            return
        g = op.get("group")
        if not g or op.get("type") != "ok":
            return
        if op.get("f") == "commit":
            gr = self._group(g)
            for k, off in (v.get("offsets") or {}).items():
                gr["offsets"][k.replace("/", "-")] = off
            self._committed(g, t)
        elif op.get("f") == "sync" and v.get("member"):
            gr = self._group(g)
            gr["members"].setdefault(v["member"], {"assignment": []})["assignment"] = [
                a.replace("/", "-") for a in v.get("assignment", [])]

    # failover stages
    def _fault(self, f: dict[str, Any]) -> None:
        self.faults.append(f)
        self.dirty.add("faults")
        t = f["mono_ns"]
        hit = set(f["brokers"])
        if f["kind"] not in FAULT_ACTIONS:
            return
        if self.controller["id"] in hit:
            self.failovers.append({"fault": f["id"], "kind": f["kind"], "t0": t, "brokers": sorted(hit),
                                   "group": None, "partition": None, "old_leader": None,
                                   "was_controller": True, "old_controller": self.controller["id"],
                                   "new_controller": None, "controller_failover_ms": None})
        for g in sorted(self.groups):
            leader = self.group_coordinator(g)
            if leader in hit:
                self.failovers.append({
                    "fault": f["id"], "kind": f["kind"], "t0": t, "brokers": sorted(hit), "group": g,
                    "partition": self.groups[g]["partition"], "old_leader": leader, "new_leader": None,
                    "was_controller": self.controller["id"] in hit, "old_controller": self.controller["id"],
                    "detect_ms": None, "detect_by": None, "elect_ms": None, "elect_reason": None,
                    "load_ms": None, "load_duration_ms": None, "first_commit_ms": None})
        del self.failovers[:-KEEP_FAILOVERS]
        self.dirty.add("failovers")

    def _open_rows(self, stage: str) -> list[dict[str, Any]]:
        return [r for r in self.failovers if stage in r and r[stage] is None]

    def _detect(self, b: int | None, t: int, by: str, partitions: set[int] | None = None) -> None:
        for row in self._open_rows("detect_ms"):
            if row["group"] is not None and row["old_leader"] == b and (partitions is None
                                                                         or row["partition"] in partitions):
                row.update(detect_ms=_ms(t, row["t0"]), detect_by=by)
                self.dirty.add("failovers")

    def _committed(self, g: str, t: int) -> None:
        for row in self._open_rows("first_commit_ms"):
            if row["group"] == g and t > row["t0"] and row.get("load_ms") is not None:
                row["first_commit_ms"] = _ms(t, row["t0"])
                self.dirty.add("failovers")

    # ------------------------------------------------------------------ output

    def _broker_json(self) -> list[dict[str, Any]]:
        return [dict(b, controller=b["id"] == self.controller["id"]) for _, b in sorted(self.brokers.items())]

    def _partition_json(self, st: dict[str, Any]) -> dict[str, Any]:
        out = dict(st)
        replicas = st["replicas"]
        out["under_replicated"] = st["leader"] >= 0 and len(st["isr"]) < len(replicas)
        out["offline"] = st["leader"] < 0 and st["leader_epoch"] >= 0
        return out

    def _failover_json(self) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items()} for r in self.failovers]

    def snapshot(self) -> dict[str, Any]:
        """The whole state (it leaves ``dirty`` alone: other pages still need the pending patch)."""
        return {"t_ns": self.t_ns, "brokers": self._broker_json(), "controller": self.controller,
                "controllers": self.controllers[-50:],
                "partitions": [self._partition_json(s) for _, s in sorted(
                    self.partitions.items(), key=lambda kv: (kv[1]["topic"], kv[1]["partition"]))],
                "coordinators": [self.coordinators[p] for p in sorted(self.coordinators)],
                "groups": [self.groups[g] for g in sorted(self.groups)],
                "transactions": self.txns_json(),
                "faults": self.faults[-200:], "failovers": self._failover_json()}

    def take_patch(self) -> dict[str, Any] | None:
        """What changed since the last patch or snapshot, or None."""
        if not self.dirty:
            return None
        d, self.dirty = self.dirty, set()
        patch: dict[str, Any] = {"t_ns": self.t_ns}
        if "brokers" in d or "controller" in d:
            patch["brokers"] = self._broker_json()
            patch["controller"] = self.controller
        if "controllers" in d:
            patch["controllers"] = self.controllers[-50:]
        parts = [self._partition_json(self.partitions[k[2:]]) for k in d if k.startswith("p:")]
        if parts:
            patch["partitions"] = parts
        coords = [self.coordinators[int(k[2:])] for k in d if k.startswith("c:")]
        if coords:
            patch["coordinators"] = coords
        groups = [self.groups[k[2:]] for k in d if k.startswith("g:")]
        if groups:
            patch["groups"] = groups
        txns = self.txns_json(k[2:] for k in d if k.startswith("t:"))
        if txns:
            patch["transactions"] = txns
        if "faults" in d:
            patch["faults"] = self.faults[-200:]
        if "failovers" in d:
            patch["failovers"] = self._failover_json()
        return patch
