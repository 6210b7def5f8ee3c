"""The house's floors: docs/architecture.md's table of which package may import which, held against the code.

Every Python file of every top-level folder (the packages, and bench/, tests/ and scripts/; proto/'s
generated modules left out) is read with ``ast``, never imported.  Every import counts, wherever it
stands: at the top, inside a function, under ``TYPE_CHECKING``, or as a literal name handed to
``importlib.import_module`` / ``__import__``.  An import of another top-level folder is an arrow
between the two.  The test fails

* when an arrow is not in the table (a package imports one it may not);
* when the table lets a package import one on its own floor or above (so no package cycle can be allowed,
  and none can be written);
* when the packages import each other in a circle (said package by package, with the modules that tie it);
* when the table and the tree disagree on which packages there are.
"""
from __future__ import annotations

import ast
import functools
import re
from collections import defaultdict
from pathlib import Path

from test_imports import circles

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
HEADING = "## Floors"
GENERATED = re.compile(r"_pb2(_grpc)?\.pyi?$")


def packages(root: Path) -> list[str]:
    """Every top-level folder that holds Python (bench/, tests/ and scripts/ too)."""
    return sorted(d.name for d in root.iterdir()
                  if d.is_dir() and not d.name.startswith(".") and any(_sources(d)))


def _sources(folder: Path):
    return (f for f in sorted(folder.rglob("*.py")) if not GENERATED.search(f.name) and "node_modules" not in f.parts)


def imported_names(tree: ast.AST, package: str) -> list[tuple[str, int]]:
    """(dotted name, line) of every import in the tree; relative imports resolve into ``package``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((package if node.level else node.module or "", node.lineno))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in ("import_module", "__import__"):
                found.append((node.args[0].value, node.lineno))
    return found


def arrows(root: Path) -> dict[tuple[str, str], list[str]]:
    """(package, package it imports) -> the places, ``file:line``."""
    pkgs = set(packages(root))
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for pkg in sorted(pkgs):
        for f in _sources(root / pkg):
            rel = f.relative_to(root)
            for name, line in imported_names(ast.parse(f.read_text(), str(rel)), pkg):
                target = name.split(".")[0]
                if target in pkgs and target != pkg:
                    out[(pkg, target)].append(f"{rel}:{line}")
    return out


@functools.cache
def house() -> dict[tuple[str, str], list[str]]:
    """This tree's arrows, read once for the tests below."""
    return arrows(ROOT)


def floors_table(text: str) -> dict[str, tuple[int, set[str]]]:
    """The table under ``## Floors``: package -> (floor, the packages it may import)."""
    section = text.split("\n" + HEADING, 1)[1].split("\n## ", 1)[0]
    table: dict[str, tuple[int, set[str]]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        names = re.findall(r"`([\w]+)/?`", cells[1])
        assert len(names) == 1, f"docs/architecture.md, {HEADING}: one package per row: {line}"
        assert names[0] not in table, f"docs/architecture.md, {HEADING}: {names[0]} has two rows"
        table[names[0]] = (int(cells[0]), set(re.findall(r"`([\w]+)/?`", cells[2])))
    return table


def problems(table: dict[str, tuple[int, set[str]]], found: dict[tuple[str, str], list[str]],
             pkgs: list[str]) -> list[str]:
    out = []
    for p in sorted(set(pkgs) - set(table)):
        out.append(f"{p}/ has no row in docs/architecture.md's {HEADING} table: add one (its floor, what it may import)")
    for p in sorted(set(table) - set(pkgs)):
        out.append(f"docs/architecture.md's {HEADING} table has a row for {p}/, which the tree does not have")
    for p, (floor, allowed) in sorted(table.items()):
        for q in sorted(allowed):
            if q not in table:
                out.append(f"{p}/ may import {q}/, which the table does not have")
            elif table[q][0] >= floor:
                out.append(f"{p}/ (floor {floor}) may import {q}/ on floor {table[q][0]}: a package imports only "
                           f"packages on floors below its own")
    for (p, q), where in sorted(found.items()):
        if p in table and q not in table[p][1]:
            out.append(f"{p}/ imports {q}/, which the table does not allow: {', '.join(where[:5])}"
                       + (f" (+{len(where) - 5} more)" if len(where) > 5 else ""))
    return out


def test_every_import_is_allowed_by_the_floors_table() -> None:
    table = floors_table(DOC.read_text())
    found = house()
    assert {"kafkacommon", "node", "cli", "tests"} <= set(table) and ("node", "zk") in found  # it reads the house
    bad = problems(table, found, packages(ROOT))
    assert not bad, "\n".join(bad)


def test_no_package_cycles() -> None:
    found = house()
    edges: dict[str, set[str]] = defaultdict(set)
    for p, q in found:
        edges[p].add(q)
        edges.setdefault(q, set())
    cycles = circles(dict(edges))
    assert not cycles, "package cycles:\n" + "\n".join(
        "; ".join(f"{p} -> {q} ({', '.join(found[(p, q)][:3])})" for p in c for q in sorted(edges[p] & set(c)))
        for c in cycles)


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    for name, body in {"low/__init__.py": "", "low/a.py": "def f():\n    from high import b\n",
                       "high/__init__.py": "", "high/b.py": "import importlib\nimportlib.import_module('low.a')\n",
                       "top/x.py": "from low import a\nfrom . import y\n", "apart/z.py": "import json\n"}.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(body)
    found = arrows(tmp_path)
    assert dict(found) == {("low", "high"): ["low/a.py:2"], ("high", "low"): ["high/b.py:2"], ("top", "low"): ["top/x.py:1"]}
    doc = ("# A\n## Floors\n| floor | package | may import |\n|---|---|---|\n| 1 | `low/` | — |\n"
           "| 2 | `high/` | `low` |\n| 2 | `top/` | `low`, `high` |\n| 3 | `gone/` | `low` |\n## Next\n| 9 | `x/` | |\n")
    table = floors_table(doc)
    assert table == {"low": (1, set()), "high": (2, {"low"}), "top": (2, {"low", "high"}), "gone": (3, {"low"})}
    assert problems(table, found, packages(tmp_path)) == [
        "apart/ has no row in docs/architecture.md's ## Floors table: add one (its floor, what it may import)",
        "docs/architecture.md's ## Floors table has a row for gone/, which the tree does not have",
        "top/ (floor 2) may import high/ on floor 2: a package imports only packages on floors below its own",
        "low/ imports high/, which the table does not allow: low/a.py:2",
    ]
