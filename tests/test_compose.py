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


def compose_config(options: list[str] | None = None) -> dict[str, Any]:
    exe = shutil.which("docker-compose")
    assert exe, "docker-compose is missing: run scripts/setup.sh (apt-get install docker-compose)"
    proc = subprocess.run([exe, "-f", "docker-compose.yml", *(options or []), "config"], cwd=ROOT,
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

        # Kafka's listener: published on the host's loopback at the very port the broker advertises
        from node.config import load_config
        cfg = load_config(mounted_file(broker, CONFIG_IN_CONTAINER))
        b = cfg.broker(n)
        bind_host, bind_port = b.kafka_listener
        adv_host, adv_port = b.kafka_advertised
        assert bind_host == "0.0.0.0"            # reachable through the container's published port
        assert published_ports(broker) == {bind_port: ("127.0.0.1", adv_port)}
        assert (adv_host, adv_port) == ("127.0.0.1", bind_port)
    advertised = {load_config(mounted_file(services["broker1"], CONFIG_IN_CONTAINER)).broker(n).kafka_advertised
                  for n in (1, 2, 3)}
    assert len(advertised) == 3


def test_the_kcat_service_reaches_the_advertised_listeners() -> None:
    """A container client sees the advertised 127.0.0.1 ports only on the host's network."""
    kcat = compose_config(["--profile", "tools"])["services"]["kcat"]
    assert kcat["network_mode"] == "host" and kcat["entrypoint"] == ["kcat"]
    cmd = [str(a) for a in kcat["command"]]
    assert cmd[cmd.index("-b") + 1] == "127.0.0.1:29091"
