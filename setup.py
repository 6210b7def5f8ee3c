"""The build's one hook: the generated wire types (proto/*_pb2.py, *_pb2_grpc.py) are not committed, so a build
of the package (``pip install .``, a wheel) generates them from proto/*.proto with scripts/gen_proto.py into what
it installs.  Everything else is in pyproject.toml.  A checkout used in place runs scripts/gen_proto.py itself
(scripts/setup.sh does)."""
from __future__ import annotations

import runpy
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithProto(build_py):
    def run(self) -> None:
        super().run()
        runpy.run_path(str(ROOT / "scripts" / "gen_proto.py"))["generate"](Path(self.build_lib).resolve())


setup(cmdclass={"build_py": BuildPyWithProto})
