"""The ``kafkasim`` command line, the top floor: it imports what it drives and nothing imports it.

- ``main``: the ``kafkasim`` command (the entry point ``cli.main:main``), the cluster, broker, controller,
  zk and topics commands, and the subcommands of chaos/, sim/, analysis/ and ui/;
- ``common``: what the command modules share (the cluster a command acts on, the error guard);
- ``data``, ``groups``: produce, consume, leader election; consumer-groups and console-consumer;
- ``demo``, ``controller_demo``: ``kafkasim demo`` (a coordinator failover) and ``kafkasim demo --controller``.
"""
