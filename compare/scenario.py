"""A differential scenario: the chaos format's cluster and topics, and a list of fixed ``steps``.

    name: controller-kill
    cluster: {brokers: 3, controller: 1, config: {zookeeper.session.timeout.ms: 6000}}
    topics:
      - {name: __consumer_offsets, replicas: [[1, 2, 3], [2, 3, 1], [3, 1, 2]]}
      - {name: events, replicas: [[1, 2, 3], [2, 3, 1]]}
    settle.ms: 1500            # optional: how long nothing may change before a step counts as done
    steps:
      - produce 5 to events acks=all
      - join group g1 to events with range members 2
      - kill controller
      - start broker:1
      - wait isr full

``name``, ``description``, ``cluster`` and ``topics`` are parsed by :func:`chaos.scenario.parse_scenario` (the
same keys, the same checks); ``steps`` and ``settle.ms`` are this module's.  Each step is one line of a small
language (:data:`GRAMMAR`); a line that does not parse is a :class:`ScenarioError` naming the step and what
was expected.  Targets are chaos targets (``controller``, ``coordinator:g``, ``leader:t/0``, ``broker:2``),
resolved against ZooKeeper when the step runs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from chaos.scenario import Scenario, ScenarioError, find_in, parse_scenario, read_yaml
from chaos.targets import TargetError, parse_target

ASSIGNORS = ("range", "roundrobin", "cooperative-sticky")   # librdkafka's
DEFAULT_SETTLE_MS = 1500
DEFAULT_MEMBER_SESSION_S = 10      # a member's session.timeout.ms (the Java and librdkafka default in 2.8)
SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios" / "compare"

_T = r"(?P<target>\S+)"
_DUR = r"(?P<secs>\d+(?:\.\d+)?)s"
#: each step kind and its line (named groups are its arguments; [..] parts are optional)
GRAMMAR: dict[str, str] = {
    "kill": rf"kill {_T}",
    "terminate": rf"terminate {_T}",
    "pause": rf"pause {_T}(?: for {_DUR})?",
    "resume": rf"resume {_T}",
    "start": r"start broker:(?P<broker>\d+)",
    "expire": rf"expire session {_T}",
    "create": (r"create topic (?P<topic>[\w.-]+) (?P<partitions>\d+) rf (?P<rf>\d+)"
               r"(?P<configs>(?: config [\w.]+=\S+)*)(?: via (?P<via>\S+))?"),
    "delete": r"delete topic (?P<topic>[\w.-]+)(?: via (?P<via>\S+))?",
    "elect": r"elect preferred(?P<partitions>(?: [\w.-]+/\d+)*)",
    "partitions": r"add partitions to (?P<topic>[\w.-]+) count (?P<count>\d+)",
    "reassign": r"reassign (?P<topic>[\w.-]+)/(?P<partition>\d+) to (?P<replicas>\d+(?:,\d+)*)(?P<zookeeper> via zookeeper)?",
    "config": r"alter config (?P<entity>topic [\w.-]+|broker \d+|brokers)(?P<configs>(?: [\w.]+=\S+)+)",
    "produce": (r"produce (?P<count>\d+) to (?P<topic>[\w.-]+)(?: partition (?P<partition>\d+))?"
                r"(?: acks=(?P<acks>all|1|0))?"),
    "join": (r"join group (?P<group>[\w.-]+) to (?P<topic>[\w.-]+)(?: with (?P<assignor>[\w-]+))?"
             r"(?: members (?P<members>\d+))?(?P<static> static)?(?: session (?P<session>\d+)s)?(?P<java> java)?"),
    "add": r"add member to (?P<group>[\w.-]+)",
    "leave": r"leave member (?P<group>[\w.-]+)/(?P<member>\d+)",
    "restart": r"restart member (?P<group>[\w.-]+)/(?P<member>\d+)",
    "commit": r"commit group (?P<group>[\w.-]+)",
    "metadata": r"metadata (?P<topic>[\w.-]+)",
    "wait": r"wait (?:(?P<secs>\d+(?:\.\d+)?)s|(?P<cond>isr full|leaders|controller|stable))",
}
_COMPILED = {k: re.compile(v + r"$") for k, v in GRAMMAR.items()}
SIGNAL_KINDS = ("kill", "terminate", "pause", "resume", "expire")


@dataclass(frozen=True)
class Step:
    index: int                  # 1-based; phase 0 is the set-up
    text: str
    kind: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Listed:
    """A scenario's own listed difference: streams (a regex) that differ, from step ``from_step`` on, because the
    scenario exercises a difference docs/deviations.md explains (its section: ``deviation``)."""
    streams: str
    deviation: str
    from_step: int = 0


@dataclass(frozen=True)
class CompareScenario:
    base: Scenario              # cluster, topics (chaos's parse)
    steps: tuple[Step, ...]
    settle_ms: int = DEFAULT_SETTLE_MS
    source: str = ""
    listed: tuple[Listed, ...] = ()
    # steps whose phases count as one: a timer-driven change (an ISR shrink after the lag, an automatic
    # preferred election) falls in one or the other by timing alone
    merged: tuple[tuple[int, int], ...] = ()

    @property
    def name(self) -> str:
        return self.base.name

    def groups(self) -> list[str]:
        return sorted({s.args["group"] for s in self.steps if "group" in s.args})

    def needs_zk_links(self) -> bool:
        """A step cuts a broker off ZooKeeper: the brokers reach it through the fault proxy."""
        return any(s.kind == "expire" for s in self.steps)


def parse_step(index: int, text: str, source: str = "<scenario>") -> Step:
    """One line of ``steps`` -> a Step; ScenarioError names the step and the forms it can take."""
    line = " ".join(str(text).split())
    where = f"{source}: steps[{index - 1}] {line!r}"
    word = line.split(" ", 1)[0] if line else ""
    kinds = [k for k, v in GRAMMAR.items() if v.split(" ", 1)[0].lstrip("(").startswith(word)] if word else []
    for kind in kinds or GRAMMAR:
        m = _COMPILED[kind].match(line)
        if m:
            return Step(index, line, kind, _args(kind, m, where))
    forms = "; ".join(_readable(GRAMMAR[k]) for k in (kinds or GRAMMAR))
    raise ScenarioError(f"{where}: not a step; expected {forms}")


def _readable(pattern: str) -> str:
    text = re.sub(r"\(\?P<(\w+)>[^()]*(?:\([^()]*\)[^()]*)*\)", r"<\1>", pattern)
    return text.replace("(?:", "[").replace(")?", "]").replace(")*", "]...").replace("\\", "")


def _args(kind: str, m: re.Match[str], where: str) -> dict[str, Any]:
    args: dict[str, Any] = {k: v for k, v in m.groupdict().items() if v is not None}
    for k in ("partitions", "rf", "count", "partition", "members", "member", "broker"):
        if k in args and isinstance(args[k], str) and args[k].strip().isdigit():
            args[k] = int(args[k])
    if "secs" in args:
        args["secs"] = float(args["secs"])
    if "target" in args:
        try:
            parse_target(args["target"])
        except TargetError as e:
            raise ScenarioError(f"{where}: {e}") from None
    if kind == "pause" and "secs" not in args:
        args["secs"] = None
    if kind == "create":
        configs = {}
        for item in args.pop("configs", "").split(" config ")[1:]:
            key, _, value = item.strip().partition("=")
            configs[key] = value
        args["configs"] = configs
    if kind == "reassign":
        args["replicas"] = [int(b) for b in args["replicas"].split(",")]
        args["zookeeper"] = "zookeeper" in args   # /admin/reassign_partitions, as the ZooKeeper-era tool writes it
    if kind == "config":
        args["configs"] = dict(item.partition("=")[::2] for item in args["configs"].split())
    if kind == "elect":
        args["partitions"] = [(p.rsplit("/", 1)[0], int(p.rsplit("/", 1)[1])) for p in args.get("partitions", "").split()]
    if kind == "join":
        args.setdefault("assignor", "range")
        args.setdefault("members", 1)
        args["session_ms"] = int(args.pop("session", DEFAULT_MEMBER_SESSION_S)) * 1000
        args["static"] = "static" in args
        args["java"] = "java" in args   # Kafka 2.8.2's own consumer instead of librdkafka (compare/members.py)
        if args["assignor"] not in ASSIGNORS:
            raise ScenarioError(f"{where}: assignor {args['assignor']!r}: librdkafka members take "
                                f"{', '.join(ASSIGNORS)}")
    if kind == "produce":
        args.setdefault("acks", "all")
    if "via" in args:
        try:
            t = parse_target(args["via"])
        except TargetError as e:
            raise ScenarioError(f"{where}: via: {e}") from None
        if t.kind not in ("controller", "broker"):
            raise ScenarioError(f"{where}: via: controller or broker:<id>, not {args['via']!r}")
    return args


def parse_compare(data: Any, source: str = "<scenario>") -> CompareScenario:
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{source}: expected a mapping")
    rest = dict(data)
    raw_steps = rest.pop("steps", None)
    settle = rest.pop("settle.ms", DEFAULT_SETTLE_MS)
    raw_listed = rest.pop("listed", [])
    raw_merged = rest.pop("merge.phases", [])
    for key in ("workload", "faults", "duration.s", "network"):
        if key in rest:
            raise ScenarioError(f"{source}: {key}: a compare scenario has fixed steps, not a chaos {key}")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise ScenarioError(f"{source}: steps: required, a list of steps (see compare/scenario.py)")
    if isinstance(settle, bool) or not isinstance(settle, int) or not 100 <= settle <= 60_000:
        raise ScenarioError(f"{source}: settle.ms: milliseconds in 100..60000, got {settle!r}")
    base = parse_scenario({**rest, "workload": {"producers": {"count": 0}}}, source)   # the steps are the workload
    steps = tuple(parse_step(i, s, source) for i, s in enumerate(raw_steps, 1))
    listed = []
    if not isinstance(raw_listed, list):
        raise ScenarioError(f"{source}: listed: a list of {{streams, deviation, from.step}}")
    for i, item in enumerate(raw_listed):
        if not isinstance(item, dict) or set(item) - {"streams", "deviation", "from.step"} or \
                not isinstance(item.get("streams"), str) or not isinstance(item.get("deviation"), str):
            raise ScenarioError(f"{source}: listed[{i}]: {{streams: REGEX, deviation: SECTION, from.step: N}}")
        try:
            re.compile(item["streams"])
        except re.error as e:
            raise ScenarioError(f"{source}: listed[{i}].streams: {e}") from None
        listed.append(Listed(item["streams"], item["deviation"], int(item.get("from.step", 0))))
    topics = {t.name for t in base.topics}
    for s in steps:
        topic = s.args.get("topic")
        if s.kind in ("produce", "join") and topic not in topics and not any(
                p.kind == "create" and p.args["topic"] == topic and p.index < s.index for p in steps):
            raise ScenarioError(f"{source}: steps[{s.index - 1}] {s.text!r}: topic {topic!r} is neither in "
                                f"topics nor created by an earlier step")
        if s.kind == "start" and not 1 <= s.args["broker"] <= base.brokers:
            raise ScenarioError(f"{source}: steps[{s.index - 1}] {s.text!r}: brokers are 1..{base.brokers}")
    merged = []
    for i, r in enumerate(raw_merged if isinstance(raw_merged, list) else [None]):
        if (not isinstance(r, list) or len(r) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in r)
                or not 1 <= r[0] < r[1] <= len(steps)):
            raise ScenarioError(f"{source}: merge.phases[{i}]: [first step, last step], steps 1..{len(steps)}")
        merged.append((r[0], r[1]))
    return CompareScenario(base, steps, settle, source, tuple(listed), tuple(merged))


def load_compare(path: Path | str) -> CompareScenario:
    path = Path(path)
    return parse_compare(read_yaml(path), str(path))


def find_compare(name_or_path: str) -> Path:
    """A path, or the name of a file in scenarios/compare/ (with or without .yaml)."""
    return find_in(SCENARIO_DIR, name_or_path, "compare scenario")


def list_compare() -> list[Path]:
    return sorted(SCENARIO_DIR.glob("*.yaml"))
