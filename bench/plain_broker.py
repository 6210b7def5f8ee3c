"""bench/broker_start.py's baseline: a broker started as it was before node/boot.py (a plain import of the broker,
the collector on, kafka-python's and aiokafka's whole packages).  Used as a launcher prefix, so its argv is
``bench/plain_broker.py PYTHON -m node --id N ...``."""
import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)   # the repository, not bench/ (its coordinator.py)

from node.server.broker import main  # noqa: E402

if sys.argv[2:4] != ["-m", "node"]:
    raise SystemExit(f"usage: {sys.argv[0]} PYTHON -m node ARGS (got {sys.argv[1:4]})")
sys.exit(main(sys.argv[4:]))
