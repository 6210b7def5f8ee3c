#!/usr/bin/env bash
# Set up (idempotent, fast when done already) and run the test suite: scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# the lab's image too, unless the run leaves out the cluster tier (where tests/test_lab.py is)
case " $* " in
    *"not cluster"*) bash scripts/setup.sh ;;
    *) bash scripts/setup.sh --lab ;;
esac
# kafkasim's bytecode, compiled once here (__pycache__/, git-ignored): the suite starts some 700 broker processes
# and hundreds of other Python ones, and where the environment says PYTHONDONTWRITEBYTECODE none of them would
# write it, each compiling kafkasim's modules again (a sixth of a chaos run's CPU time)
python3 -m compileall -q -j 0 $(for d in */__init__.py; do dirname "$d"; done) tests >/dev/null
# two workers (pytest-xdist) on the 2-core machines we test on; KAFKASIM_TEST_WORKERS=1 runs in one process.
# Each test module stays on one worker, and the tests sharing the Spark session and the chaos runs share one
# worker too (tests/conftest.py), so module and session fixtures start once.  The workers take the groups
# longest first, in the order tests/conftest.py sorts them (--no-loadscope-reorder keeps that order).
workers="${KAFKASIM_TEST_WORKERS:-2}"
if [ "$workers" -gt 1 ]; then
    exec python3 -m pytest -q -n "$workers" --dist loadgroup --no-loadscope-reorder "$@"
fi
exec python3 -m pytest -q "$@"
