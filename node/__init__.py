"""kafkasim broker-node process: configuration, CLI and runtime."""
