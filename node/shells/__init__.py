"""The I/O shells of the controller and group-coordinator cores: event thread, watches, timers, senders."""
