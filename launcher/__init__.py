"""The launcher: a cluster of real processes on this machine, started, inspected and stopped.

- ``cluster``: ``Cluster`` (``kafkasim cluster up|down|status``, a broker's signals and restarts,
  ``<run.dir>/cluster.json``), the cluster's view from ZooKeeper and the replicas' offsets from the brokers,
  the controller's preferred leader election;
- ``lab``: the docker-compose lab driven from the host (a loopback-only dockerd, ``docker-compose`` per
  project, the lab's containers, ``python3 -m launcher.lab image``).

Tests, benchmarks, chaos runs, the web view and the command line all start clusters through it.
"""
