#!/usr/bin/env bash
# Set up (idempotent, fast when done already) and run the test suite: scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# the lab's image too, unless the run leaves out the cluster tier (where tests/test_lab.py is)
case " $* " in
    *"not cluster"*) bash scripts/setup.sh ;;
    *) bash scripts/setup.sh --lab ;;
esac
exec python3 -m pytest -q "$@"
