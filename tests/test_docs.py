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
    # Event: kafkacommon.event, the cores' events; .event: a coordinator Result's (with the result first in helpers)
    pattern = re.compile(r'(?:\.emit|\.event|_event|_ev|Event)\((?:\w+, )?"([a-z_]+)"')
    names = set()
    for package in ("node", "controller", "coordinator", "transactions", "replication", "zk", "listener", "launcher",
                    "ui"):
        for path in (ROOT / package).rglob("*.py"):
            for m in pattern.finditer(path.read_text()):
                names.add(m.group(1))
    assert len(names) > 60, sorted(names)
    doc = (ROOT / "docs" / "events.md").read_text()
    missing = sorted(n for n in names if f"`{n}`" not in doc)
    assert missing == [], f"events missing from docs/events.md: {missing}"


def test_every_kafkasim_key_is_a_documented_deviation():
    """docs/deviations.md names every kafkasim-only `kafkasim.*` key: each one is a knowing difference from Kafka."""
    from node.config import BROKER_SCHEMA, SCHEMA
    keys = sorted(k for schema in (SCHEMA, BROKER_SCHEMA) for k in schema if k.startswith("kafkasim."))
    assert keys, "no kafkasim.* key in the schema"
    doc = (ROOT / "docs" / "deviations.md").read_text()
    import re
    missing = [k for k in keys if not re.search(rf"`{re.escape(k)}[`:]", doc)]  # `key` or `key: value`
    assert missing == [], f"kafkasim keys missing from docs/deviations.md: {missing}"
    sections = doc.split("\n## ")[1:]
    assert len(sections) >= len(keys) and all(len(s.strip().splitlines()) > 1 for s in sections), \
        "every deviation is a `## ` section with its reason"
