"""docker-compose.yml is valid (checked by Debian's docker-compose client; no engine needed)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.cluster  # a `docker compose config` subprocess

ROOT = Path(__file__).resolve().parent.parent
CONFIG_IN_CONTAINER = "/etc/kafkasim/cluster.yaml"


def compose_config(options: list[str] | None = None, file: str = "docker-compose.yml") -> dict[str, Any]:
    exe = shutil.which("docker-compose")
    assert exe, "docker-compose is missing: run scripts/setup.sh (apt-get install docker-compose)"
    proc = subprocess.run([exe, "-f", file, *(options or []), "config"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return yaml.safe_load(proc.stdout)


def mounted_file(service: dict[str, Any], target: str) -> Path:
    for vol in service.get("volumes", []):
        if isinstance(vol, str):
            source, dest, *_ = vol.split(":")
        else:
            source, dest = vol["source"], vol["target"]
        if dest == target:
            return (ROOT / source).resolve()
    raise AssertionError(f"{target} is not mounted")


def published_ports(service: dict[str, Any]) -> dict[int, tuple[str, int]]:
    """container port -> (host ip, host port), from `docker-compose config`'s short or long syntax."""
    out = {}
    for p in service.get("ports", []):
        if isinstance(p, str):
            ip, host, target = p.split("/")[0].split(":")
            out[int(target)] = (ip, int(host))
        else:
            out[int(p["target"])] = (p.get("host_ip", ""), int(p["published"]))
    return out


def test_compose_file_defines_the_lab() -> None:
    services = compose_config()["services"]
    assert {"zookeeper", "broker1", "broker2", "broker3"} <= set(services)

    zk = services["zookeeper"]
    zk_cmd = [str(a) for a in zk["command"]]
    assert zk_cmd[:3] == ["python", "-m", "zk.server"]
    assert zk_cmd[zk_cmd.index("--host") + 1] == "0.0.0.0"
    assert zk_cmd[zk_cmd.index("--port") + 1] == "2181"
    assert "srvr" in " ".join(zk["healthcheck"]["test"])

    for n in (1, 2, 3):
        broker = services[f"broker{n}"]
        cmd = [str(a) for a in broker["command"]]
        assert cmd[:2] == ["kafkasim", "broker"]
        assert cmd[cmd.index("--id") + 1] == str(n)
        assert cmd[cmd.index("--config") + 1] == CONFIG_IN_CONTAINER
        assert broker["hostname"] == f"broker{n}"
        assert broker["depends_on"]["zookeeper"]["condition"] == "service_healthy"
        test = [str(a) for a in broker["healthcheck"]["test"]]
        assert "broker-health" in test and f"broker{n}" in test

        config = yaml.safe_load(mounted_file(broker, CONFIG_IN_CONTAINER).read_text())
        assert config["offsets.topic.replication.factor"] == 3
        assert config["zookeeper.connect"].startswith("zookeeper:2181")
        brokers = config["brokers"]
        assert sorted(b["id"] for b in brokers) == [1, 2, 3]
        assert {b["host"] for b in brokers} == {"broker1", "broker2", "broker3"}

        # two Kafka listeners: EXTERNAL published on the host's loopback at the very port it advertises,
        # INTERNAL advertised under the service's name (which resolves on the lab's network)
        from node.config import load_config
        cfg = load_config(mounted_file(broker, CONFIG_IN_CONTAINER))
        b = cfg.broker(n)
        binds = {name: (host, port) for name, host, port in b.kafka_listeners}
        assert set(binds) == {"INTERNAL", "EXTERNAL"}
        assert all(host == "0.0.0.0" for host, _ in binds.values())
        ext_port = binds["EXTERNAL"][1]
        assert published_ports(broker) == {ext_port: ("127.0.0.1", ext_port)}
        assert b.advertised_on("EXTERNAL") == ("127.0.0.1", ext_port)
        assert b.advertised_on("INTERNAL") == (broker["hostname"], binds["INTERNAL"][1])
    advertised = {load_config(mounted_file(services["broker1"], CONFIG_IN_CONTAINER)).broker(n).advertised_on(name)
                  for n in (1, 2, 3) for name in ("INTERNAL", "EXTERNAL")}
    assert len(advertised) == 6


def test_the_kcat_service_bootstraps_from_an_internal_listener() -> None:
    """A container on the lab's network dials the INTERNAL listener and is told the INTERNAL addresses."""
    from node.config import load_config
    services = compose_config(["--profile", "tools"])["services"]
    kcat = services["kcat"]
    assert "network_mode" not in kcat and kcat["entrypoint"] == ["kcat"]
    cmd = [str(a) for a in kcat["command"]]
    cfg = load_config(mounted_file(services["broker1"], CONFIG_IN_CONTAINER))
    assert cmd[cmd.index("-b") + 1] == "%s:%d" % cfg.broker(1).advertised_on("INTERNAL")


def test_the_host_network_file_runs_the_same_lab_on_the_hosts_network() -> None:
    default = compose_config()["services"]
    services = compose_config(file="docker-compose.hostnet.yml")["services"]
    for name in ("zookeeper", "broker1", "broker2", "broker3"):
        s = services[name]
        assert s["network_mode"] == "host" and "hostname" not in s and "ports" not in s, name
        assert s["image"] == default[name]["image"] and s.get("depends_on") == default[name].get("depends_on"), name
        if name != "zookeeper":
            assert s["command"] == default[name]["command"], name
    from node.config import load_config
    cfg = load_config(mounted_file(services["broker1"], CONFIG_IN_CONTAINER))
    assert {b.host for b in cfg.brokers} == {"127.0.0.1"}
    assert cfg.get("zookeeper.connect").startswith("127.0.0.1:2181")
