"""Running the cases on both sides, comparing the answers, and the table ``kafkasim conformance`` prints."""
from __future__ import annotations

import copy
import json
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

from conformance import table_admin
from conformance.cases import API_NAMES, IGNORED, UNORDERED, Case
from conformance.compare import Difference, compare, quote
from conformance.fixes import FIXES
from conformance.side import Side
from conformance.tables import all_cases
from conformance.wire import CLIENT_ID, encode_request


@dataclass
class Result:
    case: Case
    status: str                       # equal | known | differing | error
    differences: list[Difference] = field(default_factory=list)
    answers: dict[str, Any] = field(default_factory=dict)
    error: str = ""


def advertised(side: Side) -> dict[int, tuple[int, int]]:
    r = side.call(side.first, 18, 3, {"client_software_name": "kafkasim-conformance",
                                      "client_software_version": "1.0"})
    return {k["api_key"]: (k["min_version"], k["max_version"]) for k in r["api_keys"]}


def intersection(a: dict[int, tuple[int, int]], b: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    out = {}
    for k in sorted(set(a) & set(b)):
        lo, hi = max(a[k][0], b[k][0]), min(a[k][1], b[k][1])
        if lo <= hi:
            out[k] = (lo, hi)
    return out


def select(cases: list[Case], only: str | None) -> list[Case]:
    if not only:
        return cases
    want = {w.strip().lower() for w in only.split(",") if w.strip()}
    return [c for c in cases if c.api.lower() in want or c.id.lower() in want
            or any(c.id.lower().startswith(w + ".") or c.id.lower().startswith(w) for w in want if "." in w)]


def in_scope(case: Case, shared: dict[int, tuple[int, int]]) -> bool:
    if case.frame_version is not None:     # a version deliberately outside both sides' ranges
        return True
    r = shared.get(case.api_key)
    return r is not None and r[0] <= case.version <= r[1]


def ask(side: Side, case: Case, correlation_id: int) -> dict[str, Any]:
    for step in case.setup:
        side.apply(step)
    broker = side.target(case.target)
    fields = side.resolve(case.fields)
    frame = encode_request(case.api_key, case.version, fields, correlation_id, CLIENT_ID)
    if case.frame_version is not None:     # the header names the unsupported version
        frame = frame[:6] + struct.pack(">h", case.frame_version) + frame[8:]
    conn = side.fresh(broker) if case.frame_version is not None else side.conn(broker)
    try:
        return conn.request(case.api_key, case.version, fields, correlation_id, frame=frame)
    finally:
        if case.frame_version is not None:
            conn.close()


def run_case(case: Case, sides: tuple[Side, Side], correlation_id: int) -> Result:
    answers: dict[str, Any] = {}
    try:
        for side in sides:
            answers[side.name] = ask(side, case, correlation_id)
    except Exception as e:  # a setup or a request that failed on one side: reported, never hidden
        return Result(case, "error", answers=answers, error=f"{type(e).__name__}: {e}")
    a, b = (copy.deepcopy(answers[s.name]) for s in sides)
    try:
        if case.view is not None:
            a, b = case.view(a), case.view(b)
        if case.quoted:
            a, b = (quote(x, case.quoted, s.vars) for x, s in zip((a, b), sides))
    except Exception as e:  # an answer the view cannot read: reported with both answers
        return Result(case, "error", answers=answers, error=f"view: {type(e).__name__}: {e}")
    diffs = compare(a, b, ignore={**IGNORED, **case.ignore}, unordered=UNORDERED, known=case.known)
    status = "equal" if not diffs else "known" if all(d.known for d in diffs) else "differing"
    return Result(case, status, diffs, answers)


@dataclass
class Report:
    results: list[Result]
    shared: dict[int, tuple[int, int]]
    uncovered: list[tuple[int, int]]
    out_of_scope: list[str]
    seconds: float

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    @property
    def ok(self) -> bool:
        return self.count("differing") == 0 and self.count("error") == 0

    def print(self, out: TextIO) -> None:
        w = lambda s="": print(s, file=out)  # noqa: E731
        w("APIs both sides advertise (the versions they share):")
        w("  " + ", ".join(f"{API_NAMES.get(k, k)} {lo}-{hi}" for k, (lo, hi) in self.shared.items()))
        if self.uncovered:
            w("API versions with no case: " + ", ".join(f"{API_NAMES.get(k, k)} v{v}" for k, v in self.uncovered))
        w()
        per_api: dict[str, list[Result]] = {}
        for r in self.results:
            per_api.setdefault(r.case.api, []).append(r)
        w(f"{'API':<24}{'cases':>7}{'equal':>7}{'known':>7}{'differing':>11}{'error':>7}")
        for api, rs in per_api.items():
            n = lambda s: sum(r.status == s for r in rs)  # noqa: E731
            w(f"{api:<24}{len(rs):>7}{n('equal'):>7}{n('known'):>7}{n('differing'):>11}{n('error'):>7}")
        w(f"{'total':<24}{len(self.results):>7}{self.count('equal'):>7}{self.count('known'):>7}"
          f"{self.count('differing'):>11}{self.count('error'):>7}")
        w(f"fixed: {len(FIXES)}   ({self.seconds:.0f} s)")
        for status, title in (("differing", "Differing (not listed in docs/deviations.md)"),
                              ("error", "Errors (a setup step or a request failed)"),
                              ("known", "Known differences (docs/deviations.md)")):
            rs = [r for r in self.results if r.status == status]
            if rs:
                w()
                w(f"{title}:")
            for r in rs:
                w(f"  {r.case.id}  ->  broker {r.case.target}")
                if r.error:
                    w(f"      {r.error}")
                for d in r.differences:
                    w(f"      {d}")
        if FIXES:
            w()
            w("Fixed in kafkasim by this suite (conformance/fixes.py):")
            for what, shown_by, commit in FIXES:
                w(f"  {commit}  {what}  [{shown_by}]")
        if self.out_of_scope:
            w()
            w(f"{len(self.out_of_scope)} cases not run (a version one side does not advertise): "
              + ", ".join(self.out_of_scope))
        w()
        w("PASS: no unlisted difference" if self.ok else "FAIL: unlisted differences or errors above")

    def to_json(self) -> dict[str, Any]:
        def plain(v: Any) -> Any:
            if isinstance(v, (bytes, bytearray, memoryview)):
                return {"hex": bytes(v).hex()}
            if isinstance(v, dict):
                return {k: plain(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [plain(x) for x in v]
            return v
        return {"cases": len(self.results), "equal": self.count("equal"), "known": self.count("known"),
                "differing": self.count("differing"), "error": self.count("error"), "fixed": FIXES,
                "results": [{"id": r.case.id, "api": r.case.api, "version": r.case.version, "target": r.case.target,
                             "status": r.status, "error": r.error,
                             "differences": [{"path": d.path, "kafka": plain(d.kafka), "kafkasim": plain(d.kafkasim),
                                              "known": d.known} for d in r.differences],
                             "answers": plain(r.answers)} for r in self.results]}


def run(sides: tuple[Side, Side], only: str | None = None, cases: list[Case] | None = None,
        progress: Callable[[Result], None] | None = None) -> Report:
    started = time.monotonic()
    kafka, sim = sides
    shared = intersection(advertised(kafka), advertised(sim))
    table_admin.SHARED_APIS.clear()
    table_admin.SHARED_APIS.update(shared)
    chosen = select(cases if cases is not None else all_cases(), only)
    todo = [c for c in chosen if in_scope(c, shared)]
    skipped = [c.id for c in chosen if not in_scope(c, shared)]
    covered = {(c.api_key, c.version) for c in todo}
    apis = {c.api_key for c in chosen}
    uncovered = [(k, v) for k, (lo, hi) in shared.items() for v in range(lo, hi + 1)
                 if (k, v) not in covered and (not only or k in apis)]
    results = []
    for i, case in enumerate(todo):
        r = run_case(case, sides, correlation_id=i + 1)
        results.append(r)
        if progress is not None:
            progress(r)
    return Report(results, shared, uncovered, skipped, time.monotonic() - started)


def write(report: Report, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "conformance.json"
    path.write_text(json.dumps(report.to_json(), indent=1, default=repr))
    return path
