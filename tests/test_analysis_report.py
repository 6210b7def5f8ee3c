"""The pipeline's HTML report (analysis/report.py) over two real 10-s chaos runs, and over empty tables."""
from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis import report
from analysis.plots import stage_segments

PNG = b"\x89PNG\r\n\x1a\n"
EVIL = '<script>alert("x")</script> & <b>bold</b>'


@pytest.fixture(scope="module")
def built(analysed):
    """The tables of the two real runs, as the pipeline wrote them (the shared analysis of tests/conftest.py,
    read back from Parquet), and their verdicts."""
    real = F.col("run").isin("clean", "planted")
    tables = {name: df.where(real) for name, df in analysed["tables"].items()}
    return tables, tables.pop("verdicts")


def _planted_anomaly(spark, tables) -> tuple[int, DataFrame]:
    """One extra anomaly for the planted run, with text that must be escaped and a real op index as evidence."""
    index = (tables["ops"].where((F.col("run") == "planted") & (F.col("f") == "commit"))
             .agg(F.min("index")).first()[0])
    row = spark.createDataFrame(
        [("planted", "fenced-generation-commit", EVIL, "g1", None, None, [index], ["group_generation"],
          '{"why": "<added by the test>"}')],
        "run string, kind string, message string, group string, topic string, partition int, "
        "op_indexes array<long>, event_types array<string>, details string")
    return index, row


def _section(doc: str, run: str) -> str:
    """The run's own section of the report."""
    m = re.search(r'<h2 id="run\d{3}-%s">.*?(?=<h2 |<p class="note">Generated)' % re.escape(run), doc, re.S)
    assert m, f"no section for run {run}"
    return m.group(0)


def _images(path: Path, doc: str) -> list[str]:
    srcs = re.findall(r'<img src="([^"]+)"', doc)
    for src in srcs:
        assert not src.startswith("/") and "://" not in src, src
        f = path.parent / src
        assert f.is_file() and f.stat().st_size > 1000, src
        assert f.read_bytes()[:8] == PNG, src
    return srcs


def test_report_of_two_real_runs(spark, built, tmp_path):
    tables, verdicts = built
    index, extra = _planted_anomaly(spark, tables)
    real = tables["anomalies"].collect()
    path = report.write_report(dict(tables, anomalies=tables["anomalies"].unionByName(extra)), tmp_path, verdicts)

    assert path == tmp_path / "report" / "report.html" and path.is_file()
    assert sorted(p.name for p in path.parent.iterdir()) == ["img", "report.html"]   # one HTML file, its plots
    doc = path.read_text()
    srcs = _images(path, doc)
    assert sorted(srcs) == sorted(f"img/{p.name}" for p in (path.parent / "img").iterdir())
    assert "img/stages-per-run.png" in srcs and "img/op-latency.png" in srcs
    assert "<script" not in doc and html.escape(EVIL) in doc                  # every text is escaped

    sections = {run: _section(doc, run) for run in ("clean", "planted")}
    for run, v in verdicts.select("run", "verdict").collect():
        assert f">{run}</a>" in doc and f'class="v-{v}">{v}<' in sections[run]
    for run, sec in sections.items():
        assert re.search(r'<img src="img/run\d{3}-%s-timeseries.png"' % run, sec)
        assert re.search(r'<img src="img/run\d{3}-%s-partitions.png"' % run, sec)
    for run, kind, target in tables["faults"].select("run", "kind", "target").distinct().collect():
        assert f"<td>{html.escape(kind)}</td><td>{html.escape(target)}</td>" in sections[run], (run, kind, target)
    fo = tables["failovers"].where(F.col("group").isNotNull()).select("run", "group").distinct().collect()
    assert fo, "a coordinator-kill run has failover rows"
    for run, group in fo:
        assert f"<td>{html.escape(group)}</td>" in sections[run]                  # in the failover table
        assert re.search(r'<img src="img/run\d{3}-%s-stages.png"' % run, sections[run])
    for run, groups in tables["ops"].groupBy("run").agg(F.collect_set("group")).collect():
        for g in groups:
            assert html.escape(g) in sections[run], (run, g)

    planted = sections["planted"]
    assert "<td>fenced-generation-commit</td>" in planted and f"<td>{index}</td>" in planted
    for a in real:      # what the checkers found (the planted bug usually shows; a 10-s run may miss it)
        ids = " ".join(str(i) for i in sorted(a["op_indexes"] or []))
        assert f"<td>{html.escape(a['kind'])}</td>" in sections[a["run"]] and f"<td>{ids}</td>" in sections[a["run"]]
    assert "<td>fenced-generation-commit</td><td class=\"n\">" in doc           # counted across runs


def test_runs_without_faults_or_anomalies(built, tmp_path, monkeypatch):
    """Only the client ops: one sentence per missing part, and the per-run sections capped (and said so)."""
    tables, _ = built
    monkeypatch.setattr(report, "MAX_DETAIL_RUNS", 1)
    path = report.write_report({"ops": tables["ops"], "faults": tables["faults"].limit(0),
                                "anomalies": tables["anomalies"].limit(0)}, tmp_path)
    doc = path.read_text()
    _images(path, doc)
    assert len(re.findall(r'<h2 id="run\d{3}-', doc)) == 1
    assert "Runs shown in detail: 1 of 2" in doc
    for sentence in ("No faults in this run.", "No anomalies in this run.", "No anomalies in any run.",
                     "No failover rows: no fault hit a group&#x27;s coordinator or the controller in this run.",
                     "No partition state changes recorded for this run.",
                     "No group was unavailable after a fault"):
        assert sentence in doc, sentence
    assert re.search(r'<img src="img/run000-(clean|planted)-timeseries.png"', doc)


@pytest.mark.parametrize("how", ["no tables", "empty tables"])
def test_empty_tables(built, tmp_path, how):
    tables, verdicts = built
    if how == "no tables":
        path = report.write_report({}, tmp_path)
    else:
        path = report.write_report({k: v.limit(0) for k, v in tables.items()}, tmp_path, verdicts.limit(0))
    doc = path.read_text()
    assert path.is_file() and doc.startswith("<!DOCTYPE html>") and doc.rstrip().endswith("</html>")
    assert "No runs: every table is empty, nothing to show." in doc and "No run to show in detail." in doc
    assert "<img" not in doc and list((path.parent / "img").iterdir()) == []


def test_stage_segments():
    row = {"detect_ms": 100.0, "elect_ms": 150.0, "load_ms": 160.0, "first_commit_ms": 400.0}
    assert stage_segments(row) == [100.0, 50.0, 10.0, 240.0]
    # a stage that did not happen adds nothing; one that ended earlier than the one before adds nothing
    assert stage_segments({"detect_ms": 6000.0, "first_commit_ms": 800.0}) == [6000.0, 0.0, 0.0, 0.0]
    assert stage_segments({"first_commit_ms": 500.0}) == [0.0, 0.0, 0.0, 500.0]


def _generated_masked(doc: str) -> str:
    return re.sub(r"Generated by analysis/report.py in [0-9.]+ s", "Generated", doc)


@pytest.mark.parametrize("anomaly,meta", [(True, False), (False, False), (True, True), (False, True)],
                         ids=["an-anomaly", "none", "an-anomaly-meta", "none-meta"])
def test_a_prepared_report_is_the_same_report(spark, built, tmp_path, monkeypatch, anomaly, meta):
    """``prepare_report`` (what ``analysis.main`` does while the checkers run: the collects and figures that need
    none of the checkers' tables) then ``write_report(prepared=)``: the same HTML and the same PNG files as
    ``write_report`` alone.  With an anomaly the runs' order changes (the files' names with it) and the
    planted run's partitions are chosen again; with none, every figure drawn ahead is used, none drawn twice
    (those that need the checkers' tables are drawn after them).  With ``meta`` (the runs' scenario, seed and
    client, as ``analysis.runs.read_meta`` gives them before the checkers end, which ``analysis.main`` passes)
    the figure by client is drawn ahead too."""
    tables, verdicts = built
    if anomaly:
        tables = dict(tables, anomalies=tables["anomalies"].unionByName(_planted_anomaly(spark, tables)[1]))
    else:
        tables = dict(tables, anomalies=tables["anomalies"].limit(0))
        verdicts = verdicts.withColumn("verdict", F.lit("valid"))
    alone = report.write_report(tables, tmp_path / "alone", verdicts)

    drawn: list[str] = []   # the files each plot call wrote

    def counting(fn):
        def plot(path, *args, **kwargs):
            drawn.append(path.name)
            return fn(path, *args, **kwargs)
        plot.__qualname__ = fn.__qualname__
        return plot

    for name in ("timeseries", "unavailability", "stages", "partitions", "stage_boxes", "op_latency",
                 "verdicts_per_scenario"):
        monkeypatch.setattr(report.plots, name, counting(getattr(report.plots, name)))
    early = {k: v for k, v in tables.items() if k not in ("anomalies", "runs")}
    given = tables["runs"].select("run", "scenario", "seed", "client") if meta else None
    prepared = report.prepare_report(early, tmp_path / "prepared", given)
    path = report.write_report(tables, tmp_path / "prepared", verdicts, prepared=prepared)
    firsts = [n.startswith(".ahead") for n in drawn]   # drawn in the order asked: every figure ahead first
    assert any(firsts) and firsts == sorted(firsts, reverse=True), drawn
    again = [n for n in drawn if not n.startswith(".ahead")]
    if anomaly:   # the planted run's partitions (an anomaly may name one) at least
        assert any(n.endswith("-planted-partitions.png") for n in again), drawn
    elif meta:   # but the figure of the verdicts
        assert set(again) <= {"verdicts-by-scenario.png"}, drawn
    else:   # but the two figures of the runs table (scenario, client) and the verdicts
        assert set(again) <= {"verdicts-by-scenario.png", "stages-by-client.png"}, drawn

    assert _generated_masked(path.read_text()) == _generated_masked(alone.read_text())
    files = sorted(p.name for p in (alone.parent / "img").iterdir())
    assert sorted(p.name for p in (path.parent / "img").iterdir()) == files   # no figure drawn ahead is left
    for name in files:
        assert (path.parent / "img" / name).read_bytes() == (alone.parent / "img" / name).read_bytes(), name
