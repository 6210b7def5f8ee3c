#!/usr/bin/env bash
# Set up (idempotent, fast when done already) and run the test suite: scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec python3 -m pytest -q "$@"
