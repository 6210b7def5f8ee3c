"""util/jsonlines.py's writer: each line the text ``json.dumps`` gives with the writer's options (the C encoder made
once per writer, not once per line)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from util.jsonlines import JsonLinesWriter, read_json_lines

OBJECTS = [
    {"ts_ms": 1764533000123.457, "mono_ns": 123456789012345, "broker": 1, "type": "became_follower", "isr": [1, 2, 3],
     "nested": {"a": [None, True, False, {"b": -0.0}]}, "x": 1e300, "y": -7, "z": 2 ** 80},
    {"text": "naïve ☃ \u2028 \"quoted\" \\ \n\t\x00", "ключ": "значение", "": ""},
    {"path": Path("/tmp/x"), "set": {3}, "bytes": b"ab", "tuple": (1, "2")},
    {"nan": math.nan, "inf": math.inf, "ninf": -math.inf},
    {},
]


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_each_line_is_what_json_dumps_gives(tmp_path, ensure_ascii):
    w = JsonLinesWriter(tmp_path / "l.jsonl", default=str, ensure_ascii=ensure_ascii)
    for obj in OBJECTS:
        assert w.write(obj)
    assert w.write_many(OBJECTS)
    w.close()
    want = "".join(json.dumps(o, separators=(",", ":"), default=str, ensure_ascii=ensure_ascii) + "\n"
                   for o in OBJECTS * 2)
    assert (tmp_path / "l.jsonl").read_text(encoding="utf-8") == want
    assert len(list(read_json_lines(tmp_path / "l.jsonl"))) == 2 * len(OBJECTS)


def test_without_a_default_a_value_json_cannot_encode_is_an_error_and_nothing_is_written(tmp_path):
    w = JsonLinesWriter(tmp_path / "l.jsonl")
    with pytest.raises(TypeError):
        w.write({"path": Path("/tmp/x")})
    with pytest.raises(TypeError):
        w.write_many([{"a": 1}, {"b": {2}}])
    assert w.write({"a": 1})
    w.close()
    assert (tmp_path / "l.jsonl").read_text() == '{"a":1}\n'
