"""One side of a differential run: start the cluster, do each step, let it settle, look, and record.

After the set-up (phase 0) and after each step (phase = the step's number) the run waits until the cluster
has **settled**: ZooKeeper's last zxid has not moved, no member has seen anything, for ``settle.ms``; every
answering broker's Metadata agrees with ZooKeeper's leaders and ISRs; every group with members is Stable
with all of them.  It then takes a **checkpoint**: Metadata from each answering broker, and for each group
FindCoordinator, DescribeGroups and OffsetFetch at its coordinator, and ListOffsets (earliest and latest)
of every partition at its leader.  A step's own answers (a produce's errors, a CreateTopics' codes...) are
its **outcome**.  At the end, ZooKeeper's transaction log gives every write the run made.

Everything goes to ``<out>/<side>/observations.json`` (:func:`run_side`); compare/normalize.py reads it.
"""
from __future__ import annotations

import json
import random
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from chaos.scenario import OFFSETS_TOPIC
from chaos.targets import View, resolve
from compare.members import JavaGroupMember, Member
from compare.probe import BROKER_RESOURCE, TOPIC_RESOURCE, ProbeError
from compare.scenario import CompareScenario, Step
from compare.sides import SIDES, Side
from kafkacommon import errors
from util.waiting import wait_for
from zk.txnlog import read_log_dir, writes

OBSERVATIONS = "observations.json"
SETTLE_TIMEOUT_S = 60.0


def _err(code: int) -> str | None:
    return errors.name(code) if code else None


class SideRun:
    def __init__(self, scenario: CompareScenario, side: Side, say: Callable[[str], None] = print) -> None:
        self.scenario, self.side, self.say = scenario, side, say
        self.phase = 0
        self.steps: list[dict[str, Any]] = []
        self.clients: list[dict[str, Any]] = []
        self.member_events: list[dict[str, Any]] = []
        self.members: dict[str, dict[int, Member | JavaGroupMember]] = {}          # group -> index -> live member
        self.joins: dict[str, dict[str, Any]] = {}                # group -> its join step's args
        self.random_topics: set[str] = set()
        self.groups = set(scenario.groups())
        self.t0 = time.time()

    # ------------------------------------------------------------------ the run

    def run(self) -> dict[str, Any]:
        error = None
        try:
            start = time.time() * 1000
            self.side.prepare()
            self.side.start()
            for note in self.side.set_up_notes():
                self.say(f"  [{self.side.name}] set-up: {note}")
            for t in sorted(self.scenario.base.topics, key=lambda t: t.name != OFFSETS_TOPIC):
                self.side.create_setup_topic(t)
            self._finish_step(0, "set-up", start, {})
            for step in self.scenario.steps:
                self.phase = step.index
                start = time.time() * 1000
                self.say(f"  [{self.side.name}] step {step.index}: {step.text}")
                outcome = self.do(step)
                self._finish_step(step.index, step.text, start, outcome)
        except Exception as e:
            error = f"{type(e).__name__}: {e}"
            self.say(f"  [{self.side.name}] aborted at step {self.phase}: {error}")
            self.steps.append({"index": self.phase, "text": "aborted", "error": error,
                               "traceback": traceback.format_exc()})
        finally:
            end_ms = time.time() * 1000   # what follows (members closing, the brokers' shutdown) is not compared
            self.phase = -1
            for group in list(self.members.values()):
                for m in list(group.values()):
                    try:
                        m.close()
                    except Exception:
                        pass
            try:
                self.side.stop()
            except Exception as e:   # still record what there is
                self.say(f"  [{self.side.name}] stop: {e}")
        zk = [{"zxid": w.zxid, "time_ms": w.time_ms, "path": w.path, "created": w.created,
               "data": None if w.data is None else w.data.decode("utf-8", errors="replace")}
              for w in writes(read_log_dir(self.side.txn_dir()), chroot="/cmp")]
        return {"version": 1, "side": self.side.name, "scenario": self.scenario.name, "error": error, "end_ms": end_ms,
                "steps": self.steps, "zk": zk, "clients": self.clients, "members": self.member_events,
                "random_topics": sorted(self.random_topics), "set_up_notes": self.side.set_up_notes(),
                "ports": {str(b): {"kafka": self.side.kafka_address(b)[1], "grpc": self.side.ports[2 * (b - 1)]}
                          for b in self.side.broker_ids()}}

    def _finish_step(self, index: int, text: str, start_ms: float, outcome: Any) -> None:
        settled = self.settle()
        self.checkpoint()
        self.steps.append({"index": index, "text": text, "start_ms": start_ms, "end_ms": time.time() * 1000,
                           "settled": settled, "outcome": outcome})

    # ------------------------------------------------------------------ looking

    def record_member(self, member: str, event: str, value: Any) -> None:
        self.member_events.append({"phase": self.phase, "t_ms": round((time.time() - self.t0) * 1000, 1),
                                   "member": member, "event": event, "value": value})

    def live_members(self) -> list[Member | JavaGroupMember]:
        return [m for g in self.members.values() for m in g.values() if not m.closed.is_set()]

    def view(self) -> View:
        snap = self.side.zk().read_snapshot()
        parts = {(t, p): {"leader": s[0].leader if (s := snap.states.get((t, p))) else -1,
                          "isr": list(s[0].isr) if s else [], "replicas": list(r)}
                 for t, a in snap.topics.items() for p, r in a.partitions.items()}
        n = len(snap.topics[OFFSETS_TOPIC].partitions) if OFFSETS_TOPIC in snap.topics else \
            self.side.cfg.get("offsets.topic.num.partitions")
        return View(self.side.broker_ids(), set(snap.brokers), [1], self.side.zk().read_controller(), parts, n)

    def targets(self, target: str) -> list[int]:
        return [int(n[1:]) for n in resolve(target, self.view(), random.Random(0)) if n.startswith("b")]

    def first_answering(self) -> int:
        live = self.side.answering()
        if not live:
            raise RuntimeError("no broker answers")
        return live[0]

    def settle(self) -> bool:
        quiet = self.scenario.settle_ms / 1000
        state = {"zxid": None, "since": time.monotonic()}

        def settled() -> bool:
            z = self.side.zxid()
            now = time.monotonic()
            if z != state["zxid"]:
                state["zxid"], state["since"] = z, now
                return False
            if now - state["since"] < quiet or any(now - m.last_event < quiet for m in self.live_members()):
                return False
            return self.consistent()

        try:
            wait_for(settled, SETTLE_TIMEOUT_S, "the cluster to settle", 0.1)
            return True
        except TimeoutError:
            self.say(f"  [{self.side.name}] did not settle within {SETTLE_TIMEOUT_S:.0f} s after step {self.phase}")
            return False

    def consistent(self) -> bool:
        """Each answering broker's Metadata names the registered brokers and ZooKeeper's leaders and ISRs;
        each group with members is Stable with all of them."""
        snap = self.side.zk().read_snapshot()
        want = {(t, p): (s[0].leader, sorted(s[0].isr)) for (t, p), s in snap.states.items() if t in snap.topics}
        for b in self.side.answering():
            try:
                md = self.side.probe(b, 3.0).metadata()
            except ProbeError:
                return False
            if sorted(x["node_id"] for x in md["brokers"]) != sorted(snap.brokers):
                return False
            got = {(t["name"], p["partition_index"]): (p["leader_id"], sorted(p["isr_nodes"]))
                   for t in md["topics"] for p in t["partitions"]}
            if got != want:
                return False
        for group, members in self.members.items():
            live = [m for m in members.values() if not m.closed.is_set()]
            if live and not self._group_stable(group, len(live)):
                return False
        return True

    def _group_stable(self, group: str, count: int) -> bool:
        try:
            fc = self.side.probe(self.first_answering(), 3.0).find_coordinator(group)
            if fc["error_code"] or fc["node_id"] not in self.side.answering():
                return False
            d = self.side.probe(fc["node_id"], 3.0).describe_groups([group])["groups"][0]
        except ProbeError:
            return False
        gens = {m.generation for m in self.members[group].values() if not m.closed.is_set()}
        return d["group_state"] == "Stable" and len(d["members"]) == count and len(gens) == 1

    def checkpoint(self) -> None:
        def add(probe: str, value: Any) -> None:
            self.clients.append({"phase": self.phase, "probe": probe, "value": value})

        topics: dict[str, list[dict[str, Any]]] = {}
        for b in self.side.answering():
            try:
                md = self.side.probe(b, 5.0).metadata()
            except ProbeError as e:
                add(f"metadata@{b}", {"unreachable": str(e)})
                continue
            add(f"metadata@{b}", md)
            topics = topics or {t["name"]: t["partitions"] for t in md["topics"] if not t["is_internal"]}
        for group in sorted(self.groups):
            try:
                fc = self.side.probe(self.first_answering(), 5.0).find_coordinator(group)
                add(f"find_coordinator {group}", fc)
                if fc["error_code"] == 0 and fc["node_id"] in self.side.answering():
                    probe = self.side.probe(fc["node_id"], 5.0)
                    add(f"describe_groups {group}", probe.describe_groups([group]))
                    add(f"offset_fetch {group}", probe.offset_fetch(group))
            except ProbeError as e:
                add(f"group {group}", {"unreachable": str(e)})
        for topic, parts in sorted(topics.items()):
            by_leader: dict[int, list[int]] = {}
            for p in parts:
                by_leader.setdefault(p["leader_id"], []).append(p["partition_index"])
            answers = {}
            for leader, ps in sorted(by_leader.items()):
                if leader not in self.side.answering():
                    answers.update({str(p): "no leader answering" for p in ps})
                    continue
                try:
                    for ts, label in ((-2, "earliest"), (-1, "latest")):
                        r = self.side.probe(leader, 5.0).list_offsets(topic, sorted(ps), ts)
                        for x in r["topics"][0]["partitions"]:
                            answers.setdefault(str(x["partition_index"]), {})[label] = (
                                _err(x["error_code"]) or x["offset"])
                except ProbeError as e:
                    answers.update({str(p): f"unreachable: {e}" for p in ps})
            add(f"list_offsets {topic}", answers)

    # ------------------------------------------------------------------ doing

    def do(self, step: Step) -> Any:
        a = step.args
        kind = step.kind
        if kind in ("kill", "terminate", "pause", "resume", "expire"):
            brokers = self.targets(a["target"])
            if not brokers:
                return {"skipped": f"{a['target']} resolves to no broker"}
            for b in brokers:
                getattr(self, f"_{kind}")(b, a)
            return {"brokers": ["hit"] * len(brokers)}
        if kind == "start":
            self.side.start_broker(a["broker"])
            return {"rejoined": self._wait_rejoined(a["broker"])}
        if kind == "wait":
            return self._wait(a)
        return getattr(self, f"_{kind}")(a)

    def _kill(self, b: int, a: dict) -> None:
        self.side.kill(b)
        self._wait_unregistered(b)

    def _terminate(self, b: int, a: dict) -> None:
        self.side.terminate(b)
        self._wait_unregistered(b)

    def _pause(self, b: int, a: dict) -> None:
        self.side.pause(b)
        if a.get("secs"):
            time.sleep(a["secs"])   # the fault's duration, not a wait for anything
            self.side.resume(b)

    def _resume(self, b: int, a: dict) -> None:
        self.side.resume(b)

    def _expire(self, b: int, a: dict) -> None:
        self.side.cut_zk(b)
        try:
            self._wait_unregistered(b)
        finally:
            self.side.heal_zk(b)
        wait_for(lambda: b in self.side.zk().read_brokers(), 90, f"broker {b} to register again")

    def _wait_rejoined(self, b: int, timeout_s: float = 60.0) -> bool:
        """A restarted broker catches up: wait until it is back in the ISR of every partition it is a replica of
        that has a live leader (one without stays as it is: an offline partition, or an out-of-sync replica
        with unclean election off), so that the ISR expansions land in this step on both sides, however long
        a side takes to catch up."""
        def back() -> bool:
            v = self.view()
            return all(b in p["isr"] for p in v.partitions.values()
                       if b in p["replicas"] and p["leader"] in v.live and p["leader"] != b)
        try:
            wait_for(back, timeout_s, f"broker {b} to rejoin the ISRs")
            return True
        except TimeoutError:
            return False

    def _wait_unregistered(self, b: int) -> None:
        timeout = self.side.cfg.session_timeout_ms / 1000 * 3 + 15
        wait_for(lambda: b not in self.side.zk().read_brokers(), timeout, f"broker {b} to leave /brokers/ids")

    def _wait(self, a: dict) -> Any:
        if "secs" in a:
            time.sleep(a["secs"])   # a lag the scenario asks for (replica.lag.time.max.ms to pass...)
            return {}
        cond = a["cond"]

        def isr_full() -> bool:
            return all(set(p["isr"]) == set(p["replicas"]) for p in self.view().partitions.values())

        def leaders() -> bool:
            return all(p["leader"] >= 0 for p in self.view().partitions.values())

        check = {"isr full": isr_full, "leaders": leaders,
                 "controller": lambda: self.side.zk().read_controller() is not None,
                 "stable": lambda: all(self._group_stable(g, len([m for m in ms.values() if not m.closed.is_set()]))
                                       for g, ms in self.members.items())}[cond]
        try:
            wait_for(check, 120, cond)
            return {}
        except TimeoutError:
            return {"timed_out": cond}

    def _controller_or(self, via: str | None) -> int:
        if via is None or via == "controller":
            c = self.side.zk().read_controller()
            if c is None:
                raise RuntimeError("no controller")
            return c
        return int(via.split(":", 1)[1])

    def _create(self, a: dict) -> Any:
        self.random_topics.add(a["topic"])
        b = self._controller_or(a.get("via"))
        r = self.side.probe(b).create_topics(a["topic"], a["partitions"], a["rf"], a["configs"])
        codes = {t["name"]: _err(t["error_code"]) for t in r["topics"]}
        if codes.get(a["topic"]) is None:
            self.side.wait_leaders(a["topic"])
        return {"via": a.get("via", "controller"), "errors": codes}

    def _delete(self, a: dict) -> Any:
        b = self._controller_or(a.get("via"))
        r = self.side.probe(b).delete_topics(a["topic"])
        codes = {t["name"]: _err(t["error_code"]) for t in r["responses"]}
        if codes.get(a["topic"]) is None:
            wait_for(lambda: a["topic"] not in self.side.zk().read_snapshot().topics, 60,
                     f"topic {a['topic']} to be deleted")
        return {"via": a.get("via", "controller"), "errors": codes}

    def _partitions(self, a: dict) -> Any:
        """CreatePartitions at the controller (others answer NOT_CONTROLLER); then the new partitions' leaders."""
        r = self.side.probe(self._controller_or(None)).create_partitions(a["topic"], a["count"])
        codes = {t["name"]: _err(t["error_code"]) for t in r["results"]}
        if codes.get(a["topic"]) is None:
            self.side.wait_leaders(a["topic"])
        return {"errors": codes}

    def _reassign(self, a: dict) -> Any:
        """AlterPartitionReassignments at the controller, or (``via zookeeper``) /admin/reassign_partitions as
        kafka-reassign-partitions.sh --zookeeper writes it; then wait until the partition has its target
        replicas and nothing left to add or remove."""
        tp, target = (a["topic"], a["partition"]), tuple(a["replicas"])
        out: dict[str, Any] = {}
        if a["zookeeper"]:
            self.side.zk().request_reassignment({tp: target})
        else:
            r = self.side.probe(self._controller_or(None)).alter_reassignments({tp: list(target)})
            out = {"error": _err(r["error_code"]), "partitions": {
                f"{t['name']}/{p['partition_index']}": _err(p["error_code"]) for t in r["responses"]
                for p in t["partitions"]}}

        def done() -> bool:
            t = self.side.zk().read_snapshot().topics.get(tp[0])
            return t is not None and t.partitions.get(tp[1]) == target and not t.reassigning(tp[1])
        try:
            wait_for(done, 90, f"{tp[0]}/{tp[1]} to be reassigned to {list(target)}")
        except TimeoutError:
            out["timed_out"] = True
        return out

    def _config(self, a: dict) -> Any:
        """IncrementalAlterConfigs (SET): a topic's at the controller, a broker's at that broker, the brokers'
        cluster-wide default (``brokers``) at the controller."""
        kind, _, name = a["entity"].partition(" ")
        if kind == "topic":
            rtype, at = TOPIC_RESOURCE, self._controller_or(None)
        elif kind == "broker":
            rtype, at = BROKER_RESOURCE, int(name)
        else:
            rtype, at, name = BROKER_RESOURCE, self._controller_or(None), ""
        r = self.side.probe(at).alter_configs(rtype, name, a["configs"])
        return {"errors": {x["resource_name"] or "<default>": _err(x["error_code"]) if not x["error_code"] else
                           [_err(x["error_code"]), x["error_message"]] for x in r["responses"]}}

    def _elect(self, a: dict) -> Any:
        return self.side.elect_preferred(a["partitions"] or None)

    def _produce(self, a: dict) -> Any:
        view = self.view()
        topic = a["topic"]
        parts = [a["partition"]] if "partition" in a else sorted(p for t, p in view.partitions if t == topic)
        acks = {"all": -1, "1": 1, "0": 0}[a["acks"]]
        out = {}
        for p in parts:
            leader = view.partitions[(topic, p)]["leader"]
            if leader < 0 or leader not in self.side.answering():
                out[f"{topic}/{p}"] = "no leader answering"
                continue
            r = self.side.probe(leader, 20.0).produce(topic, p, [b"v%d" % i for i in range(a["count"])], acks)
            if r is None:
                out[f"{topic}/{p}"] = "sent (acks=0)"
                continue
            x = r["responses"][0]["partition_responses"][0]
            out[f"{topic}/{p}"] = {"error": _err(x["error_code"]), "base_offset": x["base_offset"]}
        return out

    def _metadata(self, a: dict) -> Any:
        if a["topic"] not in {t for t, _ in self.view().partitions}:
            self.random_topics.add(a["topic"])   # created here, if at all, with a random placement
        md = self.side.probe(self.first_answering()).metadata([a["topic"]], auto_create=True)
        return {t["name"]: {"error": _err(t["error_code"]), "partitions": len(t["partitions"])} for t in md["topics"]}

    # ------------------------------------------------------------------ members

    def _new_member(self, group: str, index: int) -> Member | JavaGroupMember:
        j = self.joins[group]
        bootstrap = ",".join("%s:%d" % self.side.kafka_address(b) for b in self.side.broker_ids())
        kind = JavaGroupMember if j.get("java") else Member   # Kafka 2.8.2's own consumer, or librdkafka
        m = kind(bootstrap, group, j["topic"], index, j["assignor"], j["static"], self.record_member,
                 session_timeout_ms=j["session_ms"])
        self.members.setdefault(group, {})[index] = m
        self._wait_group(group)
        return m

    def _wait_group(self, group: str) -> None:
        live = [m for m in self.members[group].values() if not m.closed.is_set()]
        try:
            wait_for(lambda: all(m.generation is not None for m in live)
                     and self._group_stable(group, len(live)), 60, f"group {group} to be Stable")
        except TimeoutError:
            self.record_member(f"{group}/*", "not_stable", len(live))

    def _join(self, a: dict) -> Any:
        self.joins[a["group"]] = dict(a)
        self.groups.add(a["group"])
        for i in range(1, a["members"] + 1):
            self._new_member(a["group"], i)
        return {}

    def _add(self, a: dict) -> Any:
        group = a["group"]
        index = max(self.members[group]) + 1
        self._new_member(group, index)
        return {"member": index}

    def _leave(self, a: dict) -> Any:
        self.members[a["group"]][a["member"]].close()
        if any(not m.closed.is_set() for m in self.members[a["group"]].values()):
            self._wait_group(a["group"])
        return {}

    def _restart(self, a: dict) -> Any:
        self.members[a["group"]][a["member"]].close()
        self._new_member(a["group"], a["member"])
        return {}

    def _commit(self, a: dict) -> Any:
        return {m.name: m.command("commit") for m in self.members[a["group"]].values() if not m.closed.is_set()}


def run_side(scenario: CompareScenario, side_name: str, out: Path, ports: list[int],
             say: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the scenario on one side into ``out/<side>/``; returns (and writes) its observations."""
    d = out / side_name
    if d.exists() and any(d.iterdir()):
        import shutil
        shutil.rmtree(d)
    side = SIDES[side_name](scenario, d, ports)
    say(f"{side_name}: {scenario.name} ({len(scenario.steps)} steps) -> {d}")
    obs = SideRun(scenario, side, say).run()
    (d / OBSERVATIONS).write_text(json.dumps(obs, indent=1, default=str))
    return obs
