"""kafkasim's public API: a local Kafka 2.8 (ZooKeeper mode) cluster of real processes for your test suite,
with faults aimed by role.

    from kafkasim import Cluster

    with Cluster.start(brokers=3) as kafka:
        kafka.create_topic("orders", partitions=6)
        consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "billing", ...})
        ...
        kafka.kill("coordinator:billing")      # SIGKILL the broker coordinating the group
        ...
        assert kafka.committed("billing")[("orders", 0)] >= 42

The pytest plugin (``kafkasim.pytest_plugin``, installed with the package) gives the ``kafkasim`` fixture.
Every public name is documented in docs/testing-your-app.md; the names exported here are stable.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkasim.cluster import CheckResult, Cluster, ConfigError, Fault, KafkasimError, Record

__all__ = ["CheckResult", "Cluster", "ConfigError", "Fault", "KafkasimError", "Record"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """The names are loaded on first use: the pytest plugin (kafkasim.pytest_plugin) is imported by every pytest
    run once the package is installed, and importing it must not import the cluster machinery."""
    if name in __all__:
        from kafkasim import cluster
        return getattr(cluster, name)
    raise AttributeError(f"module 'kafkasim' has no attribute {name!r}")
