"""Kafka 2.8's replication rules as sans-IO cores: one partition's state (HW, ISR, acks=all), where a
diverging follower truncates, produce checks, incremental fetch sessions (KIP-227), and a broker's
metadata cache fed by the controller's requests, with their fencing (``broker_state``).

Plain synchronous code: facts and ``now_ms`` in, decisions out.  No grpc, kazoo, threading,
asyncio, time, random, socket, os, subprocess or protobuf here, and no file I/O; the broker's
shells (node/replicas/replica_manager.py, node/replicas/fetcher.py, node/replicas/leader_fetch.py, node/replicas/purgatory.py) move the
bytes, hold the locks and call these.
"""
