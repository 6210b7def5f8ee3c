#!/usr/bin/env bash
# One-stop, idempotent set-up on a fresh Debian (bookworm) machine:
#   - Java 17 + ZooKeeper 3.8 from Debian's `zookeeper` package (real ZooKeeper servers)
#   - Debian's Docker engine (`docker.io`), `docker-compose` and `debootstrap`: the docker-compose lab's tests
#     (tests/test_lab.py) run the lab for real
#   - iproute2 and iptables (chaos runs' root-only `network: netns` mode and its tests)
#   - Debian's chromium (the web view's browser tests drive it headless with Playwright; no browser download)
#   - Debian's maven: it fetches Kafka 2.8.2's jars (reference/pom.xml) into ~/.cache/kafkasim (or $KAFKASIM_CACHE)
#     the first time a `kafkasim reference` command or a `kafka` test needs them (reference/jars.py), not here
#   - kafkasim itself, editable, with its test extras (PySpark runs on the same Java 17); then the generated gRPC wire types
#   - with --lab (scripts/test.sh passes it unless the run leaves out the cluster tier): the lab's image,
#     built from Debian's packages by scripts/lab-image.sh (minutes the first time, then cached); a dockerd
#     is started for the build if none runs, and stopped after it
# Fast when everything is already in place.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
want_lab=0
[ "${1:-}" = "--lab" ] && want_lab=1

say() { printf 'setup: %s\n' "$*"; }

# ---- system packages --------------------------------------------------------------------
apt_pkgs=()
if ! command -v java >/dev/null 2>&1 || [ ! -f /usr/share/java/zookeeper.jar ]; then
    apt_pkgs+=(zookeeper)
fi
if ! command -v docker-compose >/dev/null 2>&1; then
    apt_pkgs+=(docker-compose)
fi
# the lab's engine (dockerd, run by tests/test_lab.py when none runs) and its image's base (debootstrap)
if ! command -v dockerd >/dev/null 2>&1; then
    apt_pkgs+=(docker.io)
fi
if ! command -v debootstrap >/dev/null 2>&1; then
    apt_pkgs+=(debootstrap)
fi
# chaos runs' root-only network mode (network: netns): namespaces, iptables DROP and NFQUEUE rules
if ! command -v ip >/dev/null 2>&1; then
    apt_pkgs+=(iproute2)
fi
if ! command -v iptables >/dev/null 2>&1; then
    apt_pkgs+=(iptables)
fi
# a real Kafka client for the Kafka listener's tests and the lab (librdkafka)
if ! command -v kcat >/dev/null 2>&1; then
    apt_pkgs+=(kcat)
fi
# kafkajs (tests/js) runs on Node
if ! command -v node >/dev/null 2>&1; then
    apt_pkgs+=(nodejs)
fi
if ! command -v npm >/dev/null 2>&1; then
    apt_pkgs+=(npm)
fi
# the web view's browser tests (tests/test_ui.py, bench/ui.py): Playwright drives Debian's build
if [ ! -x /usr/bin/chromium ]; then
    apt_pkgs+=(chromium)
fi
# the side-by-side benchmark's fsync count (bench/vs_kafka.py --only fsyncs) traces the brokers with strace
if ! command -v strace >/dev/null 2>&1; then
    apt_pkgs+=(strace)
fi
# Kafka 2.8.2 itself, beside kafkasim (docs/reference.md): Maven fetches its jars on first use
if ! command -v mvn >/dev/null 2>&1; then
    apt_pkgs+=(maven)
fi
if [ "${#apt_pkgs[@]}" -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        SUDO=()
    elif command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo)
    else
        echo "setup: need root to install: ${apt_pkgs[*]}" >&2
        echo "setup: run as root: apt-get install -y ${apt_pkgs[*]}  (zookeeper pulls in Java 17)" >&2
        exit 1
    fi
    say "installing ${apt_pkgs[*]} (apt-get)"
    "${SUDO[@]}" apt-get update -q
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "${apt_pkgs[@]}"
else
    say "java, zookeeper, docker.io, docker-compose, debootstrap, ip, iptables, chromium and maven present"
fi
command -v java >/dev/null 2>&1 || { echo "setup: java still missing: apt-get install openjdk-17-jre-headless" >&2; exit 1; }
[ -f /usr/share/java/zookeeper.jar ] || { echo "setup: /usr/share/java/zookeeper.jar still missing: apt-get install zookeeper" >&2; exit 1; }

# ---- Python packages ---------------------------------------------------------------------
editable_here() {
    # pip >= 21.3 prints "Editable project location: <dir>" for editable installs.
    local loc
    loc="$(python3 -m pip show kafkasim 2>/dev/null | sed -n 's/^Editable project location: //p')"
    [ -n "$loc" ] && [ "$(cd "$loc" 2>/dev/null && pwd -P)" = "$(pwd -P)" ] && entry_point_current
}
entry_point_current() {
    # the installed `kafkasim` script names the module pyproject.toml names (it moves when a module does)
    python3 - <<'PY' >/dev/null 2>&1
import importlib.metadata as md, sys, tomllib
want = tomllib.load(open("pyproject.toml", "rb"))["project"]["scripts"]["kafkasim"]
have = [e.value for e in md.entry_points(group="console_scripts") if e.name == "kafkasim"]
sys.exit(0 if have == [want] else 1)
PY
}
if python3 -c "import kazoo, grpc, grpc_tools, yaml, tenacity, crc32c, pytest, hypothesis, pytest_timeout, pyspark, matplotlib, kafka, snappy, lz4, zstandard, confluent_kafka, aiokafka, starlette, uvicorn, playwright, rich" \
        >/dev/null 2>&1 && command -v py-spy >/dev/null \
        && editable_here; then
    say "python packages present (kafkasim editable from $ROOT)"
else
    say "pip install -e .[test,bench]"   # bench: py-spy, for the benchmarks' profiles
    python3 -m pip install -q --root-user-action=ignore -e ".[test,bench]"
fi

# ---- Node packages (kafkajs, pinned in tests/js/package.json) -----------------------------
if [ -d tests/js/node_modules/kafkajs ]; then
    say "kafkajs present (tests/js)"
else
    say "npm install (tests/js: kafkajs)"
    (cd tests/js && npm install --no-audit --no-fund --silent)
fi

# ---- generated code ----------------------------------------------------------------------
say "generating gRPC wire types (scripts/gen_proto.py)"
python3 scripts/gen_proto.py

# ---- the docker-compose lab's image (no image registry needed) ------------------------------
if [ "$want_lab" = 1 ]; then
    say "the lab's image (scripts/lab-image.sh; cached when nothing changed)"
    python3 -m launcher.lab image
fi
say "done"
