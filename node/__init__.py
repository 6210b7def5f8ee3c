"""The broker side of kafkasim, in rooms:

- ``node/server/``: the broker process and its RPC (start-up, registration, the gRPC servicers, shutdown);
- ``node/replicas/``: replica management (the replica manager, fetchers, the Fetch handler, the purgatory,
  retention and the cleaner's schedule, idempotent producers' state);
- ``node/storage/``: one partition replica's log on disk;
- ``node/shells/``: the I/O shells of the controller and group-coordinator cores;
- ``node/tools/``: operator tools (the ``kafkasim`` CLI, the cluster launcher, topic administration, demos).

Shared by all of them: ``config`` and ``topic_config`` (cluster.yaml and topic configs), ``events`` and
``jsonlines`` (the event log), ``clock`` (the shells' wall clock).
"""
