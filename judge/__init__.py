"""Judging a run from what it recorded: the history of client operations and faults, and the brokers' event logs.

- ``history``, ``edn``: the history (JSON lines, Jepsen's model), its reader and writer, its EDN export;
- ``registry``: the checkers, named once (kinds, description, Python function), read by chaos runs, the
  simulator and the Spark analysis;
- ``checkers``, ``check_model``, ``checks_*``: the checkers, pure functions of (history, events) -> anomalies
  with evidence, and the verdict;
- ``timeline``: the per-fault, per-group failover stages, and the coordinator moves no fault explains.

Used by chaos/ (a run on real processes), sim/ (a simulated run) and analysis/ (many runs in Spark).
"""
