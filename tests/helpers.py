"""Reading what the brokers wrote: their event logs."""
from __future__ import annotations

from typing import Any

from node.cluster import Cluster
from node.events import read_events


def events(cluster: Cluster, broker: int | None = None, type_: str | None = None, **match: Any) -> list[dict]:
    out: list[dict] = []
    paths = sorted((cluster.run_dir / "events").glob("broker-*.jsonl"))
    for p in paths:
        for e in read_events(p):
            if broker is not None and e["broker"] != broker:
                continue
            if type_ is not None and e["type"] != type_:
                continue
            if all(e.get(k) == v for k, v in match.items()):
                out.append(e)
    return sorted(out, key=lambda e: e["mono_ns"])


def offsets_partitions(view) -> dict[int, dict]:
    return view.topics["__consumer_offsets"]["partitions"]
