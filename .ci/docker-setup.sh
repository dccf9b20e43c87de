#!/usr/bin/env bash
# Prepare Docker for bench's docker tests (tests/docker), with no container registry at all:
#   1. install Debian's docker.io (and debootstrap) when missing;
#   2. start dockerd in the background when no daemon answers, and wait until it does;
#   3. build a local CPU base image: a debootstrap'ed Debian bookworm (minbase + python3, pip,
#      numpy) imported with `docker import`, plus the CPU PyTorch wheel fetched by pip on the host
#      (pip index or cache, never a registry) and installed in a small Dockerfile build.
# The base is cached by its tag: a second call only checks the daemon. Prints the tag last.
#
#   export BENCH_TEST_BASE="$(.ci/docker-setup.sh)" BENCH_REQUIRE_DOCKER=1; python3 -m pytest tests/docker
# (progress goes to stderr; stdout is only the base's tag)
#
# Environment: BENCH_TEST_BASE (tag of the base, default below), BENCH_TORCH_VERSION (2.13.0),
# DEBIAN_MIRROR (http://deb.debian.org/debian), BENCH_DOCKERD_LOG (/var/log/bench-dockerd.log).
set -euo pipefail

TORCH_VERSION="${BENCH_TORCH_VERSION:-2.13.0}"
BASE_TAG="${BENCH_TEST_BASE:-bench-test-base:bookworm-torch${TORCH_VERSION}-cpu}"
ROOTFS_TAG="bench-test-rootfs:bookworm-minbase"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DOCKERD_LOG="${BENCH_DOCKERD_LOG:-/var/log/bench-dockerd.log}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

log() { printf '[docker-setup] %s\n' "$*" >&2; }

# 1. packages ------------------------------------------------------------------------------
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt_install() { $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2; }
  apt_install || { $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq >&2 && apt_install; }
fi

# 2. daemon --------------------------------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd (log: $DOCKERD_LOG)"
  $SUDO mkdir -p "$(dirname "$DOCKERD_LOG")"
  $SUDO setsid nohup dockerd >"$DOCKERD_LOG" 2>&1 </dev/null &
  for _ in $(seq 1 90); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  if ! docker info >/dev/null 2>&1; then
    log "dockerd did not answer within 90 s; last log lines:"
    tail -n 20 "$DOCKERD_LOG" >&2 || true
    exit 1
  fi
fi
log "daemon: $(docker version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}')"

# 3. the local CPU base --------------------------------------------------------------------
if docker image inspect "$BASE_TAG" >/dev/null 2>&1; then
  log "base $BASE_TAG already built (cached)"
  echo "$BASE_TAG"
  exit 0
fi

work="$(mktemp -d /var/tmp/bench-base.XXXXXX)"
cleanup() { $SUDO rm -rf "$work"; }
trap cleanup EXIT

if ! docker image inspect "$ROOTFS_TAG" >/dev/null 2>&1; then
  log "debootstrap bookworm (minbase + python3, pip, numpy) from $MIRROR"
  started=$SECONDS
  $SUDO debootstrap --variant=minbase --include=python3,python3-pip,python3-numpy \
    bookworm "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
  $SUDO rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
  $SUDO tar -C "$work/rootfs" -c . | docker import \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$ROOTFS_TAG" >/dev/null
  $SUDO rm -rf "$work/rootfs"
  log "rootfs imported as $ROOTFS_TAG in $((SECONDS - started)) s"
fi

log "fetching the CPU torch==$TORCH_VERSION wheel and its dependencies with pip (host side)"
mkdir -p "$work/ctx/wheels"
PIP="python3 -m pip"
wheel_args=(--only-binary=:all: --python-version 3.11 --implementation cp --platform manylinux_2_28_x86_64 -d "$work/ctx/wheels")
$PIP download --quiet "torch==${TORCH_VERSION}+cpu" "${wheel_args[@]}" 2>/dev/null \
  || $PIP download --quiet "torch==${TORCH_VERSION}" "${wheel_args[@]}" \
    --extra-index-url https://download.pytorch.org/whl/cpu
ls "$work/ctx/wheels" | sed 's/^/[docker-setup]   /' >&2

cat >"$work/ctx/Dockerfile" <<EOF
FROM $ROOTFS_TAG
COPY wheels /tmp/wheels
# Debian's python is externally managed: install next to it on purpose, offline.
RUN python3 -m pip install --no-index --find-links /tmp/wheels --no-cache-dir --break-system-packages torch \\
 && rm -rf /tmp/wheels \\
 && python3 -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__)"
EOF
log "building $BASE_TAG (no network)"
started=$SECONDS
docker build --network none -t "$BASE_TAG" \
  --label "org.opencontainers.image.description=bench CI base: Debian bookworm minbase, python3, numpy, torch ${TORCH_VERSION} CPU" \
  "$work/ctx" >&2
log "base $BASE_TAG built in $((SECONDS - started)) s"
echo "$BASE_TAG"
