"""Comparing two decoded responses, field by field, recursively; pure (no I/O).

A difference has a path such as ``topics[0].partitions[2].error_code``.  Rules:

* **ignored** fields: a bare name (``throttle_time_ms``) is ignored wherever it stands; a path pattern
  (``topics[*].partitions[*].leader_id``, ``*`` for any index, ``fnmatch`` syntax) only there.  Each rule
  has its reason.
* **unordered** arrays: Kafka does not define their order (the topics of a Metadata answer), so both sides'
  arrays are sorted by the named key fields before they are compared (``{"topics": ("name",)}``; a pattern as
  above for a nested array).
* **known** differences: a pattern with the docs/deviations.md reason; a difference it matches is reported as
  known, not as unlisted.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

_INDEX = re.compile(r"\[\d+\]")


@dataclass(frozen=True)
class Difference:
    path: str
    kafka: Any
    kafkasim: Any
    known: str | None = None     # the deviation's reason when a known-difference rule matches

    def __str__(self) -> str:
        tail = f"  (known: {self.known})" if self.known else ""
        return f"{self.path}: kafka={_short(self.kafka)} kafkasim={_short(self.kafkasim)}{tail}"


def _short(v: Any, limit: int = 160) -> str:
    s = repr(v)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def generic(path: str) -> str:
    """``topics[0].partitions[2].error_code`` -> ``topics[*].partitions[*].error_code``."""
    return _INDEX.sub("[*]", path)


def matches(path: str, pattern: str) -> bool:
    """A bare name matches the last field of any path; a pattern with ``.`` or ``[`` matches whole paths
    (indices written ``[*]``), ``fnmatch``-style."""
    if "." not in pattern and "[" not in pattern:
        last = path.rsplit(".", 1)[-1]
        return _INDEX.sub("", last) == pattern
    g = generic(path)
    return g == pattern or fnmatch.fnmatchcase(g, pattern.replace("[*]", "[[]*[]]"))


def _first(rules: Mapping[str, Any], path: str) -> Any:
    for pattern, value in rules.items():
        if matches(path, pattern):
            return value
    return None


def _sort_key(item: Any, keys: Sequence[str]) -> tuple:
    if isinstance(item, dict):
        return tuple(repr(item.get(k)) for k in keys)
    return (repr(item),)


def compare(kafka: Any, kafkasim: Any, *, ignore: Mapping[str, str] = {}, unordered: Mapping[str, Sequence[str]] = {},
            known: Mapping[str, str] = {}, path: str = "") -> list[Difference]:
    """Every difference between two decoded values (dicts, lists, scalars, bytes)."""
    out: list[Difference] = []
    _walk(kafka, kafkasim, path, ignore, unordered, known, out)
    return out


def _walk(a: Any, b: Any, path: str, ignore, unordered, known, out: list[Difference]) -> None:
    if path and _first(ignore, path) is not None:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            sub = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                if _first(ignore, sub) is None:
                    out.append(Difference(sub, a.get(k, "<absent>"), b.get(k, "<absent>"), _first(known, sub)))
                continue
            _walk(a[k], b[k], sub, ignore, unordered, known, out)
        return
    if isinstance(a, list) and isinstance(b, list):
        keys = _first(unordered, path) if path else None
        if keys is not None:
            a, b = sorted(a, key=lambda x: _sort_key(x, keys)), sorted(b, key=lambda x: _sort_key(x, keys))
        if len(a) != len(b):
            out.append(Difference(f"{path}.length" if path else "length", len(a), len(b),
                                  _first(known, path) or _first(known, f"{path}.length")))
        for i, (x, y) in enumerate(zip(a, b)):
            _walk(x, y, f"{path}[{i}]", ignore, unordered, known, out)
        return
    if isinstance(a, (bytes, bytearray, memoryview)) and isinstance(b, (bytes, bytearray, memoryview)):
        a, b = bytes(a), bytes(b)
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    if a != b or type(a) is not type(b) and not numbers:
        out.append(Difference(path or "<root>", a, b, _first(known, path)))


def quote(answer: Any, rules: Mapping[str, str], values: Mapping[str, Any], path: str = "") -> Any:
    """``answer`` with the value at each path a rule matches (pattern -> variable name) replaced by
    ``"$name"`` where it equals ``values[name]``: values a side generated, compared by name."""
    if isinstance(answer, dict):
        return {k: quote(v, rules, values, f"{path}.{k}" if path else str(k)) for k, v in answer.items()}
    if isinstance(answer, list):
        return [quote(v, rules, values, f"{path}[{i}]") for i, v in enumerate(answer)]
    name = _first(rules, path) if path else None
    if name is not None and name in values and answer == values[name]:
        return f"${name}"
    return answer
