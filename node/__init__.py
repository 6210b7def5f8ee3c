"""The broker, and nothing else, in rooms:

- ``node/server/``: the broker process and its RPC (start-up, registration, the gRPC servicers, shutdown);
- ``node/net/``: how a broker reaches the others (its gRPC channels, the controller's senders, the link map,
  the gRPC messages to and from the cores' types);
- ``node/replicas/``: replica management (the replica manager, fetchers, the Fetch handler, the purgatory,
  retention and the cleaner's schedule, idempotent producers' state);
- ``node/storage/``: one partition replica's log on disk;
- ``node/shells/``: the I/O shells of the controller and group-coordinator cores.

The process's entry: ``boot`` (``python -m node``).  Shared by all of them: ``config`` (cluster.yaml),
``listeners`` (Kafka's listener lists), ``events`` (the event log), ``clock`` (the shells' wall clock).
Nothing here imports the launcher, the command line, chaos, the simulator, the analysis or the web view
(docs/architecture.md, "Floors").
"""
