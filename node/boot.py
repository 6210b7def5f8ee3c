"""A broker process's entry (``python -m node``, ``kafkasim broker``): its imports made cheap, then the broker.

Start-up imports about 600 modules, and the suite and the labs start brokers by the hundred:
- kafka-python's and aiokafka's packages are registered lean (:mod:`util.lean_imports`): the broker reads
  their protocol, error and record modules, never their clients;
- the cyclic garbage collector is off while the modules load (it ran about 140 times, a tenth of the
  import's CPU), and what they made goes to its permanent generation, as the broker's own start does.
"""
from __future__ import annotations

import gc

from util.lean_imports import lean

__all__ = ["broker_main"]


def broker_main(argv: list[str] | None = None) -> int:
    gc.disable()
    try:
        lean("kafka", "aiokafka")
        from node.server.broker import main
        gc.freeze()
    finally:
        gc.enable()
    return main(argv)
