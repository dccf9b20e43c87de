#!/usr/bin/env bash
# A local base for the OpenNN engine image's CPU variant (tests/docker/test_opennn_image.py): the
# registry-free Debian bookworm rootfs of .ci/docker-setup.sh (python3, numpy; no torch: the
# smaller base the OpenNN test may use) plus the C++ build tools the Dockerfile expects (g++,
# cmake, ninja, zlib/libjpeg headers, {fmt} for GCC 12's missing <format>, ccache), installed
# with apt in a networked build. Cached by its tag; prints the tag on stdout.
set -euo pipefail
ROOTFS_TAG="bench-test-rootfs:bookworm-minbase"
TAG="${BENCH_TEST_CXX_BASE:-bench-test-cxx:bookworm}"
log() { printf '[opennn-docker-base] %s\n' "$*" >&2; }

if docker image inspect "$TAG" >/dev/null 2>&1; then
  log "base $TAG already built (cached)"; echo "$TAG"; exit 0
fi
docker image inspect "$ROOTFS_TAG" >/dev/null 2>&1 || { log "$ROOTFS_TAG missing: run .ci/docker-setup.sh first"; exit 1; }
started=$SECONDS
docker build -t "$TAG" --label "org.opencontainers.image.description=bench CI base for the OpenNN CPU image" - >&2 <<DOCKERFILE
FROM $ROOTFS_TAG
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \\
      g++ cmake ninja-build zlib1g-dev libjpeg62-turbo-dev libfmt-dev ccache >/dev/null \\
 && rm -rf /var/lib/apt/lists/*
DOCKERFILE
log "built $TAG in $((SECONDS - started)) s"
echo "$TAG"
