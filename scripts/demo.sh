#!/usr/bin/env bash
# The main job: set up (idempotent), then a cluster on an embedded local ZooKeeper,
# controller failovers (SIGTERM, then SIGKILL) and a report: scripts/demo.sh [demo args]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec python3 -m cli.main demo "$@"
