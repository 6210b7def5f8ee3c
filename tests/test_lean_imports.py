"""util.lean_imports: a package's submodules import without its ``__init__``, which runs on the first name asked."""
from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from util.lean_imports import lean


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pkg = tmp_path / "leanpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import leanpkg.client\nfrom leanpkg.wire import CODE as ALIAS\nRAN = True\n")
    (pkg / "wire.py").write_text("CODE = 7\n")
    (pkg / "client.py").write_text("CLIENT = 'big'\n")
    (tmp_path / "leanmod.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "leanpkg"
    for name in [m for m in sys.modules if m == "leanpkg" or m.startswith("leanpkg.")]:
        del sys.modules[name]


def test_a_submodule_imports_without_the_packages_init(package: str) -> None:
    lean(package)
    import leanpkg.wire
    from leanpkg import wire   # a submodule asked as a name of the package: that module alone
    assert leanpkg.wire.CODE == 7 and wire is leanpkg.wire
    assert "leanpkg.client" not in sys.modules
    assert "RAN" not in vars(sys.modules[package])


def test_the_init_runs_once_a_name_it_defines_is_asked_for(package: str) -> None:
    lean(package)
    import leanpkg.wire
    import leanpkg
    assert leanpkg.ALIAS == 7
    assert leanpkg.RAN is True and "leanpkg.client" in sys.modules
    with pytest.raises(AttributeError):
        leanpkg.MISSING   # noqa: B018  (after the init ran, a missing name is missing)


def test_an_imported_package_is_left_alone_and_a_module_is_refused(package: str) -> None:
    import leanpkg
    lean(package)
    assert sys.modules[package] is leanpkg and leanpkg.RAN is True
    with pytest.raises(ImportError, match="'leanmod' is not an installed package"):
        lean("leanmod")
    with pytest.raises(ImportError, match="'no_such_package_here' is not an installed package"):
        lean("no_such_package_here")


def test_threads_asking_at_once_run_the_init_once(package: str, tmp_path: Path) -> None:
    (tmp_path / "leangate.py").write_text("import threading\nENTERED = threading.Event()\nGO = threading.Event()\n")
    (tmp_path / "leanpkg" / "__init__.py").write_text(
        "import leangate\nleangate.ENTERED.set()\nleangate.GO.wait(10)\n"
        "RUNS = globals().get('RUNS', 0) + 1\nNAME = 'x'\n")
    lean(package)
    import leangate
    import leanpkg.wire
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(leanpkg.NAME)) for _ in range(4)]
    threads[0].start()
    assert leangate.ENTERED.wait(10)          # the first thread is inside the __init__ ...
    for t in threads[1:]:
        t.start()                             # ... while the others ask
    leangate.GO.set()
    for t in threads:
        t.join(10)
    assert got == ["x"] * 4 and leanpkg.RUNS == 1
