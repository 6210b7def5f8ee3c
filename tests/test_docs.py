"""Generated artefacts stay in step with their sources."""
from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

import pytest

from node.config import describe_schema

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.cluster  # runs protoc in a subprocess
def test_generated_wire_types_are_current(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_proto.py"), "--out", str(tmp_path)], check=True)
    generated = sorted(p.name for p in (tmp_path / "proto").glob("*_pb2*.py*"))
    assert generated, "protoc generated nothing"
    for name in generated:
        assert (ROOT / "proto" / name).exists(), f"proto/{name} is missing: run scripts/gen_proto.py"
        assert filecmp.cmp(tmp_path / "proto" / name, ROOT / "proto" / name, shallow=False), \
            f"proto/{name} is stale: run scripts/gen_proto.py"


def test_config_reference_is_current():
    doc = (ROOT / "docs" / "config.md").read_text()
    assert describe_schema() in doc, "docs/config.md is stale: regenerate it from node.config.describe_schema()"


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in readme and "scripts/test.sh" in ci
    assert "bash scripts/demo.sh" in readme


def test_every_event_the_code_emits_is_documented():
    """docs/events.md is the schema chaos checkers and the pipeline read: no event goes undocumented."""
    import re
    pattern = re.compile(r'(?:\.emit|_event|_ev)\("([a-z_]+)"|(?:events|observed)\.append\(\("([a-z_]+)", \{')
    names = set()
    for package in ("node", "controller", "coordinator", "zk"):
        for path in (ROOT / package).rglob("*.py"):
            for m in pattern.finditer(path.read_text()):
                names.add(m.group(1) or m.group(2))
    assert len(names) > 60, sorted(names)
    doc = (ROOT / "docs" / "events.md").read_text()
    missing = sorted(n for n in names if f"`{n}`" not in doc)
    assert missing == [], f"events missing from docs/events.md: {missing}"
