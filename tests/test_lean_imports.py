"""util.lean_imports: a package's submodules import without its ``__init__``, which runs on the first name asked."""
from __future__ import annotations

import sys
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
