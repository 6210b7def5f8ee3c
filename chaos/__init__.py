"""Chaos runs on real processes: scenarios, the fault schedule and the nemesis, the fault proxy, the workloads
that record the history; judge/ says what the history and the event logs tell."""
