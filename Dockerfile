# debatebot: `DOCKER_BUILDKIT=1 docker build -t debatebot .`, then
# `docker run --rm debatebot run "Should we …?"` holds a debate on the bundled local model
# (SmolLM2) with no key and no network. BuildKit's built-in Dockerfile frontend is enough (no
# `# syntax=` line, so nothing is pulled for it).
# PYTHON_IMAGE: any Debian bookworm image with python3 (3.11) and python3-venv; see
# scripts/docker-smoke for one built from Debian packages where no registry image can be pulled.
# Behind a TLS-inspecting proxy, pass its CA bundle as a build secret (never a layer):
# `--secret id=ca,src=/etc/ssl/certs/ca-certificates.crt`.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- builder: compile llama.cpp once into a wheel, then install everything into /opt/venv ----
FROM ${PYTHON_IMAGE} AS builder
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake \
 && rm -rf /var/lib/apt/lists/*
# A portable build (no -march=native): the image runs on any x86-64 machine with AVX2.
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    CMAKE_ARGS="-DGGML_NATIVE=OFF"
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# Its own layer: code changes do not recompile llama.cpp (about 10 minutes on 2 cores).
RUN --mount=type=secret,id=ca,required=false \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
 && pip wheel --wheel-dir /wheels "llama-cpp-python>=0.3.0"
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot bot
COPY engine engine
COPY prompts prompts
COPY migrations migrations
# The runtime needs no pip. Wheels copy each shared library once per symlinked name (libllama
# three times over); `hardlink` makes identical files one, and the copy below keeps the links.
RUN --mount=type=secret,id=ca,required=false \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
 && pip install --find-links /wheels . \
 && pip uninstall --yes --quiet pip setuptools \
 && python -m compileall -q /opt/venv \
 && hardlink --quiet /opt/venv

# --- runtime: the venv, a non-root user, nothing to build with --------------------------------
FROM ${PYTHON_IMAGE}
# llama.cpp's CPU backend uses OpenMP.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgomp1 \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 --shell /usr/sbin/nologin debatebot \
 && mkdir /data && chown debatebot:debatebot /data
COPY --from=builder /opt/venv /opt/venv
# The embedded default: a SQLite file in the /data volume, migrated on first use.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DEBATEBOT_DATABASE_URL=sqlite:////data/debatebot.sqlite3
USER debatebot
WORKDIR /data
VOLUME ["/data"]
EXPOSE 3000
# /healthz answers 200 while the database is usable (serve over HTTP or Socket Mode).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:3000/healthz', timeout=4).status != 200)"]
ENTRYPOINT ["debatebot"]
CMD ["serve"]
