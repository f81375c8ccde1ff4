# The testops-evidence container action.
#
# BASE is the official slim Python 3.11 image on Debian bookworm, pinned by tag *and* digest (the
# multi-platform index digest), so every build starts from the same bytes; update both together.
# Tests and air-gapped builders override it with --build-arg BASE=<a local Debian image with python3,
# python3-pip and ca-certificates>: nothing below depends on the official image's layout.
ARG BASE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d
FROM ${BASE}

# Reproducible: the release builds with SOURCE_DATE_EPOCH set to its commit's time (BuildKit then dates
# the image's history and, with rewrite-timestamp, its files by it), and the bytecode below holds a hash
# of its source instead of the build's clock, so two builds of one commit give the same bytes.
ARG SOURCE_DATE_EPOCH

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1

# Runtime dependencies only, exactly as locked: --require-hashes refuses anything unpinned or altered,
# --only-binary means no compiler is needed (or left behind). --target keeps them out of the system
# site-packages (Debian's pip refuses those under PEP 668) and out of reach of the job's environment.
COPY requirements/runtime.txt /action/requirements/runtime.txt
RUN python3 -m pip install --no-cache-dir --require-hashes --only-binary=:all: \
        --target /action/site -r /action/requirements/runtime.txt

COPY entrypoint.py /action/entrypoint.py
COPY src/testops_evidence /action/src/testops_evidence

# One .pth file puts the dependencies and the package on the interpreter's path (no build backend, no
# install step). /action/bin/python is a fixed name for the interpreter because the runner forwards the
# job's environment into the container, PATH included, and a user's PATH must not choose our Python.
# Compiling now makes every start of the action (one per phase, per job) faster; checked-hash .pyc files
# carry the source's hash rather than its modification time, so they are the same in every build.
RUN set -eu; \
    site_dir=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
    mkdir -p "$site_dir" /action/bin; \
    printf '/action/site\n/action/src\n' > "$site_dir/testops-evidence.pth"; \
    ln -s "$(command -v python3)" /action/bin/python; \
    python3 -m compileall -q --invalidation-mode checked-hash /action/site /action/src; \
    /action/bin/python -I -c 'import testops_evidence, github, requests, jsonschema; from testops_evidence.readers import zstd'

# GitHub runs container actions as root with the workspace mounted at /github/workspace as the working
# directory: no USER (it would lose access to the workspace) and no WORKDIR. -I (isolated mode) ignores
# PYTHON* variables and the user site, which the job's environment could otherwise inject.
ENTRYPOINT ["/action/bin/python", "-I", "/action/entrypoint.py"]
