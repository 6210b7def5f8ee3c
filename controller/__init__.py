"""The controller's decisions, as a sans-IO core (no ZooKeeper, gRPC, threads or clocks).

node/shells/controller_shell.py feeds it facts read from ZooKeeper and carries out
the writes and requests it returns.
"""
