"""The failover timeline's summary and its plain-text table (``judge.timeline``'s rows in, numbers and text out).

Pure: the rows ``failover_timeline`` makes in, a dict of counts and per-stage median / p90 / max, or an aligned
table, out.
"""
from __future__ import annotations

import math
from typing import Sequence

from judge.timeline import CAUSE_END, CAUSE_FAULT, CAUSE_NONE, STAGES


def _median(vals: list[float]) -> float | None:
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else round((vals[mid - 1] + vals[mid]) / 2, 3)


def _p90(vals: list[float]) -> float | None:
    """Nearest rank: the smallest value with at least 90% of the values at or below it."""
    return vals[math.ceil(0.9 * len(vals)) - 1] if vals else None


def summarize(rows: Sequence[dict]) -> dict:
    """Counts, and median / p90 (nearest rank) / max of each stage over the fault rows that have it.

    Rows of moves no fault explains (``cause`` ``end phase`` or ``none in schedule``) are counted apart
    (``end_phase``, ``no_cause``) and left out of everything else: they are not failovers of a fault."""
    unattributed = [r for r in rows if r.get("cause", CAUSE_FAULT) != CAUSE_FAULT]
    rows = [r for r in rows if r.get("cause", CAUSE_FAULT) == CAUSE_FAULT]
    group_rows = [r for r in rows if r.get("group") is not None]
    stages = {}
    for stage in STAGES:
        vals = sorted(r[stage] for r in rows if r.get(stage) is not None)
        stages[stage] = {"count": len(vals), "median": _median(vals), "p90": _p90(vals),
                         "max": vals[-1] if vals else None}
    return {
        "rows": len(rows),
        "faults": len({r.get("fault") for r in rows}),
        "groups": len({r["group"] for r in group_rows}),
        "group_rows": len(group_rows),
        "controller_rows": len(rows) - len(group_rows),
        "moved": sum(1 for r in group_rows if r.get("moved")),
        "not_moved": sum(1 for r in group_rows if not r.get("moved")),
        "unavailable": sum(1 for r in group_rows if r.get("unavailable_from_ms") is not None),
        "never_recovered": sum(1 for r in group_rows if r.get("unavailable_from_ms") is not None
                               and r.get("unavailable_ms") is None),
        "end_phase": sum(1 for r in unattributed if r.get("cause") == CAUSE_END),
        "no_cause": sum(1 for r in unattributed if r.get("cause") == CAUSE_NONE),
        "stages": stages,
    }


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


_HEADER = ("fault", "kind", "target", "group", "P", "leader", "detect", "elect", "load (replayed)",
           "first commit", "unavailable", "ctrl failover")
_LEFT = 6  # the first columns are text, the rest numbers


def _cells(r: dict) -> tuple[str, ...]:
    if r.get("group") is None:
        who = f"c{r.get('old_controller')}→" + (f"c{r['new_controller']}" if r.get("new_controller") is not None
                                               else "-")
        group, part = "(controller)", "-"
    else:
        who = f"{r.get('old_leader')}→" + (str(r["new_leader"]) if r.get("new_leader") is not None else "-")
        group, part = str(r["group"]), str(r.get("partition"))
    load = _num(r.get("load_ms"))
    if r.get("records_replayed") is not None:
        load += f" ({r['records_replayed']})"
    unavailable = _num(r.get("unavailable_ms"))
    if r.get("unavailable_from_ms") is not None:
        unavailable = (f"{unavailable} (+{r['unavailable_from_ms']:.1f}.."
                       + (f"+{r['unavailable_to_ms']:.1f})" if r.get("unavailable_to_ms") is not None else ")"))
    if r.get("cause", CAUSE_FAULT) == CAUSE_FAULT:
        fault, kind, target = str(r.get("fault")), str(r.get("kind") or "-"), str(r.get("target") or "-")
    else:  # a move no fault explains: its cause where the fault's kind goes
        fault, kind, target = "-", f"({r['cause']})", "-"
    return (fault, kind, target, group, part, who,
            _num(r.get("detect_ms")), _num(r.get("elect_ms")), load, _num(r.get("first_commit_ms")),
            unavailable, _num(r.get("controller_failover_ms")))


def format_table(rows: Sequence[dict]) -> str:
    """An aligned plain-text table (times in ms from the fault, "-" = did not happen), then a summary per stage."""
    table = [_HEADER] + [_cells(r) for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(_HEADER))]
    out = ["  ".join(c.ljust(w) if i < _LEFT else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))).rstrip()
           for line in table]
    if not rows:
        out.append("(no fault hit a group coordinator or the controller)")
    s = summarize(rows)
    out.append("")
    out.append(f"{s['faults']} faults, {s['group_rows']} group rows ({s['moved']} moved, {s['not_moved']} not), "
               f"{s['controller_rows']} controller rows")
    if s["end_phase"] or s["no_cause"]:
        out.append(f"moves no fault explains (not in the figures below): {s['end_phase']} in the end phase, "
                   f"{s['no_cause']} with no cause in the schedule")
    for stage in STAGES:
        st = s["stages"][stage]
        name = stage.removesuffix("_ms").replace("_", " ")
        out.append(f"{name + ' ms':<24} median {_num(st['median']):>9}  p90 {_num(st['p90']):>9}  "
                   f"max {_num(st['max']):>9}  (n={st['count']})")
    return "\n".join(out)
