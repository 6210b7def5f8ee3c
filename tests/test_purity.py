"""The sans-IO cores stay pure: one ban list, checked over every core module.

A core is plain synchronous code (request + now_ms in, response + records or
commands out), so a deterministic simulator can run it.  Each core module is
read with ``ast`` (never imported) and must not

* import a banned module, in any form: ``import x``, ``import x.y as z``,
  ``from x import y``, at module level or inside a function;
* import a project module that is not itself a core (that would let I/O in
  through the back door);
* use the name ``open`` (calling it, or passing it around).

The core modules are the packages listed in CORE_PACKAGES that exist in this
tree (every ``*.py`` in them), the single modules in CORE_MODULES, and every
module docs/architecture.md's layout table marks as doing no I/O.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# the one ban list: I/O, threads, clocks, randomness, processes and the wire formats' runtimes
BANNED = frozenset({
    "grpc", "kazoo", "threading", "asyncio", "time", "random", "socket", "os", "subprocess",
    "google.protobuf",  # protobuf's runtime
    "proto",            # the project's generated *_pb2 modules (they load protobuf)
    "uuid",             # uuid1/uuid4 read the clock or the OS's randomness
})
BANNED_NAMES = frozenset({"open"})

CORE_PACKAGES = ("kafkacommon", "replication", "controller", "coordinator", "transactions")
CORE_MODULES = ("zk/codecs.py", "zk/paths.py", "zk/exceptions.py",
                "sim/zk_model.py", "sim/zk_ops.py", "sim/zk_watchers.py", "sim/javahash.py", "sim/disk.py")

# the wire types scripts/gen_proto.py generates from proto/*.proto: modules, whether or not this checkout has
# generated them yet
GENERATED = frozenset(f"proto.{p.stem}{kind}" for p in (ROOT / "proto").glob("*.proto") for kind in ("_pb2", "_pb2_grpc"))

# the project's top-level packages (every folder with an __init__.py): an import of one must name a core module
PROJECT_PACKAGES = frozenset(p.parent.name for p in ROOT.glob("*/__init__.py"))


def pure_modules_in_architecture_doc() -> set[str]:
    """The modules docs/architecture.md's layout table marks with I/O "no"."""
    found: set[str] = set()
    for line in (ROOT / "docs" / "architecture.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) < 4 or cells[-2] != "no":
            continue
        names = re.findall(r"`([^`]+)`", cells[1])
        folder = names[0].rsplit("/", 1)[0] if names and "/" in names[0] else ""
        for name in names:
            path = name if "/" in name else f"{folder}/{name}"
            found |= {str(p.relative_to(ROOT)) for p in ROOT.glob(path) if p.suffix == ".py"}
    return found


def core_modules() -> list[str]:
    paths = {str(p.relative_to(ROOT)) for pkg in CORE_PACKAGES if (ROOT / pkg).is_dir()
             for p in (ROOT / pkg).glob("*.py")}
    paths |= {m for m in CORE_MODULES if (ROOT / m).exists()}
    return sorted(paths | pure_modules_in_architecture_doc())


def module_of(path: str) -> str:
    return path[:-3].replace("/", ".").removesuffix(".__init__")


def imported_modules(tree: ast.AST, package: str) -> list[str]:
    """Every module the tree imports, absolute; ``from pkg import name`` counts as ``pkg.name``
    when that is one of the project's modules, else as ``pkg``; relative imports are resolved
    against ``package``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                path = ROOT / sub.replace(".", "/")
                found.append(sub if path.with_suffix(".py").exists() or path.is_dir() or sub in GENERATED else base)
    return found


def violations(source: str, path: str, cores: set[str]) -> list[str]:
    """What makes ``source`` (the module at ``path``) impure, given the set of core module paths."""
    tree = ast.parse(source)
    module = module_of(path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    core_names = {module_of(c) for c in cores}
    out = []
    for mod in imported_modules(tree, package):
        if any(mod == b or mod.startswith(b + ".") for b in BANNED):
            out.append(f"imports {mod}")
        elif mod.split(".")[0] in PROJECT_PACKAGES and mod not in core_names:
            out.append(f"imports {mod}, which is not a core module")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in BANNED_NAMES:
            out.append(f"line {node.lineno}: uses {node.id}")
    return sorted(set(out))


CORES = core_modules()


def test_the_scanner_sees_every_form_of_import_and_open():
    cores = {"controller/core.py", "kafkacommon/errors.py", "kafkacommon/__init__.py"}
    src = ("import time\nfrom kazoo.client import KazooClient\nimport grpc.aio as g\nimport os.path\n"
           "from google.protobuf import json_format\nfrom proto import kafkasim_pb2\n"
           "def f():\n    from random import choice\n    import threading as t\n    return open('x')\n"
           "from util import waiting\nfrom kafkacommon import errors\nfrom controller.core import Plan\n"
           "import timeit, json\nreader = open\n")
    assert violations(src, "controller/x.py", cores) == sorted([
        "imports time", "imports kazoo.client", "imports grpc.aio", "imports os.path", "imports google.protobuf",
        "imports proto.kafkasim_pb2", "imports random", "imports threading",
        "imports util.waiting, which is not a core module", "line 10: uses open", "line 15: uses open",
    ])
    # a relative import resolves against the module's own package
    assert violations("from .storage import log\nfrom . import errors\n", "kafkacommon/x.py", cores) == [
        "imports kafkacommon.storage, which is not a core module"]


def test_the_core_list_covers_the_packages_and_the_documented_pure_modules():
    assert {"kafkacommon/record_batch.py", "controller/core.py", "coordinator/core.py", "zk/codecs.py",
            "replication/broker_state.py"} <= set(CORES)
    assert pure_modules_in_architecture_doc() <= set(CORES)


@pytest.mark.parametrize("path", CORES)
def test_core_module_is_pure(path):
    assert violations((ROOT / path).read_text(), path, set(CORES)) == []


def test_kafkacommon_imports_nothing_else_from_the_project():
    for path in sorted((ROOT / "kafkacommon").glob("*.py")):
        rel = str(path.relative_to(ROOT))
        others = [m for m in imported_modules(ast.parse(path.read_text()), "kafkacommon")
                  if m.split(".")[0] in PROJECT_PACKAGES - {"kafkacommon"}]
        assert others == [], f"{rel} imports {others}"
