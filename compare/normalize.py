"""One side's observations -> the entries compared, with what is not deterministic relabelled.

Streams (each compared entry by entry; an entry is its phase and its value):

- ``zk <path>``: every distinct value the znode took, in order (``None``: deleted), from ZooKeeper's
  transaction log; sequential znodes are named by their order (``isr_change_#1``);
- ``zk-shape <pattern>``: the JSON shapes (key sets, value types) of every value of the paths of a pattern
  (``/brokers/ids/*``), one entry;
- ``zk-paths``: every path that existed during the run, generalised, one entry;
- ``<probe>`` at each checkpoint: ``metadata@<broker>``, ``find_coordinator <g>``, ``describe_groups <g>``,
  ``offset_fetch <g>``, ``list_offsets <t>``;
- ``step <n>``: the step's outcome (and whether the cluster settled after it);
- ``member <g>/<i>``: what a member saw: each generation it joined, each assignment, revocation, error.

**Relabelled** (Kafka itself is not deterministic there):
- controllers, by first appearance in ``/controller`` (``c1``, ``c2``...), as ``sim fidelity`` does: which
  survivor wins the race for the znode is a race in Kafka as here; Metadata's ``controller_id`` too;
- the replicas of a topic created by a step without an assignment, by their place in the partition's
  replica list (``r0`` is the preferred replica): Kafka's placement starts at a random broker;
- timestamps, topic ids, the cluster id, member ids: only their types are kept;
- ports: a broker's Kafka listener port is ``<kafka:N>``, its gRPC port ``<grpc:N>``.

**Left out**, with the reason (docs/deviations.md lists each): see :data:`IGNORED`.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

#: fields dropped before comparing, each with its reason
IGNORED: dict[str, str] = {
    "/brokers/ids/* kafkasim_grpc": "kafkasim's gRPC address, an extra field Kafka's readers ignore "
                                    "(docs/deviations.md, The Kafka listener)",
}


@dataclass(frozen=True)
class Entry:
    stream: str
    phase: int
    value: Any

    def key(self) -> tuple:
        return (self.phase, _freeze(self.value))

    def text(self) -> str:
        return f"#{self.phase:<2} {json.dumps(self.value, sort_keys=True, default=str)}"


def _freeze(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(sorted((str(k), _freeze(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    return v


def shape(v: Any) -> Any:
    """A JSON value's shape: an object's keys with their shapes, a list's distinct element shapes, a type."""
    if isinstance(v, dict):
        return {k: shape(x) for k, x in sorted(v.items())}
    if isinstance(v, list):
        shapes = []
        for x in v:
            s = shape(x)
            if s not in shapes:
                shapes.append(s)
        return sorted(shapes, key=lambda s: json.dumps(s, sort_keys=True))
    return {bool: "bool", int: "int", float: "float", str: "string", type(None): "null"}.get(type(v), type(v).__name__)


_SEQ = re.compile(r"^(.*?)(\d{10})$")
_PATTERNS = [(re.compile(r"^/brokers/ids/\d+$"), "/brokers/ids/*"),
             (re.compile(r"^/brokers/topics/[^/]+/partitions/\d+/state$"), "/brokers/topics/*/partitions/*/state"),
             (re.compile(r"^/brokers/topics/[^/]+/partitions/\d+$"), "/brokers/topics/*/partitions/*"),
             (re.compile(r"^/brokers/topics/[^/]+/partitions$"), "/brokers/topics/*/partitions"),
             (re.compile(r"^/brokers/topics/[^/]+$"), "/brokers/topics/*"),
             (re.compile(r"^/config/(topics|brokers|changes|clients|users|ips)/[^/]+$"), r"/config/\1/*"),
             (re.compile(r"^/admin/delete_topics/[^/]+$"), "/admin/delete_topics/*"),
             (re.compile(r"^/isr_change_notification/[^/]+$"), "/isr_change_notification/*"),
             (re.compile(r"^/log_dir_event_notification/[^/]+$"), "/log_dir_event_notification/*")]


def pattern_of(path: str) -> str:
    for rx, name in _PATTERNS:
        if rx.match(path):
            return rx.sub(name, path)
    return path


class Labels:
    """The relabelling of one side's run: controllers, random placements, ports."""

    def __init__(self, obs: dict[str, Any]) -> None:
        self.controllers: dict[int, str] = {}
        for w in obs["zk"]:
            if w["path"] == "/controller" and w["data"]:
                try:
                    b = json.loads(w["data"])["brokerid"]
                except (ValueError, KeyError, TypeError):
                    continue
                self.controllers.setdefault(b, f"c{len(self.controllers) + 1}")
        self.random_topics = set(obs.get("random_topics", ()))
        self.ports: dict[int, str] = {}
        for b, p in obs.get("ports", {}).items():
            self.ports[p["kafka"]] = f"<kafka:{b}>"
            if p.get("grpc"):
                self.ports[p["grpc"]] = f"<grpc:{b}>"
        self.assignments: dict[str, dict[int, list[int]]] = {}   # the random topics' replica lists

    def controller(self, b: Any) -> Any:
        return self.controllers.get(b, f"c?{b}") if isinstance(b, int) and b >= 0 else b

    def port(self, p: Any) -> Any:
        return self.ports.get(p, "<port>") if isinstance(p, int) and p > 0 else p

    def address(self, text: str) -> str:
        """``NAME://host:port`` or ``host:port`` with the port labelled."""
        head, sep, port = text.rpartition(":")
        return f"{head}:{self.port(int(port))}" if sep and port.isdigit() else text

    def replica(self, topic: str, partition: int, b: Any) -> Any:
        """A broker id as this partition's replica index, for a randomly placed topic."""
        if topic not in self.random_topics or not isinstance(b, int) or b < 0:
            return b
        replicas = self.assignments.get(topic, {}).get(partition, [])
        return f"r{replicas.index(b)}" if b in replicas else f"r?{b}"

    def replicas(self, topic: str, partition: int, bs: list[int], ordered: bool = True) -> list[Any]:
        out = [self.replica(topic, partition, b) for b in bs]
        return out if ordered else sorted(out, key=str)


# ---------------------------------------------------------------------------- ZooKeeper

def zk_value(path: str, data: str | None, labels: Labels) -> Any:
    """A znode's value as compared (None: deleted)."""
    if data is None:
        return None
    try:
        v = json.loads(data) if data else ""
    except ValueError:
        return data
    pat = pattern_of(path)
    if not isinstance(v, dict):
        return v
    v = dict(v)
    if "timestamp" in v and (path == "/controller" or pat == "/brokers/ids/*"):
        v["timestamp"] = shape(v["timestamp"])
    if path == "/controller":
        v["brokerid"] = labels.controller(v.get("brokerid"))
    elif pat == "/brokers/ids/*":
        v.pop("kafkasim_grpc", None)   # IGNORED
        if "port" in v:
            v["port"] = labels.port(v["port"])
        if isinstance(v.get("endpoints"), list):
            v["endpoints"] = [labels.address(e) for e in v["endpoints"]]
    elif pat == "/brokers/topics/*":
        topic = path.rsplit("/", 1)[1]
        if "topic_id" in v:
            v["topic_id"] = shape(v["topic_id"])
        parts = v.get("partitions")
        if isinstance(parts, dict):
            if topic in labels.random_topics:
                labels.assignments[topic] = {int(p): r for p, r in parts.items() if isinstance(r, list)}
                v["partitions"] = {p: [f"r{i}" for i in range(len(r))] + (
                    [] if len(set(r)) == len(r) else ["<repeats a broker>"]) for p, r in parts.items()}
    elif pat == "/brokers/topics/*/partitions/*/state":
        topic, p = path.split("/")[3], int(path.split("/")[5])
        v["leader"] = labels.replica(topic, p, v.get("leader"))
        if isinstance(v.get("isr"), list):
            v["isr"] = labels.replicas(topic, p, v["isr"])
    elif path == "/cluster/id":
        v["id"] = shape(v.get("id"))
    elif isinstance(v.get("partitions"), list):   # preferred election, isr change notifications
        v["partitions"] = sorted(v["partitions"], key=lambda x: json.dumps(x, sort_keys=True))
    return v


def zk_entries(obs: dict[str, Any], labels: Labels) -> list[Entry]:
    phases = phase_starts(obs)
    seq: dict[tuple[str, str], int] = {}
    names: dict[str, str] = {}
    out: list[Entry] = []
    last: dict[str, Any] = {}
    shapes: dict[str, list[Any]] = {}
    paths: set[str] = set()
    end = obs.get("end_ms", float("inf"))
    ws = [w for w in obs["zk"] if w["time_ms"] <= end]
    # one transaction (a multi: Kafka registers a broker by a create and a setData) shows its last value only
    final = {(w["zxid"], w["path"]): i for i, w in enumerate(ws)}
    for i, w in enumerate(ws):
        path = w["path"]
        if final[(w["zxid"], path)] != i:
            continue
        if path not in names:
            m = _SEQ.match(path.rsplit("/", 1)[-1])
            if m:
                parent = path.rsplit("/", 1)[0]
                n = seq[(parent, m.group(1))] = seq.get((parent, m.group(1)), 0) + 1
                names[path] = f"{parent}/{m.group(1)}#{n}"
            else:
                names[path] = path
        name = names[path]
        paths.add(pattern_of(name))
        value = zk_value(path, w["data"], labels)
        if w["data"]:
            try:
                s = shape(json.loads(w["data"]))
            except ValueError:
                s = "text"
            if isinstance(s, dict):
                s.pop("kafkasim_grpc", None)
            lst = shapes.setdefault(pattern_of(name), [])
            if s not in lst:
                lst.append(s)
        if name in last and _freeze(last[name]) == _freeze(value):
            continue
        last[name] = value
        out.append(Entry(f"zk {name}", phase_of(w["time_ms"], phases), value))
    for pat, ss in sorted(shapes.items()):
        out.append(Entry(f"zk-shape {pat}", 0, sorted(ss, key=lambda s: json.dumps(s, sort_keys=True))))
    out.append(Entry("zk-paths", 0, sorted(paths)))
    return out


def phase_starts(obs: dict[str, Any]) -> list[tuple[float, int]]:
    """Each step's start, to the millisecond below: ZooKeeper stamps a transaction with whole milliseconds, so
    a write the step makes in its first millisecond is stamped below its fractional start (the cluster is
    quiet for ``settle.ms`` before a step starts, so nothing of the phase before falls there)."""
    return sorted((math.floor(s["start_ms"]), s["index"]) for s in obs["steps"] if "start_ms" in s)


def phase_of(time_ms: float, starts: list[tuple[float, int]]) -> int:
    phase = 0
    for t, i in starts:
        if time_ms >= t:
            phase = i
    return phase


# ---------------------------------------------------------------------------- clients

def client_value(probe: str, v: Any, labels: Labels) -> Any:
    if not isinstance(v, dict) or "unreachable" in v:
        return "unreachable" if isinstance(v, dict) else v
    kind = probe.split("@")[0].split(" ")[0]
    if kind == "metadata":
        topics = {}
        for t in v.get("topics", []):
            name = t["name"]
            parts = {}
            for p in t["partitions"]:
                i = p["partition_index"]
                parts[str(i)] = {
                    "error": p["error_code"], "leader": labels.replica(name, i, p["leader_id"]),
                    "leader_epoch": p.get("leader_epoch"),
                    "replicas": labels.replicas(name, i, p["replica_nodes"]),
                    "isr": labels.replicas(name, i, p["isr_nodes"], ordered=False),
                    "offline": labels.replicas(name, i, p.get("offline_replicas") or [], ordered=False)}
            topics[name] = {"error": t["error_code"], "internal": t.get("is_internal"), "partitions": parts}
        return {"brokers": sorted([[b["node_id"], b["host"], labels.port(b["port"]), b.get("rack")]
                                   for b in v.get("brokers", [])]),
                "controller": labels.controller(v.get("controller_id")),
                "cluster_id": shape(v.get("cluster_id")), "topics": topics}
    if kind == "find_coordinator":
        return {"error": v["error_code"], "node": v["node_id"], "port": labels.port(v.get("port"))}
    if kind == "describe_groups":
        out = []
        for g in v["groups"]:
            members = sorted(({"client_id": m["client_id"], "client_host": m["client_host"],
                               "instance": m.get("group_instance_id"), "assignment": m["member_assignment"]}
                              for m in g["members"]), key=lambda m: json.dumps(m, sort_keys=True))
            out.append({"error": g["error_code"], "state": g["group_state"], "protocol_type": g["protocol_type"],
                        "protocol": g["protocol_data"], "members": members})
        return out
    if kind == "offset_fetch":
        offsets = {f"{t['name']}/{p['partition_index']}": [p["committed_offset"], p["error_code"]]
                   for t in v.get("topics", []) for p in t["partitions"]}
        return {"error": v.get("error_code"), "offsets": offsets}
    return v


def client_entries(obs: dict[str, Any], labels: Labels) -> list[Entry]:
    return [Entry(c["probe"], c["phase"], client_value(c["probe"], c["value"], labels)) for c in obs["clients"]]


def step_entries(obs: dict[str, Any], labels: Labels) -> list[Entry]:
    out = []
    for s in obs["steps"]:
        if s.get("text") == "aborted":
            out.append(Entry("run", s["index"], f"aborted: {s.get('error')}"))
            continue
        out.append(Entry(f"step {s['index']}", s["index"],
                         {"step": s["text"], "settled": s["settled"], "outcome": s["outcome"]}))
    return out


def member_entries(obs: dict[str, Any], labels: Labels) -> list[Entry]:
    return [Entry(f"member {m['member']}", m["phase"], [m["event"], m["value"]]) for m in obs["members"]
            if m["phase"] >= 0]


def entries(obs: dict[str, Any]) -> list[Entry]:
    """Every compared entry of one side's observations."""
    labels = Labels(obs)
    zk = zk_entries(obs, labels)     # first: it learns the random topics' assignments
    return zk + client_entries(obs, labels) + step_entries(obs, labels) + member_entries(obs, labels)
