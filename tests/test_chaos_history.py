"""judge.history (the writer, the reader, Jepsen's pairing) and judge.edn (the EDN export)."""
from __future__ import annotations

import itertools
import json
import re
import threading

import pytest

from judge.edn import edn_string, to_edn, write_edn
from judge.check_model import pair_ops
from judge.history import HistoryWriter, read_history


def counter_clock(start: int = 1_000, step: int = 10):
    it = itertools.count(start, step)
    return lambda: next(it)


# ---------------------------------------------------------------------- writer and reader

def test_round_trip_assigns_index_and_time_and_copies_the_invoke(tmp_path):
    path = tmp_path / "h" / "history.jsonl"
    with HistoryWriter(path, clock=counter_clock()) as h:
        inv = h.invoke(3, "send", {"topic": "t", "value": "p0-1"})
        ok = h.complete(inv, "ok", {"topic": "t", "partition": 1, "offset": 7, "value": "p0-1"}, node=2)
        c = h.invoke(4, "commit", {"member": "m", "generation": 2, "offsets": {"t/1": 8}}, group="g")
        fail = h.complete(c, "fail", error="ILLEGAL_GENERATION")
        fin = h.invoke(5, "poll", {"topic": "t", "partition": 1}, final=True)
        fin_ok = h.complete(fin, "ok", {"records": [["t", 1, 7, "p0-1"]], "high_watermark": 8})
        nem = h.nemesis("kill", {"fault": 0, "phase": "start", "kind": "kill", "target": "controller", "nodes": [2]})
        assert h.counts() == {"send": {"invoke": 1, "ok": 1}, "commit": {"invoke": 1, "fail": 1},
                              "poll": {"invoke": 1, "ok": 1}, "kill": {"info": 1}}
    lines = read_history(path)
    assert lines == [inv, ok, c, fail, fin, fin_ok, nem]
    assert [op["index"] for op in lines] == list(range(7))
    assert [op["time"] for op in lines] == [1000 + 10 * i for i in range(7)]
    assert ok == {"index": 1, "type": "ok", "process": 3, "time": 1010, "f": "send",
                  "value": {"topic": "t", "partition": 1, "offset": 7, "value": "p0-1"},
                  "error": None, "node": 2, "group": None}
    assert fail["group"] == "g" and fail["value"] == c["value"] and fail["error"] == "ILLEGAL_GENERATION"
    assert fin["final"] is True and fin_ok["final"] is True and "final" not in inv
    assert nem["process"] == "nemesis" and nem["type"] == "info"
    raw = path.read_text().splitlines()
    assert all(" " not in line.split('"value"')[0] for line in raw)   # compact
    assert json.loads(raw[0]) == inv


def test_each_line_reaches_the_file_at_once(tmp_path):
    path = tmp_path / "history.jsonl"
    h = HistoryWriter(path, clock=counter_clock())
    h.invoke(0, "join", {"member": ""}, group="g")
    assert len(read_history(path)) == 1   # readable before close
    h.close()
    h.close()   # idempotent
    with pytest.raises(ValueError, match="closed"):
        h.invoke(1, "join", {"member": ""}, group="g")


@pytest.mark.parametrize("call, match", [
    (lambda h: h.invoke(0, "produce", {}), "unknown client operation"),
    (lambda h: h.invoke("nemesis", "send", {}), "client process"),
    (lambda h: h.invoke(-1, "send", {}), "client process"),
    (lambda h: h.invoke(True, "send", {}), "client process"),
    (lambda h: h.complete(h.invoke(0, "send", {}), "done"), "ok, fail or info"),
    (lambda h: h.complete({"type": "ok", "process": 0, "f": "send"}, "ok"), "invoke"),
    (lambda h: h.complete(h.invoke(0, "send", {}), "ok", error="TIMEOUT"), "no error"),
    (lambda h: h.invoke(0, "send", {}, index=5), "set by the writer"),
    (lambda h: h.nemesis("", {}), "non-empty"),
])
def test_programming_errors_are_refused(tmp_path, call, match):
    with HistoryWriter(tmp_path / "h.jsonl", clock=counter_clock()) as h:
        with pytest.raises(ValueError, match=match):
            call(h)


def test_a_process_runs_one_operation_at_a_time(tmp_path):
    with HistoryWriter(tmp_path / "h.jsonl", clock=counter_clock()) as h:
        inv = h.invoke(0, "send", {"topic": "t", "value": "a"})
        with pytest.raises(ValueError, match="already has an open operation"):
            h.invoke(0, "send", {"topic": "t", "value": "b"})
        h.complete(inv, "info", error="DEADLINE_EXCEEDED")
        with pytest.raises(ValueError, match="not open"):
            h.complete(inv, "ok")
        assert h.open_ops() == []
        again = h.invoke(0, "send", {"topic": "t", "value": "c"})
        assert h.open_ops() == [again]
    assert len(read_history(tmp_path / "h.jsonl")) == 3


def test_threads_get_unique_indexes_in_time_order(tmp_path):
    path = tmp_path / "history.jsonl"
    per_thread, threads_n = 200, 8
    with HistoryWriter(path) as h:   # the real monotonic clock
        def work(process: int) -> None:
            for i in range(per_thread):
                inv = h.invoke(process, "send", {"topic": "t", "value": f"{process}-{i}"})
                h.complete(inv, "ok" if i % 3 else "fail", node=process)
                if i % 50 == 0:
                    h.nemesis("pause", {"fault": i, "phase": "start"})
        threads = [threading.Thread(target=work, args=(p,)) for p in range(threads_n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(n for by in h.counts().values() for n in by.values()) == threads_n * (2 * per_thread + 4)
    lines = read_history(path)
    assert [op["index"] for op in lines] == list(range(len(lines)))
    assert all(a["time"] <= b["time"] for a, b in zip(lines, lines[1:]))
    pairs = pair_ops(lines)
    assert len(pairs) == threads_n * per_thread and all(done is not None for _inv, done in pairs)
    assert all(inv["process"] == done["process"] and inv["index"] < done["index"] for inv, done in pairs)


def test_a_torn_last_line_and_garbage_are_skipped(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, clock=counter_clock()) as h:
        a = h.invoke(0, "send", {"topic": "t", "value": "a"})
        b = h.complete(a, "ok", {"topic": "t", "partition": 0, "offset": 0, "value": "a"})
    with open(path, "a", encoding="utf-8") as f:
        f.write("not json\n")
        f.write('{"index": 2, "type": "invoke", "proc')   # a crash mid-line
    assert read_history(path) == [a, b]


# ---------------------------------------------------------------------- pairing

def _line(index: int, type_: str, process, f: str = "send") -> dict:
    return {"index": index, "type": type_, "process": process, "time": index, "f": f, "value": None}


def test_pairing_is_by_process_and_open_invokes_pair_with_none():
    lines = [_line(0, "invoke", 1), _line(1, "invoke", 2), _line(2, "info", "nemesis", "kill"),
             _line(3, "ok", 2), _line(4, "invoke", 2), _line(5, "info", 1), _line(6, "invoke", 3)]
    pairs = pair_ops(list(reversed(lines)))   # order comes from index
    assert [(i["index"], None if d is None else d["index"]) for i, d in pairs] == [(0, 5), (1, 3), (4, None),
                                                                                   (6, None)]


@pytest.mark.parametrize("lines, match", [
    ([_line(0, "ok", 1)], "no open invoke"),
    ([_line(0, "invoke", 1), _line(1, "invoke", 1)], "invoked while"),
    ([_line(0, "started", 1)], "unknown type"),
])
def test_malformed_histories_are_refused(lines, match):
    with pytest.raises(ValueError, match=match):
        pair_ops(lines)


# ---------------------------------------------------------------------- EDN

def test_edn_lines_follow_jepsen():
    ops = [
        {"index": 0, "type": "invoke", "process": 3, "time": 123456789, "f": "send",
         "value": {"topic": "t", "value": "p0-1"}, "error": None, "node": None, "group": None},
        {"index": 1, "type": "ok", "process": 4, "time": 123456800, "f": "fetch-committed",
         "value": {"offsets": {"t/0": 5, "t/1": -1}}, "error": None, "node": 2, "group": "g1", "final": True},
        {"index": 2, "type": "info", "process": "nemesis", "time": 123456900, "f": "expire-session",
         "value": {"fault": 0, "nodes": [2, "zk1"], "ok": False, "x": None, "ratio": 0.5},
         "error": None, "node": None, "group": None},
    ]
    assert to_edn(ops).splitlines() == [
        '{:type :invoke, :f :send, :value {:topic "t", :value "p0-1"}, :process 3, :time 123456789, :index 0}',
        '{:type :ok, :f :fetch-committed, :value {:offsets {"t/0" 5, "t/1" -1}}, :process 4, :time 123456800, '
        ':index 1, :node 2, :group "g1", :final true}',
        '{:type :info, :f :expire-session, :value {:fault 0, :nodes [2 "zk1"], :ok false, :x nil, :ratio 0.5}, '
        ':process :nemesis, :time 123456900, :index 2}',
    ]


def test_edn_strings_are_escaped():
    assert edn_string('a"b\\c\nd\te\rf\x01g\x7fé') == '"a\\"b\\\\c\\nd\\te\\rf\\u0001g\\u007fé"'


def test_edn_round_trips_through_a_reader(tmp_path):
    nasty = 'quote " backslash \\ newline \n tab \t ctrl \x02 unicode ✓'
    ops = [{"index": 0, "type": "fail", "process": 7, "time": 5, "f": "commit",
            "value": {"member": nasty, "generation": -1, "offsets": {"my topic/3": 12}, "list": [1, [2, None]],
                      "weird key!": True},
            "error": nasty, "node": None, "group": "g"}]
    path = tmp_path / "history.edn"
    write_edn(ops, path)
    (parsed,) = [read_edn(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert parsed == {
        ":type": ":fail", ":f": ":commit", ":process": 7, ":time": 5, ":index": 0, ":group": "g", ":error": nasty,
        ":value": {":member": nasty, ":generation": -1, ":offsets": {"my topic/3": 12}, ":list": [1, [2, None]],
                   "weird key!": True},
    }


# A tiny EDN reader (enough for what to_edn writes): keywords come back as ":name".
_TOKEN = re.compile(r'\s*(?:(?P<open>[{\[])|(?P<close>[}\]])|(?P<str>"(?:[^"\\]|\\.)*")|(?P<atom>[^\s,{}\[\]"]+))'
                    r'[\s,]*')
_UNESCAPE = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


def read_edn(text: str):
    tokens = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        assert m and m.end() > pos, f"cannot read {text[pos:]!r}"
        tokens.append(m)
        pos = m.end()
    value, rest = _parse(tokens, 0)
    assert rest == len(tokens)
    return value


def _parse(tokens, i):
    m = tokens[i]
    if m.group("open"):
        items, i = [], i + 1
        while not tokens[i].group("close"):
            item, i = _parse(tokens, i)
            items.append(item)
        if m.group("open") == "[":
            return items, i + 1
        return dict(zip(items[::2], items[1::2])), i + 1
    if m.group("str"):
        body = m.group("str")[1:-1]
        out = re.sub(r'\\u([0-9a-fA-F]{4})|\\(.)',
                     lambda x: chr(int(x.group(1), 16)) if x.group(1) else _UNESCAPE[x.group(2)], body)
        return out, i + 1
    atom = m.group("atom")
    if atom in ("nil", "true", "false"):
        return {"nil": None, "true": True, "false": False}[atom], i + 1
    if atom.startswith(":"):
        return atom, i + 1
    return (float(atom) if "." in atom else int(atom)), i + 1
