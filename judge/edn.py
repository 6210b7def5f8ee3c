"""The history in Jepsen's EDN form (``history.edn``), for Jepsen's and Elle's tools.

One map per operation and line, in history order::

    {:type :invoke, :f :send, :value {:topic "t", :value "p0-1"}, :process 3, :time 1388362752112, :index 0}
    {:type :info, :f :kill, :value {:fault 0, ...}, :process :nemesis, :time 1388362752999, :index 7}

* ``:type`` and ``:f`` are keywords (``:fetch-committed`` keeps its dash); a
  ``process`` of ``"nemesis"`` is ``:nemesis``.  A value that cannot be a
  keyword (it contains a space, say) stays a string.
* Map keys are keywords when they are simple identifiers (``:high_watermark``),
  else strings (``"t/0"``).  Lists are vectors, null is ``nil``.
* Strings escape ``\\``, ``"``, newline, tab and return; other control
  characters are written ``\\uXXXX``.  Non-finite floats are ``##NaN``,
  ``##Inf`` and ``##-Inf``.
* Top-level keys whose value is null (``:error``, ``:node`` ...) are left out,
  as Jepsen does; ``:value`` is always present.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Iterable

_FIRST_KEYS = ("type", "f", "value", "process", "time", "index")
_SIMPLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_KEYWORD_VALUE = re.compile(r"^[A-Za-z_*!?<>=+\-][A-Za-z0-9_*!?<>=+\-.]*$")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def edn_string(s: str) -> str:
    out = []
    for ch in s:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _keyword_or_string(s: Any) -> str:
    if isinstance(s, str) and _KEYWORD_VALUE.match(s) and not _looks_numeric(s):
        return ":" + s
    return edn_value(s)


def _looks_numeric(s: str) -> bool:
    # ":-1" or ":+2" would read as keywords, but stay away from anything number-like
    return bool(re.match(r"^[+\-]?\d", s))


def _key(k: Any) -> str:
    if isinstance(k, str) and _SIMPLE_KEY.match(k):
        return ":" + k
    return edn_value(k)


def edn_value(v: Any) -> str:
    """One JSON-like value in EDN."""
    if v is None:
        return "nil"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "##NaN"
        if math.isinf(v):
            return "##Inf" if v > 0 else "##-Inf"
        return repr(v)
    if isinstance(v, str):
        return edn_string(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} {edn_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + " ".join(edn_value(x) for x in v) + "]"
    raise TypeError(f"no EDN form for {type(v).__name__}: {v!r}")


def op_to_edn(op: dict[str, Any]) -> str:
    """One history line as an EDN map."""
    parts = []
    keys = [k for k in _FIRST_KEYS if k in op] + [k for k in op if k not in _FIRST_KEYS]
    for k in keys:
        v = op[k]
        if k in ("type", "f"):
            parts.append(f":{k} {_keyword_or_string(v)}")
        elif k == "process":
            parts.append(f":process {':nemesis' if v == 'nemesis' else edn_value(v)}")
        elif k == "value":
            parts.append(f":value {edn_value(v)}")
        elif v is not None:
            parts.append(f"{_key(k)} {edn_value(v)}")
    return "{" + ", ".join(parts) + "}"


def to_edn(ops: Iterable[dict[str, Any]]) -> str:
    """The history as EDN, one map per line (each followed by a newline)."""
    return "".join(op_to_edn(op) + "\n" for op in ops)


def write_edn(ops: Iterable[dict[str, Any]], path: Path | str) -> None:
    Path(path).write_text(to_edn(ops), encoding="utf-8")
