"""What every ``kafkasim`` command module shares: the cluster a command acts on, and the error guard.

Kept apart from ``cli.main`` so the command modules (``cli.data``, ``cli.groups``, the demos) need not
import the command line that imports them.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from node.config import STATE_FILE, load_config


def open_cluster(args: argparse.Namespace):
    """The ``Cluster`` of ``args.config``; with ``args.brokers``, that many brokers (the effective config is
    written to the run directory); without, the effective config a previous ``cluster up --brokers N`` wrote."""
    from launcher.cluster import Cluster

    cfg = load_config(args.config)
    path = Path(args.config)
    if getattr(args, "brokers", None):
        cfg = cfg.with_settings({"offsets.topic.replication.factor":
                                 min(cfg.get("offsets.topic.replication.factor"), args.brokers)})
        cfg = cfg.with_brokers(args.brokers)
        cfg.run_dir.mkdir(parents=True, exist_ok=True)
        path = cfg.run_dir / "cluster.effective.yaml"
        path.write_text(cfg.to_yaml())
    else:
        # a previous `cluster up --brokers N` wrote the effective config; keep using it
        try:
            recorded = Path(json.loads((cfg.run_dir / STATE_FILE).read_text())["config"])
            if recorded.exists():
                cfg, path = load_config(recorded), recorded
        except (OSError, ValueError, KeyError):
            pass
    return Cluster(cfg, path)


def guard(fn, args: argparse.Namespace) -> int:
    """``fn(args)``, a client error or a bad value printed as ``error: ...`` with exit status 1."""
    from client.metadata import ClientError

    try:
        return fn(args)
    except (ClientError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
