"""The project's import graph: no circles, no private names across modules, kazoo only in zk/.

The graph is built with ``ast`` over every top-level package (a directory with
an ``__init__.py``; ``proto/``'s generated code is left out).  Every import is
an edge, wherever it is: at the top, inside a function, or under
``TYPE_CHECKING`` (a lazy import still ties the two modules together).
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXCLUDED = {"proto", "tests"}
# bench/ measures kazoo's own recipes and client as the baselines kafkasim is compared with
KAZOO_BASELINES = {"bench.coordinator", "bench.kazoo_election_worker", "bench.scale_floor_worker"}


def project_modules(root: Path) -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for init in sorted(root.glob("*/__init__.py")):
        pkg = init.parent
        if pkg.name in EXCLUDED:
            continue
        for f in sorted(pkg.rglob("*.py")):
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = f
    return mods


class Imports:
    """Each module's imports (as dotted names) and its imported names, with line numbers."""

    def __init__(self, root: Path):
        self.mods = project_modules(root)
        self.trees = {m: ast.parse(f.read_text(), str(f)) for m, f in self.mods.items()}

    def owner(self, name: str) -> str | None:
        """The project module a dotted name is, or lives in."""
        while name:
            if name in self.mods:
                return name
            name = name.rpartition(".")[0]
        return None

    def _base(self, m: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        pkg = m if self.mods[m].name == "__init__.py" else m.rpartition(".")[0]
        parts = pkg.split(".")[:len(pkg.split(".")) - (node.level - 1)]
        return ".".join(parts + ([node.module] if node.module else []))

    def imports(self, m: str):
        """(imported dotted name, name imported from it or None, line) for every import of ``m``."""
        for node in ast.walk(self.trees[m]):
            if isinstance(node, ast.Import):
                for a in node.names:
                    yield a.name, None, node.lineno, a.asname
            elif isinstance(node, ast.ImportFrom):
                base = self._base(m, node)
                for a in node.names:
                    yield base, a.name, node.lineno, a.asname

    def edges(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {m: set() for m in self.mods}
        for m in self.mods:
            for base, name, _, _ in self.imports(m):
                t = self.owner(f"{base}.{name}" if name else base)
                if t and t != m:
                    out[m].add(t)
        return out

    def private_uses(self) -> list[str]:
        """``from x import _y`` and ``x._y`` where x is another project module."""
        found = []
        for m in self.mods:
            bound: dict[str, str] = {}   # local name -> the project module it is
            for base, name, line, asname in self.imports(m):
                full = f"{base}.{name}" if name else base
                if name and name.startswith("_") and not name.startswith("__") and self.owner(base) \
                        and self.owner(base) != m:
                    found.append(f"{m}:{line} imports {name} from {base}")
                if full in self.mods:
                    bound[asname or (name if name else full.split(".")[0])] = full
            for node in ast.walk(self.trees[m]):
                if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                    chain, v = [node.attr], node.value
                    while isinstance(v, ast.Attribute):
                        chain.append(v.attr)
                        v = v.value
                    if isinstance(v, ast.Name) and v.id in bound and bound[v.id] != m:
                        found.append(f"{m}:{node.lineno} uses {v.id}.{'.'.join(reversed(chain))}")
        return found

    def kazoo_users(self) -> list[str]:
        return sorted({f"{m}:{line}" for m in self.mods for base, _, line, _ in self.imports(m)
                       if (base == "kazoo" or base.startswith("kazoo.")) and not m.startswith("zk.")
                       and m not in KAZOO_BASELINES})


@functools.cache
def project() -> Imports:
    return Imports(ROOT)


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def describe(comp: list[str], edges: dict[str, set[str]]) -> str:
    return "; ".join(f"{m} -> {', '.join(sorted(edges[m] & set(comp)))}" for m in comp)


def test_no_import_circles() -> None:
    edges = project().edges()
    assert "node.server.broker" in edges and "controller.core" in edges   # the graph covers the project
    found = circles(edges)
    assert not found, "import circles:\n" + "\n".join(describe(c, edges) for c in found)


def test_no_private_names_imported_across_modules() -> None:
    found = project().private_uses()
    assert not found, "private names used across modules:\n" + "\n".join(found)


def test_only_zk_imports_kazoo() -> None:
    found = project().kazoo_users()
    assert not found, "kazoo imported outside zk/: " + ", ".join(found)


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import thing\n")
    (pkg / "b.py").write_text("def f():\n    from pkg import c\n    return c._hidden\n")
    (pkg / "c.py").write_text("import kazoo.client\nfrom . import a\nfrom .b import _secret\n_hidden = 1\n")
    imports = Imports(tmp_path)
    edges = imports.edges()
    assert circles(edges) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert sorted(imports.private_uses()) == ["pkg.b:3 uses c._hidden", "pkg.c:3 imports _secret from pkg.b"]
    assert imports.kazoo_users() == ["pkg.c:1"]
