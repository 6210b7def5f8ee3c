"""Where a Spark analysis' time goes, as the analysis benchmarks print it (issue 49: profile first).

* ``steps(event_log)``: per job description (``analysis.main`` names each job by its step: ``table ops``,
  ``plan-checks``, ``report``, ...) the jobs, stages and tasks, the seconds some job of the step was running
  (``busy``) and the tasks' run time; and for the whole log the seconds in which no job ran at all (the
  driver planning, Python drawing, the session starting).
* ``ThreadCpu``: the CPU seconds of one JVM by kind of thread (from /proc): ``planning`` (py4j's command threads:
  every DataFrame built, analysed, optimized and planned in the driver, and each job submitted), ``tasks``
  (executor task threads), ``jit``, ``gc``, ``other``.
* ``machine()``: the machine and the Spark settings a figure was measured with (CPU model, cores, RAM, PySpark and
  Java versions, the driver's heap): 10M's ratio to parse-and-pair moved from 2.7x to 3.3x between two sessions on
  two VMs whose hardware nobody recorded (bench/RESULTS.md, issue 49), so a figure carried from one session to
  another names its machine.

Nothing here imports pyspark at import time; the event log is Spark's JSON lines (``spark.eventLog.enabled``).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.common import thread_times

KINDS = ("planning", "tasks", "jit", "gc", "other")


def _kind(thread: str) -> str:
    if thread.startswith("Executor task"):
        return "tasks"
    if re.fullmatch(r"Thread-\d+", thread):   # py4j's command threads (one per calling Python thread)
        return "planning"
    if "CompilerThre" in thread:
        return "jit"
    if thread.startswith("GC Thread") or thread.startswith("VM Thread") or thread.startswith("GC "):
        return "gc"
    return "other"


class ThreadCpu:
    """CPU seconds of JVM ``pid`` by kind of thread (``KINDS``).  ``sample()`` reads every thread now (a thread
    that ended between samples keeps its last reading); ``since(before)`` the difference by kind."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self.seen: dict[int, tuple[str, float]] = {}

    def sample(self) -> dict[str, float]:
        if self.pid:
            self.seen.update(thread_times(self.pid))
        out = dict.fromkeys(KINDS, 0.0)
        for name, cpu in self.seen.values():
            out[_kind(name)] += cpu
        return out

    @staticmethod
    def since(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        return {k: round(after[k] - before.get(k, 0.0), 1) for k in KINDS}


def format_threads(cpu: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in cpu.items())


def steps(event_log: Path, since_ms: int | None = None) -> dict[str, Any]:
    """Per job description: jobs, stages, tasks, busy seconds and task seconds (jobs submitted at or after
    ``since_ms``, epoch ms, when given); and ``idle_s``: seconds between the first job's submission and the last
    job's end (or from ``since_ms``) during which no job ran."""
    jobs: dict[int, list] = {}
    stage_job: dict[int, int] = {}
    task_s: dict[str, float] = defaultdict(float)
    tasks: dict[str, int] = defaultdict(int)
    with open(event_log) as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:   # a log still being written: its last line may be cut
                continue
            ev = e.get("Event")
            if ev == "SparkListenerJobStart":
                if since_ms is not None and e["Submission Time"] < since_ms:
                    continue
                desc = (e.get("Properties") or {}).get("spark.job.description") or "(unnamed)"
                jobs[e["Job ID"]] = [e["Submission Time"], None, desc, len(e["Stage IDs"])]
                for s in e["Stage IDs"]:
                    stage_job[s] = e["Job ID"]
            elif ev == "SparkListenerJobEnd" and e["Job ID"] in jobs:
                jobs[e["Job ID"]][1] = e["Completion Time"]
            elif ev == "SparkListenerTaskEnd" and stage_job.get(e["Stage ID"]) in jobs:
                info = e["Task Info"]
                desc = jobs[stage_job[e["Stage ID"]]][2]
                task_s[desc] += (info["Finish Time"] - info["Launch Time"]) / 1000
                tasks[desc] += 1
    per: dict[str, dict[str, Any]] = {}
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for start, end, desc, n_stages in jobs.values():
        if end is None:
            continue
        p = per.setdefault(desc, {"jobs": 0, "stages": 0})
        p["jobs"] += 1
        p["stages"] += n_stages
        spans[desc].append((start, end))
    for desc, p in per.items():
        p.update(busy_s=round(_covered(spans[desc]) / 1000, 1), task_s=round(task_s[desc], 1), tasks=tasks[desc])
    every = [s for v in spans.values() for s in v]
    idle = 0.0
    if every:
        first = since_ms if since_ms is not None else min(s for s, _ in every)
        idle = (max(t for _, t in every) - first - _covered(every)) / 1000
    order = sorted(per.items(), key=lambda kv: -kv[1]["task_s"])
    return {"steps": dict(order), "jobs": sum(p["jobs"] for p in per.values()),
            "stages": sum(p["stages"] for p in per.values()), "idle_s": round(idle, 1),
            "task_s": round(sum(p["task_s"] for p in per.values()), 1)}


def _covered(spans: list[tuple[int, int]]) -> int:
    """Milliseconds covered by the union of ``spans``."""
    total, cur = 0, None
    for s, t in sorted(spans):
        if cur is None or s > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [s, t]
        else:
            cur[1] = max(cur[1], t)
    return total + (cur[1] - cur[0] if cur is not None else 0)


def format_steps(prof: dict[str, Any], top: int = 12) -> list[str]:
    lines = [f"Spark jobs {prof['jobs']}, stages {prof['stages']}, task time {prof['task_s']} s; no job running for "
             f"{prof['idle_s']} s between the first job and the last (the driver alone)"]
    lines.append(f"  {'step (job description)':<26} {'jobs':>5} {'stages':>6} {'tasks':>6} {'busy s':>7} {'task s':>7}")
    for desc, p in list(prof["steps"].items())[:top]:
        lines.append(f"  {desc[:26]:<26} {p['jobs']:>5} {p['stages']:>6} {p['tasks']:>6} {p['busy_s']:>7} "
                     f"{p['task_s']:>7}")
    rest = list(prof["steps"].values())[top:]
    if rest:
        lines.append(f"  {'(' + str(len(rest)) + ' more)':<26} {sum(p['jobs'] for p in rest):>5} "
                     f"{sum(p['stages'] for p in rest):>6} {sum(p['tasks'] for p in rest):>6} "
                     f"{round(sum(p['busy_s'] for p in rest), 1):>7} {round(sum(p['task_s'] for p in rest), 1):>7}")
    return lines


def newest_log(event_dir: Path) -> Path | None:
    logs = sorted((p for p in Path(event_dir).glob("*") if p.is_file()), key=lambda p: p.stat().st_mtime)
    return logs[-1] if logs else None


def machine(master: str = "local[2]", input_bytes: int | None = None) -> dict[str, Any]:
    """The machine a figure is measured on and the pipeline's settings there (``analysis.spark.settings``: the
    driver's heap is half the RAM): CPU model, cores, RAM, PySpark's and Java's versions."""
    from analysis.spark import settings
    cpu: dict[str, str] = {}   # the first processor's fields (a VM may name no model: its family/model say it)
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                cpu[key.strip()] = value.strip()
    except OSError:
        pass
    model = (f"{cpu.get('model name', '?')} (family {cpu.get('cpu family', '?')}, model {cpu.get('model', '?')}, "
             f"stepping {cpu.get('stepping', '?')}, {cpu.get('cpu MHz', '?')} MHz)")
    try:
        ram_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30), 1)
    except (ValueError, OSError):
        ram_gib = None
    try:
        import pyspark
        spark_version = pyspark.__version__
    except ImportError:
        spark_version = None
    try:   # "openjdk version "17.0.15" 2025-04-15" -> its first line
        java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30).stderr.splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        java = None
    conf = settings(master, input_bytes)
    return {"cpu": model, "cores": os.cpu_count(), "ram_gib": ram_gib, "pyspark": spark_version, "java": java,
            "driver_memory": conf.get("spark.driver.memory"), "java_options": conf.get("spark.driver.extraJavaOptions")}


def format_machine(m: dict[str, Any]) -> str:
    return (f"machine: {m['cpu'] or '?'}, {m['cores']} cores, {m['ram_gib']} GiB RAM; PySpark {m['pyspark']}, "
            f"{m['java']}; driver heap {m['driver_memory']}")
