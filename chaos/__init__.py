"""Chaos runs: the history of client operations and faults, and what it tells about failover."""
