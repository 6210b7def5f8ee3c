"""A broker process's entry (``python -m node``, ``kafkasim broker``): its imports made cheap, then the broker.

Start-up imports about 600 modules, and the suite and the labs start brokers by the hundred:
- kafka-python's and aiokafka's packages are registered lean (:mod:`util.lean_imports`): the broker reads
  their protocol, error and record modules, never their clients;
- the cyclic garbage collector is off while the modules load (it ran about 140 times, a tenth of the
  import's CPU), and what they made goes to its permanent generation, as the broker's own start does;
- the interpreter's switch interval is :data:`SWITCH_INTERVAL_S` for the process's whole life: a thread
  waiting for the GIL (kazoo's reader with a ZooKeeper answer, a gRPC completion, a fetch's wake-up) asks
  the holder to drop it after that long, not CPython's default 5 ms.
"""
from __future__ import annotations

import gc
import sys

from util.lean_imports import lean

__all__ = ["SWITCH_INTERVAL_S", "broker_main"]

SWITCH_INTERVAL_S = 0.001


def broker_main(argv: list[str] | None = None) -> int:
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    gc.disable()
    try:
        lean("kafka", "aiokafka")
        from node.server.broker import main
        gc.freeze()
    finally:
        gc.enable()
    return main(argv)
