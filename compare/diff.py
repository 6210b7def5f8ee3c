"""Comparing Kafka 2.8.2's entries with kafkasim's: each stream entry by entry, the first difference of each.

Streams are compared one by one, not interleaved (two partitions' changes a few ms apart may land in either
order on real processes), as ``sim fidelity`` does.  Each difference is **listed** when docs/deviations.md
explains it (:data:`KNOWN`: a stream pattern, what differs, and where it is written up), else **unlisted**:
a bug to fix or a deviation to write up.

    diffs = compare(entries(kafka_obs), entries(kafkasim_obs))
    print(report(diffs, kafka_entries, kafkasim_entries))
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from compare.normalize import IGNORED, Entry

KAFKA, KAFKASIM = "kafka", "kafkasim"


@dataclass(frozen=True)
class Known:
    """A difference docs/deviations.md explains: the streams matching ``stream`` (a regex), where ``check`` (if
    given) holds of the difference."""
    stream: str
    why: str
    where: str                  # the section of docs/deviations.md
    check: Callable[["Difference"], bool] | None = None

    def covers(self, d: "Difference") -> bool:
        return re.fullmatch(self.stream, d.stream) is not None and (self.check is None or self.check(d))


def _values(d: "Difference") -> tuple[Any, Any]:
    return (d.kafka.value if d.kafka else None), (d.kafkasim.value if d.kafkasim else None)


def _deleted_without_offline_replicas(d: "Difference") -> bool:
    """kafkasim's state znode goes (deleted) where Kafka's first takes a new state (its OfflineReplica step)."""
    return (d.kafkasim is not None and d.kafkasim.value is None and d.kafka is not None
            and isinstance(d.kafka.value, dict) and d.kafka.phase == d.kafkasim.phase)


def _hw_ahead_after_shrink(d: "Difference") -> bool:
    """The same partitions and log starts; kafkasim's latest offset (the HW) ahead of Kafka's, never behind."""
    a, b = _values(d)
    if not (isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b)) or d.kafka.phase != d.kafkasim.phase:
        return False
    ahead = False
    for p, x in a.items():
        y = b[p]
        if not (isinstance(x, dict) and isinstance(y, dict) and x.get("earliest") == y.get("earliest")
                and isinstance(x.get("latest"), int) and isinstance(y.get("latest"), int)
                and x["latest"] <= y["latest"]):
            return False
        ahead |= x["latest"] < y["latest"]
    return ahead


#: the differences docs/deviations.md lists, each with its section there
KNOWN: list[Known] = [
    Known(r"zk(-shape)? /latest_producer_id_block", "kafkasim claims a block of producer ids at the first "
          "InitProducerId, Kafka 2.8 at every broker's start-up", "Producer ids are claimed when first needed"),
    Known(r"zk /brokers/topics/[^/]+/partitions/\d+/state", "Kafka takes a deleted topic's replicas offline "
          "before it deletes the znodes", "Topic deletion goes straight to deleting the znodes",
          _deleted_without_offline_replicas),
    Known(r"list_offsets .*", "kafkasim's HW moves when an ISR shrink is committed, Kafka 2.8.2's at the next append",
          "The leader's high watermark after an ISR shrink", _hw_ahead_after_shrink),
]
CHECKPOINTS = ("metadata@", "find_coordinator ", "describe_groups ", "offset_fetch ", "list_offsets ")


def merge_phases(entries: list[Entry], merged: Iterable[tuple[int, int]]) -> list[Entry]:
    """Entries with each merged range of phases counted as its first (``merge.phases`` of a scenario); of a
    checkpoint stream's entries in a merged range only the last is kept (what the cluster looked like once
    the range was over: the checkpoints in between caught the timer-driven change or not, by timing)."""
    ranges = list(merged)

    def phase(p: int) -> int:
        return next((a for a, b in ranges if a <= p <= b), p)
    out: list[Entry] = []
    last: dict[str, int] = {}   # checkpoint stream -> index in out of its entry in the current merged range
    for e in entries:
        m = phase(e.phase)
        moved = e if m == e.phase else Entry(e.stream, m, e.value)
        in_range = any(a <= e.phase <= b for a, b in ranges)
        if in_range and e.stream.startswith(CHECKPOINTS):
            i = last.get(e.stream)
            if i is not None and out[i].phase == m:
                out[i] = moved
                continue
            last[e.stream] = len(out)
        out.append(moved)
    return out


def scenario_known(scenario: Any) -> list[Known]:
    """A scenario's own ``listed`` entries as Known ones: its streams, from its step on."""
    return [Known(x.streams, f"a consequence of what the scenario exercises from step {x.from_step}", x.deviation,
                  (lambda d, n=x.from_step: d.phase >= n)) for x in scenario.listed]


@dataclass(frozen=True)
class Difference:
    stream: str
    index: int                  # the first entry of the stream that differs
    kafka: Entry | None         # None: the stream ended on this side
    kafkasim: Entry | None
    before: Entry | None        # the last entry both sides agree on
    known: Known | None = None

    @property
    def phase(self) -> int:
        return min(e.phase for e in (self.kafka, self.kafkasim) if e is not None)

    def text(self, names: tuple[str, str] = (KAFKA, KAFKASIM)) -> str:
        """The difference; ``names`` label the two sides (``sim fidelity --compare`` compares the simulator's
        entries, in the second place, with either real side's)."""
        def side(e: Entry | None) -> str:
            return e.text() if e is not None else "(nothing more)"
        agreed = f"after {self.before.text()}" if self.before else "at its first entry"
        head = f"{self.stream}, entry {self.index + 1} ({agreed})"
        if self.known:
            head += f"\n  listed: {self.known.why} (docs/deviations.md: {self.known.where})"
        width = max(len(n) for n in names) + 1
        return (f"{head}\n  {names[0] + ':':<{width}} {side(self.kafka)}"
                f"\n  {names[1] + ':':<{width}} {side(self.kafkasim)}")


def streams(entries: Iterable[Entry]) -> dict[str, list[Entry]]:
    out: dict[str, list[Entry]] = {}
    for e in entries:
        out.setdefault(e.stream, []).append(e)
    return out


def compare(kafka: list[Entry], kafkasim: list[Entry], known: list[Known] | None = None) -> list[Difference]:
    """Each stream's first difference, earliest phase first; each marked listed when ``known`` covers it."""
    known = KNOWN if known is None else known
    a, b = streams(kafka), streams(kafkasim)
    diffs = []
    for stream in list(a) + [s for s in b if s not in a]:
        xs, ys = a.get(stream, []), b.get(stream, [])
        for i in range(max(len(xs), len(ys))):
            x = xs[i] if i < len(xs) else None
            y = ys[i] if i < len(ys) else None
            if x is None or y is None or x.key() != y.key():
                d = Difference(stream, i, x, y, xs[i - 1] if i else None)
                k = next((k for k in known if k.covers(d)), None)
                diffs.append(Difference(d.stream, d.index, d.kafka, d.kafkasim, d.before, k))
                break
    return sorted(diffs, key=lambda d: (d.phase, d.stream))


def unlisted(diffs: list[Difference]) -> list[Difference]:
    return [d for d in diffs if d.known is None]


def report(diffs: list[Difference], kafka: list[Entry], kafkasim: list[Entry], title: str = "",
           sides: tuple[str, str] = ("Kafka 2.8.2", KAFKASIM), labels: tuple[str, str] = (KAFKA, KAFKASIM)) -> str:
    """The first difference with both sides' values, every other, then a summary (``sides``: the two sides'
    names in the header, ``labels`` in each difference)."""
    a, b = streams(kafka), streams(kafkasim)
    names = list(a) + [s for s in b if s not in a]
    lines = [title] if title else []
    lines.append(f"compared {len(names)} streams ({len(kafka)} entries from {sides[0]}, {len(kafkasim)} from "
                 f"{sides[1]}); controllers relabelled by first appearance, random placements by replica index")
    for what, why in IGNORED.items():
        lines.append(f"  ignored: {what}: {why}")
    bad = unlisted(diffs)
    if diffs:
        first = bad[0] if bad else diffs[0]
        lines.append("first difference:" if bad else "first (listed) difference:")
        lines.append("  " + first.text(labels).replace("\n", "\n  "))
        rest = [d for d in diffs if d is not first]
        if rest:
            lines.append("others:")
            for d in rest:
                lines.append("  " + d.text(labels).replace("\n", "\n  "))
    lines.append(summary_line(diffs, len(names)))
    return "\n".join(lines)


def summary_line(diffs: list[Difference], n_streams: int) -> str:
    bad = unlisted(diffs)
    if not diffs:
        return f"SAME: {n_streams} streams, every entry equal"
    return (f"{'DIFFERENT' if bad else 'SAME but listed'}: {n_streams} streams, {n_streams - len(diffs)} equal, "
            f"{len(diffs) - len(bad)} differing as listed in docs/deviations.md, {len(bad)} unlisted")


def outcome(diffs: list[Difference]) -> dict[str, Any]:
    return {"differences": len(diffs), "listed": len(diffs) - len(unlisted(diffs)), "unlisted": len(unlisted(diffs)),
            "unlisted_streams": [d.stream for d in unlisted(diffs)]}
