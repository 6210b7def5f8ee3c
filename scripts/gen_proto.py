#!/usr/bin/env python3
"""Generate the Python wire types from proto/*.proto.

    python scripts/gen_proto.py            # write into proto/
    python scripts/gen_proto.py --out DIR  # write into DIR/proto/ (staleness test)

The generated modules import each other as ``proto.<name>_pb2`` because protoc
runs from the repository root with ``-I .``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def proto_files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "proto").glob("*.proto"))


def generate(out: Path) -> None:
    try:
        from grpc_tools import protoc
    except ImportError:  # pragma: no cover - set-up installs it
        sys.exit("grpcio-tools is missing: pip install grpcio-tools (scripts/setup.sh does)")
    (out / "proto").mkdir(parents=True, exist_ok=True)
    import os

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        args = ["protoc", "-I.", f"--python_out={out}", f"--pyi_out={out}",
                f"--grpc_python_out={out}", *proto_files()]
        if protoc.main(args) != 0:
            sys.exit("protoc failed: " + " ".join(args))
    finally:
        os.chdir(cwd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=ROOT)
    generate(ap.parse_args().out.resolve())


if __name__ == "__main__":
    main()
