"""The report's first screen: the verdict, each anomaly with its evidence (the history lines and event lines it
cites), and each group's failover timeline; and the cross-run plots (stages per fault kind and client, verdicts
per scenario).  HTML only: the numbers come from ``analysis.report_data``."""
from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from analysis import plots
from analysis.report_data import BOX_STAGES

MAX_RUN_ROWS = 500          # rows of the runs table in the report (every run is in the ``runs`` Parquet table)


class Html(str):
    """Text that is already HTML (not escaped again)."""


def esc(v: Any) -> str:
    if isinstance(v, Html):
        return v
    return html.escape("" if v is None else str(v), quote=True)


def fmt(v: Any, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v)
    return str(v)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Iterable[int] = ()) -> str:
    num = set(numeric)
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for r in rows:
        cells = "".join(f"<td class=\"n\">{esc(fmt(c))}</td>" if i in num else
                        f"<td>{c if isinstance(c, Html) else esc(fmt(c))}</td>" for i, c in enumerate(r))
        body.append(f"<tr>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def none(sentence: str) -> str:
    return f"<p class=\"none\">{esc(sentence)}</p>"


def verdict(v: str | None) -> Html | str:
    return Html(f"<span class=\"v-{esc(v)}\">{esc(v)}</span>") if v else "–"


def img(img_dir: Path, name: str, alt: str) -> str:
    return f"<img src=\"{esc(img_dir.name + '/' + name)}\" alt=\"{esc(alt)}\">"


def short(details: str | None, limit: int = 400) -> str | None:
    if details is None:
        return None
    try:
        details = json.dumps(json.loads(details), sort_keys=True)
    except ValueError:
        pass
    return details if len(details) <= limit else details[:limit] + "…"


def _kinds(by_kind: dict | None) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted((by_kind or {}).items()))


# ------------------------------------------------------------------ the top of the report

def verdicts_block(infos: dict[str, dict], anchors: dict[str, str]) -> str:
    """The verdict(s) first: one run's in a sentence; many runs' counted, the runs not valid listed."""
    if not infos:
        return ""
    if len(infos) == 1:
        (r, i), = infos.items()
        why = f" — {esc('; '.join(i['unknowns']))}" if i["unknowns"] else ""
        found = f" — {i['anomalies']:,} anomalies" if i["anomalies"] else ""
        return (f"<p class=\"verdict\">Verdict: {esc(verdict(i['verdict']))}{found}{why} "
                f"(<a href=\"#{esc(anchors.get(r, 'across'))}\">{esc(r)}</a>)</p>")
    counts: dict[str, int] = {}
    for i in infos.values():
        counts[i["verdict"] or "–"] = counts.get(i["verdict"] or "–", 0) + 1
    out = ["<p class=\"verdict\">Verdicts: " + " · ".join(
        f"{esc(verdict(v) if v != '–' else v)} {n:,}" for v, n in sorted(counts.items())) + "</p>"]
    bad = [r for r, i in infos.items() if i["verdict"] in ("invalid", "unknown") or i["anomalies"]]
    if bad:
        shown = bad[:MAX_RUN_ROWS]
        out.append(table(["run", "verdict", "anomalies", "by kind", "unknown because"],
                         [[Html(f"<a href=\"#{esc(anchors[r])}\">{esc(r)}</a>") if r in anchors else r,
                           verdict(infos[r]["verdict"]), infos[r]["anomalies"],
                           _kinds(infos[r].get("anomalies_by_kind")), "; ".join(infos[r]["unknowns"])]
                          for r in shown], numeric=(2,)))
    return "\n".join(out)


def _evidence_line(run: str, i: int, op: dict | None, t0: int) -> list[Any]:
    if op is None:
        return [str(i), "–", "", "", "", "", "", "", ""]
    line = "invoke" if op["index"] == i else "completion"
    at = op["invoke_ns"] if line == "invoke" else op["complete_ns"]
    what = " ".join(f"{k}={op[k]}" for k in ("topic", "partition", "offset", "value", "member", "generation", "error")
                    if op.get(k) is not None)
    return [str(i), line, op["process"], op["f"], op["type"] if line == "completion" else "invoke",
            None if at is None else (at - t0) / 1e9, op["group"], op["node"], what]


def anomalies_block(run: str, slug: str, info: dict, data: dict, max_listed: int) -> str:
    """The run's anomalies, each with a link to its evidence: the cited history lines (from the ops table) and
    event lines (from the anomaly's details), listed below the table."""
    anomalies = data["anomalies"].get(run, [])
    if not anomalies:
        return none("No anomalies in this run.")
    capped = f" (the first {max_listed})" if info["anomalies"] > len(anomalies) else ""
    rows, blocks = [], []
    for n, a in enumerate(anomalies):
        anchor = f"ev-{slug}-{n}"
        rows.append([a["kind"], a["message"], a["group"],
                     f"{a['topic']}/{a['partition']}" if a["topic"] is not None else None,
                     " ".join(str(i) for i in sorted(a["op_indexes"] or [])), ", ".join(a["event_types"] or []),
                     Html(f"<a href=\"#{anchor}\">evidence</a>")])
        lines = [_evidence_line(run, i, data["evidence"].get((run, i)), info["t0"]) for i in a["op_indexes"] or []]
        try:
            events = json.loads(a["details"] or "{}").get("events") or []
        except (ValueError, AttributeError):
            events = []
        body = [f"<div class=\"evidence\" id=\"{anchor}\"><p><b>{esc(a['kind'])}</b>: {esc(a['message'])}</p>"]
        if lines:
            body.append(table(["history index", "line", "process", "op", "type", "at (s)", "group", "node",
                               "value"], lines, numeric=(5,)))
        if events:
            body.append(table(["broker", "event", "at (s)", "mono_ns"],
                              [[e.get("broker"), e.get("type"),
                                None if e.get("mono_ns") is None else (e["mono_ns"] - info["t0"]) / 1e9,
                                e.get("mono_ns")] for e in events if isinstance(e, dict)], numeric=(0, 2)))
        body.append(f"<p class=\"note\">details: {esc(short(a['details']))}</p></div>")
        blocks.append("".join(body))
    return (f"<p class=\"note\">Anomalies: {info['anomalies']}{capped}.</p>"
            + table(["kind", "message", "group", "partition", "evidence ops (index)", "evidence events", ""], rows)
            + "<details open><summary>Evidence</summary>" + "\n".join(blocks) + "</details>")


def timeline_block(run: str, info: dict, data: dict) -> str:
    """Each group's failover timeline (a table per group, then the controller's), from the failovers rows."""
    rows = data["failovers"].get(run, [])
    if not rows:
        return none("No failover rows: no fault hit a group's coordinator or the controller in this run.")
    by_group: dict[str, list[dict]] = {}
    for r in rows:
        by_group.setdefault(r["group"] if r["group"] is not None else "", []).append(r)
    out = []
    for g in sorted(by_group, key=lambda g: (g == "", g)):
        rs = by_group[g]
        if g:
            out.append(f"<h4>group {esc(g)}</h4>")
            out.append(table(["fault", "kind", "target", "at (s)", "group", "partition", "old → new leader",
                              "detect", "by", "elect", "load", "first commit", "unavailable"],
                             [[_fault(r), r["kind"], r["target"], r["time_s"], r["group"], r["partition"],
                               f"{fmt(r['old_leader'])} → {fmt(r['new_leader'])}", r["detect_ms"], r["detect_by"],
                               r["elect_ms"], r["load_ms"], r["first_commit_ms"],
                               r["unavailable_ms"] if r["unavailable_ms"] is not None else "not recovered"]
                              for r in rs], numeric=(3, 5, 7, 9, 10, 11, 12)))
        else:
            out.append("<h4>controller</h4>")
            out.append(table(["fault", "kind", "target", "at (s)", "old → new controller", "detect", "by",
                              "controller failover"],
                             [[_fault(r), r["kind"], r["target"], r["time_s"],
                               f"{fmt(r['old_controller'])} → {fmt(r['new_controller'])}", r["detect_ms"],
                               r["detect_by"], r["controller_failover_ms"]] for r in rs], numeric=(3, 5, 7)))
    return ("<p class=\"note\">ms from the fault's start (docs/chaos.md, \"Failover timeline\"); a row without "
            "a fault is a move no fault explains (its cause in brackets).</p>" + "\n".join(out))


def _fault(r: dict) -> Any:
    return r["fault"] if r["fault"] is not None else f"({r['cause']})"


# ------------------------------------------------------------------ across runs

def runs_rows(infos: dict[str, dict], links: dict[str, Any], per_run: dict) -> tuple[list[str], list[list]]:
    rows = []
    for r, i in list(infos.items())[:MAX_RUN_ROWS]:
        s = per_run.get((r, "unavailable_ms"))
        rows.append([links[r], i.get("scenario"), None if i.get("seed") is None else str(i["seed"]), i.get("client"), verdict(i["verdict"]), i["ops"],
                     i["ok"], i["fail"], i["info"], i["open"], i["faults"], i["failovers"], i["unrecovered"],
                     s["q"][2] if s else None, s["q"][4] if s else None, i["anomalies"],
                     _kinds(i.get("anomalies_by_kind")), i["end_s"], "; ".join(i["unknowns"])])
    head = ["run", "scenario", "seed", "client", "verdict", "ops", "ok", "fail", "info", "open", "faults",
            "failover rows", "not recovered", "unavailable p50 (ms)", "unavailable p95 (ms)", "anomalies", "by kind",
            "duration (s)", "unknown because"]
    return head, rows


def cross_run_plots(data: dict, img_dir: Path, draw: Callable[..., None]) -> list[str]:
    """Stage distributions per fault kind and per client, verdicts per scenario (each drawn by ``draw(plot,
    *args)``)."""
    out = []
    for key, name, what in (("stages_kind", "stages-by-fault-kind.png", "fault kind"),
                            ("stages_client", "stages-by-client.png", "client")):
        stats = data.get(key) or {}
        labels = sorted({b for b, _s in stats if b is not None})
        stages = [(k, label) for k, label in BOX_STAGES if any((b, k) in stats for b in labels)]
        if len(labels) > 1 and stages:   # a single box per stage: the stage table above has its figures
            draw(plots.stage_boxes, img_dir / name, stages, labels, stats, title=f"failover stages per {what} (ms)")
            out.append(f"<h3>Failover stages per {esc(what)}</h3><p class=\"note\">Box p25–p75, the median, whiskers "
                       "p5–p95, over the rows of faults of every run.</p>" + img(img_dir, name, f"stages per {what}"))
    vs = data.get("verdict_scenario") or []
    if len({r["scenario"] for r in vs}) > 1:   # one scenario's bar: the verdict block at the top says it
        draw(plots.verdicts_per_scenario, img_dir / "verdicts-by-scenario.png", vs)
        out.append("<h3>Verdicts per scenario</h3>" + img(img_dir, "verdicts-by-scenario.png", "verdicts per scenario"))
    return out
