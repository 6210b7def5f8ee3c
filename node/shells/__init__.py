"""The I/O shells of the controller and group-coordinator cores: event thread, watches, timers (the controller's
senders are in node/net/channel.py)."""
