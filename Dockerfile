# One image for the whole lab: the ZooKeeper service (Debian's zookeeper + Java 17, run via
# `python -m zk.server`), the brokers (`kafkasim broker ...`) and kcat, a Kafka client for the lab.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 DEBIAN_FRONTEND=noninteractive

# slim images drop /usr/share/man; the JRE's postinst needs man1 for update-alternatives.
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends zookeeper kcat \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY . /app
# proto/*_pb2*.py are gitignored: generate them before installing so they are packaged.
RUN pip install "grpcio-tools>=1.60" \
    && python scripts/gen_proto.py \
    && pip install . \
    && mkdir -p /data

CMD ["kafkasim", "--help"]
