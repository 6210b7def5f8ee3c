"""What `pip install .` ships (the lab's image and a user's venv install the package, not the checkout)."""
from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOT_SHIPPED = {"bench", "tests"}   # run from a checkout only


def test_every_top_level_package_is_shipped():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    include = conf["packages"]["find"]["include"]
    packages = sorted(d.name for d in ROOT.iterdir() if (d / "__init__.py").is_file() and d.name not in NOT_SHIPPED)
    missing = [p for p in packages if not any(fnmatch.fnmatch(p, pat) for pat in include)]
    assert not missing, f"pyproject.toml's [tool.setuptools.packages.find] include lacks {missing}"


def test_every_non_python_file_a_package_reads_is_package_data():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    data = conf["package-data"]
    for package in ("reference", "ui"):
        shipped = {f for pat in data[package] for f in (ROOT / package).glob(pat)}
        on_disk = {f for f in (ROOT / package).rglob("*") if f.is_file() and f.suffix not in (".py", ".pyc")
                   and "__pycache__" not in f.parts}
        assert on_disk <= shipped, f"{package}: not in package-data: {sorted(map(str, on_disk - shipped))}"
