#!/usr/bin/env bash
# Builds the docker-compose lab's image without pulling from any image registry:
#   1. a base image from Debian's packages: debootstrap (minbase, bookworm) with Python 3, venv,
#      ZooKeeper's jars (libzookeeper-java), Java 17 (headless) and kcat, then `docker import`;
#   2. kafkasim's image on that base (Dockerfile, --build-arg BASE=<the base>), tagged kafkasim:latest,
#      the tag docker-compose.yml runs.
# Both steps are cached: each image is tagged by a hash of its inputs (the base: this script's package
# list, suite and the host's extra CA certificates; kafkasim's: the base and the files git tracks, as
# they are in the work tree), and a step whose tag exists does nothing.
#
#   scripts/lab-image.sh            build what is missing, print the image's tag
#   scripts/lab-image.sh --check    exit 0 when kafkasim:latest is current, 1 when a build is due
#
# Needs root (debootstrap, a running dockerd), debootstrap and docker.  The Debian mirror is the one apt
# uses here (/etc/apt/sources.list*), or $DEBIAN_MIRROR; with neither, the base is not built and the script
# says so.  Machines whose Docker can pull need none of this: `docker-compose build` uses the public python
# image (the Dockerfile's default).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

SUITE=bookworm
# python3-venv: the image installs kafkasim in a venv (Debian's python3 is "externally managed").
# ZooKeeper: zk.server runs Debian's jar on a headless JRE; Debian's `zookeeper` package itself would add
# the full JRE (GTK, Mesa, LLVM: 400 MB more) for its init scripts, which the lab does not use.
# kcat is the lab's Kafka client.
BASE_PKGS=python3,python3-venv,ca-certificates,libzookeeper-java,openjdk-17-jre-headless,kcat
BASE_REPO=kafkasim-base
APP_REPO=kafkasim
DOCKER="${DOCKER:-docker}"
export DOCKER_BUILDKIT=0  # the classic builder: `--network host` needs no entitlement, and it is what dockerd 20.10 has

say() { printf 'lab-image: %s\n' "$*" >&2; }
die() { printf 'lab-image: %s\n' "$*" >&2; exit 1; }

check_only=0
[ "${1:-}" = "--check" ] && check_only=1

command -v "$DOCKER" >/dev/null 2>&1 || die "docker is missing: apt-get install docker.io (scripts/setup.sh does)"
"$DOCKER" version --format '{{.Server.Version}}' >/dev/null 2>&1 \
    || die "no Docker engine answers: start dockerd (see README, 'The docker-compose lab')"

# The Debian mirror this machine's apt uses (the first URI of a deb source whose path ends in /debian, in
# /etc/apt/sources.list, sources.list.d/*.list or the deb822 sources.list.d/*.sources), or $DEBIAN_MIRROR.
debian_mirror() {
    if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
    local m
    m="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | awk '/^[[:space:]]*#/ { next }
               tolower($1) == "uris:" { for (i = 2; i <= NF; i++) print $i; next }
               $1 == "deb" { i = 2
                             if ($i ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ }
                             print $i }' \
        | sed -n 's|/*$||; /\/debian$/p' | head -n1)" || true   # a missing sources file is no error
    [ -n "$m" ] || die "no Debian mirror found in this machine's apt sources (/etc/apt/sources.list, /etc/apt/sources.list.d/*.list, *.sources): set DEBIAN_MIRROR to one (a URL ending in /debian)"
    echo "$m"
}

# Certificates this machine trusts beyond Debian's set (a TLS-inspecting egress proxy's CA, say):
# the base trusts them too, or pip and apt inside the build could not reach their registries.
extra_cas() {
    python3 - <<'PY'
import glob, re
pem = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)
def certs(paths):
    out = []
    for p in paths:
        try:
            out += pem.findall(open(p).read())
        except OSError:
            pass
    return out
debian = set(certs(glob.glob("/usr/share/ca-certificates/mozilla/*.crt")))
for c in certs(["/etc/ssl/certs/ca-certificates.crt"]):
    if c not in debian:
        print(c)
PY
}

sha() { sha256sum | cut -c1-16; }

# ---- 1. the base image ------------------------------------------------------------------------
CAS="$(extra_cas)"
BASE_HASH="$(printf '%s\n%s\n%s\n' "$SUITE" "$BASE_PKGS" "$CAS" | sha)"
BASE_TAG="$BASE_REPO:$SUITE-$BASE_HASH"

# ---- 2. kafkasim's image: its build context is the files git tracks (as in the work tree) --------
context_files() {
    if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git -C "$ROOT" ls-files -z | python3 -c '
import os, sys
names = [n for n in sys.stdin.buffer.read().split(b"\0") if n and os.path.lexists(n)]
sys.stdout.buffer.write(b"\0".join(sorted(names)) + b"\0")'
    else  # not a git checkout: everything but what .dockerignore would leave out
        find . -path ./.git -prune -o -path ./run -prune -o -path ./runs -prune -o -name __pycache__ -prune \
            -o \( -type f -o -type l \) -print0 | sed -z 's|^\./||' | sort -z
    fi
}
make_context() {  # a reproducible tar: same files, same bytes
    context_files | tar -c --null -T - --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -f -
}
APP_HASH="$( { echo "$BASE_TAG"; make_context; } | sha)"
APP_TAG="$APP_REPO:lab-$APP_HASH"

have() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }

if [ "$check_only" = 1 ]; then
    have "$APP_TAG" && [ "$("$DOCKER" image inspect -f '{{.Id}}' "$APP_TAG")" = "$("$DOCKER" image inspect -f '{{.Id}}' "$APP_REPO:latest" 2>/dev/null)" ] \
        && { echo "$APP_TAG"; exit 0; }
    exit 1
fi

if have "$BASE_TAG"; then
    say "base $BASE_TAG present"
else
    command -v debootstrap >/dev/null 2>&1 || die "debootstrap is missing: apt-get install debootstrap"
    [ "$(id -u)" -eq 0 ] || die "debootstrap needs root"
    MIRROR="$(debian_mirror)" || exit 1
    WORK="$(mktemp -d /var/tmp/kafkasim-base.XXXXXX)"
    trap 'rm -rf "$WORK"' EXIT
    say "debootstrap --variant=minbase $SUITE from $MIRROR (+ $BASE_PKGS)"
    t0=$(date +%s)
    debootstrap --variant=minbase --include="$BASE_PKGS" "$SUITE" "$WORK/root" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
        || { tail -n 30 "$WORK/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
    if [ -n "$CAS" ]; then
        printf '%s\n' "$CAS" > "$WORK/root/usr/local/share/ca-certificates/kafkasim-host-extra.crt"
        chroot "$WORK/root" update-ca-certificates >/dev/null
    fi
    rm -rf "$WORK/root/var/cache/apt/archives/"*.deb "$WORK/root/var/lib/apt/lists/"*
    say "debootstrap took $(( $(date +%s) - t0 )) s; docker import -> $BASE_TAG"
    tar -C "$WORK/root" -c . | "$DOCKER" import \
        -c 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        -m "debootstrap --variant=minbase $SUITE + $BASE_PKGS" - "$BASE_TAG" >/dev/null
    rm -rf "$WORK"
    trap - EXIT
fi

if have "$APP_TAG"; then
    say "image $APP_TAG present (nothing changed)"
else
    say "docker build (base $BASE_TAG) -> $APP_TAG"
    # --network host: the build's apt and pip reach their registries through the host's network
    # (no bridge is needed, or created, for the build).
    make_context | "$DOCKER" build --network host --build-arg "BASE=$BASE_TAG" \
        --build-arg PIP_CERT=/etc/ssl/certs/ca-certificates.crt -t "$APP_TAG" - >&2
fi
"$DOCKER" tag "$APP_TAG" "$APP_REPO:latest"
# older builds' tags go (their layers stay while another tag uses them): one lab image, not one per change
for old in $("$DOCKER" images --format '{{.Repository}}:{{.Tag}}' "$APP_REPO" | grep "^$APP_REPO:lab-" || true) \
           $("$DOCKER" images --format '{{.Repository}}:{{.Tag}}' "$BASE_REPO" || true); do
    [ "$old" = "$APP_TAG" ] || [ "$old" = "$BASE_TAG" ] || "$DOCKER" rmi "$old" >/dev/null 2>&1 || true
done
echo "$APP_TAG"
