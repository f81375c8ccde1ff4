#!/usr/bin/env bash
# A private Docker engine for the container test tier, from Debian's own packages, confined to
# .tools/container/ and a temporary run directory. No registry is needed: the base image is made with
# debootstrap from Debian's archive and imported.
#
#   scripts/container-engine.sh prepare # download the engine and make the base image's tarball (no dockerd)
#   scripts/container-engine.sh prepared  # exit 0 when both are in place
#   scripts/container-engine.sh start   # print DOCKER_HOST=unix://... (starts dockerd if not running)
#   scripts/container-engine.sh base    # print the base image name (builds and imports it if missing)
#   scripts/container-engine.sh stop    # stop the engine this script started
#   scripts/container-engine.sh client  # print the path of the engine's docker client
#
# Needs root (dockerd), apt-get (to download the packages), and a kernel that allows overlayfs and
# cgroups; the container test skips with this script's last error line when any of it is missing.
# Cached between runs in .tools/container/: the .deb files, the extracted engine, the base image
# tarball (debootstrap takes most of a minute; importing the tarball a few seconds) and the engine's
# data (so the imported base and the build cache survive too).
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS=${TESTOPS_EVIDENCE_CONTAINER_DIR:-$PWD/.tools/container}
DEBS=$TOOLS/debs
ENGINE=$TOOLS/engine
DATA=$TOOLS/data
# The host's CA bundle goes into the base image: where egress passes a TLS-intercepting proxy (as on
# this project's machines), the image build reaches PyPI only with the host's trust. Part of the cache
# key, so a changed bundle rebuilds the base.
HOST_CA=${TESTOPS_EVIDENCE_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
ca_key=$( { cat "$HOST_CA" 2>/dev/null || true; } | sha256sum | cut -c1-12)
BASE_TAR=$TOOLS/debian-bookworm-python3-$ca_key.tar
BASE_IMAGE=local/debian-python:bookworm
# The socket lives under /tmp: a unix socket path must stay under 108 bytes.
RUN=${TESTOPS_EVIDENCE_DOCKER_RUN:-/tmp/testops-evidence-docker-$(id -u)}
SOCKET=$RUN/docker.sock
PACKAGES=(docker.io containerd runc debootstrap)

die() { echo "container-engine: $*" >&2; exit 1; }

export PATH="$ENGINE/usr/bin:$ENGINE/usr/sbin:$ENGINE/sbin:$PATH"
docker_cli() { DOCKER_HOST="unix://$SOCKET" "$ENGINE/usr/bin/docker" "$@"; }

install_engine() {
  [ -x "$ENGINE/usr/sbin/dockerd" ] && [ -x "$ENGINE/usr/bin/containerd" ] && return 0
  [ "$(id -u)" = 0 ] || die "needs root to run dockerd"
  command -v apt-get >/dev/null 2>&1 || die "needs apt-get to download Debian's docker.io"
  mkdir -p "$DEBS" "$ENGINE"
  (cd "$DEBS" && { apt-get download -q "${PACKAGES[@]}" >/dev/null 2>&1 \
     || { apt-get update -q >/dev/null 2>&1 && apt-get download -q "${PACKAGES[@]}" >/dev/null 2>&1; }; }) \
    || die "apt-get download ${PACKAGES[*]} failed"
  for deb in "$DEBS"/*.deb; do dpkg -x "$deb" "$ENGINE"; done
  [ -x "$ENGINE/usr/sbin/dockerd" ] || die "docker.io did not provide dockerd"
}

running() { [ -S "$SOCKET" ] && docker_cli version >/dev/null 2>&1; }

start() {
  install_engine
  if ! running; then
    mkdir -p "$RUN" "$DATA"
    # No iptables, no bridge: containers use --network host or none, so nothing touches the host's
    # firewall or interfaces, and nothing is reachable but what the host itself reaches.
    nohup dockerd --data-root "$DATA" --exec-root "$RUN/exec" --pidfile "$RUN/dockerd.pid" \
      -H "unix://$SOCKET" --iptables=false --ip6tables=false --ip-masq=false --bridge=none \
      --userland-proxy=false >"$RUN/dockerd.log" 2>&1 9>&- &
    for _ in $(seq 1 60); do
      running && break
      if ! kill -0 "$!" 2>/dev/null; then
        die "dockerd exited: $(tail -n 1 "$RUN/dockerd.log")"
      fi
      sleep 0.5
    done
    running || die "dockerd did not answer within 30 s: $(tail -n 1 "$RUN/dockerd.log")"
  fi
  echo "DOCKER_HOST=unix://$SOCKET"
}

base_tar() {
  [ -s "$BASE_TAR" ] && return 0
  install_engine
  rootfs=$(mktemp -d "$TOOLS/rootfs.XXXXXX")
  # minbase + what the Dockerfile needs from a base: python3 (3.11 on bookworm), pip, CA certificates.
  DEBOOTSTRAP_DIR="$ENGINE/usr/share/debootstrap" "$ENGINE/usr/sbin/debootstrap" --variant=minbase \
    --include=python3,python3-pip,ca-certificates bookworm "$rootfs" http://deb.debian.org/debian \
    >"$TOOLS/debootstrap.log" 2>&1 || { rm -rf "$rootfs"; die "debootstrap failed: $(tail -n 1 "$TOOLS/debootstrap.log")"; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  # Debian's pip and Python use the system bundle, so this is all the trust they need.
  if [ -s "$HOST_CA" ]; then cp "$HOST_CA" "$rootfs/etc/ssl/certs/ca-certificates.crt"; fi
  tar -C "$rootfs" -cf "$BASE_TAR.tmp" . && mv "$BASE_TAR.tmp" "$BASE_TAR"
  rm -rf "$rootfs"
}

prepare() {
  echo "container-engine: Debian's ${PACKAGES[*]} into $ENGINE" >&2
  install_engine
  echo "container-engine: a Debian bookworm base (minbase, python3, pip) with debootstrap into $BASE_TAR" >&2
  base_tar
}

prepared() { [ -x "$ENGINE/usr/sbin/dockerd" ] && [ -x "$ENGINE/usr/bin/containerd" ] && [ -s "$BASE_TAR" ]; }

base() {
  running || die "the engine is not running (scripts/container-engine.sh start)"
  if ! docker_cli image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    base_tar
    docker_cli import "$BASE_TAR" "$BASE_IMAGE" >/dev/null
  elif [ ! -s "$BASE_TAR" ]; then
    docker_cli image rm "$BASE_IMAGE" >/dev/null && base >/dev/null  # imported from another CA bundle
  fi
  echo "$BASE_IMAGE"
}

stop() {
  if [ -f "$RUN/dockerd.pid" ]; then
    pid=$(cat "$RUN/dockerd.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  fi
  # dockerd leaves a mounted network namespace behind on some kernels.
  grep -o "$RUN/[^ ]*" /proc/mounts 2>/dev/null | sort -r | while read -r mnt; do umount "$mnt" 2>/dev/null || true; done
  rm -rf "$RUN"
}

locked() {
  # One engine per machine: concurrent callers (parallel test workers, two CI checkouts) queue here.
  mkdir -p "$(dirname "$RUN")"
  exec 9>"$RUN.lock"
  flock 9
  "$@"
}

case "${1:-}" in
  prepare) locked prepare ;;
  prepared) prepared ;;
  start) locked start ;;
  base) locked base ;;
  stop) locked stop ;;
  client) install_engine; echo "$ENGINE/usr/bin/docker" ;;
  docker) shift; docker_cli "$@" ;;
  *) die "usage: $0 prepare | prepared | start | base | stop | client | docker <args>" ;;
esac
