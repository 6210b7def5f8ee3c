# One image for the whole lab: the ZooKeeper service (Debian's ZooKeeper jars + Java 17, run via
# `python -m zk.server`), the brokers (`kafkasim broker ...`) and kcat, a Kafka client for the lab.
#
# BASE: the public Python image by default (`docker-compose build` on a machine whose Docker can
# pull); scripts/lab-image.sh builds a base from Debian's packages instead (no image registry) and
# passes it here.  Either way kafkasim goes into a venv at /opt/kafkasim, first on PATH.
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 DEBIAN_FRONTEND=noninteractive
# pip's CA bundle, when the base's own should be used (scripts/lab-image.sh: the system's)
ARG PIP_CERT=

# ZooKeeper's jars on a headless Java 17 (what zk.server runs), and kcat.  slim images drop
# /usr/share/man; the JRE's postinst needs man1 for update-alternatives.  The Debian base
# (scripts/lab-image.sh) has them already: no apt-get there.
RUN if ! dpkg -s libzookeeper-java openjdk-17-jre-headless kcat >/dev/null 2>&1; then \
        mkdir -p /usr/share/man/man1 \
        && apt-get update \
        && apt-get install -y --no-install-recommends libzookeeper-java openjdk-17-jre-headless kcat \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv /opt/kafkasim
ENV PATH=/opt/kafkasim/bin:$PATH

WORKDIR /app
# Dependencies first, in a layer keyed by pyproject.toml alone: a code change rebuilds only the
# layers below (seconds), not the downloads (PySpark is 300 MB).
COPY pyproject.toml /app/
RUN python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'], sep=chr(10))" \
        > /tmp/requirements.txt \
    && pip install "setuptools>=68" wheel "grpcio-tools>=1.60" -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt
COPY . /app
# proto/*_pb2*.py are gitignored: generate them before installing so they are packaged.
RUN python scripts/gen_proto.py \
    && pip install --no-deps --no-build-isolation . \
    && mkdir -p /data
# ZooKeeper's class-data archive (util/jvm_archive.py), written once here rather than by each container's
# first start
RUN python -c "from zk.server import archive_flags; print(archive_flags())"

CMD ["kafkasim", "--help"]
