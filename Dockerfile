# syntax=docker/dockerfile:1
# One image for every ldpstream verb: `aggregate`, `serve`, `gateway`, `issuer`, `simulate`
# (the entry point).
#   docker build -t ldpstream:0.1.0 .
#   docker run --rm ldpstream:0.1.0 serve
# Pinned base; for byte-for-byte reproducible builds pin the digest too (python:3.11.11-slim-bookworm@sha256:…).
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

# ---- build: wheels for the package and its dependencies (gcc only lives here) -------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY ldpcore ./ldpcore
COPY ldpstream ./ldpstream
COPY producer ./producer
COPY aggregator ./aggregator
COPY query_api ./query_api
COPY gateway ./gateway
COPY issuer ./issuer
COPY ldpctl ./ldpctl
RUN python -m venv /opt/ldpstream \
 && /opt/ldpstream/bin/pip install --upgrade pip \
 && /opt/ldpstream/bin/pip install .

# ---- runtime: the venv only, a non-root user, no compiler ---------------------------------
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="ldpstream" \
      org.opencontainers.image.description="Streaming ε-LDP telemetry: aggregator, query API, simulator" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 ldp \
 && useradd --system --uid 10001 --gid ldp --home-dir /home/ldp --create-home --shell /usr/sbin/nologin ldp
COPY --from=build /opt/ldpstream /opt/ldpstream
ENV PATH=/opt/ldpstream/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    LDP_API_HOST=0.0.0.0 \
    LDP_METRICS_HOST=0.0.0.0 \
    LDP_METRICS_PORT=9100 \
    LDP_GATEWAY_HOST=0.0.0.0
USER 10001:10001
WORKDIR /home/ldp
EXPOSE 8000 8080 9100
# `ldpstream health` probes whatever this container runs: the API's /healthz for `serve`,
# the worker's /healthz (its consume loop turns) for `aggregate`; a simulator is healthy
# while it runs.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["ldpstream", "health"]
ENTRYPOINT ["ldpstream"]
CMD ["--help"]
