"""A Spark standalone cluster on loopback for the tests: a master and workers as real JVM processes, started from
PySpark's own distribution (``spark-class``), stopped when the block ends (tests/test_analysis_cluster.py,
tests/test_sim_spark.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from urllib.request import urlopen

import pyspark

from util.waiting import wait_for
from zk.server import free_port

SPARK_HOME = Path(pyspark.__file__).resolve().parent


@contextmanager
def standalone(base: Path, workers: int = 1, cores: int = 2, memory: str = "2g") -> Iterator[dict]:
    """A master and ``workers`` workers (``cores`` cores, ``memory`` each) on 127.0.0.1: its ``url``, the
    master's ``state()`` (its JSON status page) and the ``env`` to submit with."""
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(base),
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    port, ui = free_port(), free_port()
    started: list[tuple[subprocess.Popen, Path]] = []

    def start(name: str, *args: str) -> None:
        log = base / f"{name}.log"
        with log.open("wb") as out:
            p = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=out,
                                 stderr=subprocess.STDOUT, env=env, start_new_session=True)
        started.append((p, log))

    def state() -> dict:
        with urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as r:
            return json.loads(r.read())

    def up() -> bool:
        for p, log in started:
            if p.poll() is not None:
                raise AssertionError(f"{log.name} exited {p.returncode}: {log.read_text()[-2000:]}")
        return state()["aliveworkers"] == workers

    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
              "--webui-port", str(ui))
        for i in range(workers):
            start(f"worker-{i + 1}", "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                  "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                  "--work-dir", str(base / f"work-{i + 1}"), "--webui-port", "0")
        wait_for(up, 120, f"the {workers} standalone worker(s) to register with their master", interval=0.5)
        yield {"url": f"spark://127.0.0.1:{port}", "state": state, "env": env}
    finally:
        for p, _log in reversed(started):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
