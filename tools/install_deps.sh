#!/usr/bin/env bash
# Installs the Debian packages gannet builds with, when they are missing. As root it runs
# apt-get; otherwise it prints the one command to run. CUDA is optional and never installed here.
set -euo pipefail
need=()
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in cmake ninja-build g++ ccache libabsl-dev libfmt-dev libgtest-dev libbenchmark-dev; do
  have "$p" || need+=("$p")
done
# Optional: Go builds and tests the cgo example (examples/go; its recommends bring pkg-config,
# which the install test uses); without it those tests skip. Installed only as root; a failed
# install never fails the build. About 30 s on a fresh machine, nothing once installed.
if ! have golang-go && [ "$(id -u)" -eq 0 ]; then
  echo "installing: golang-go (optional, for examples/go)"
  export DEBIAN_FRONTEND=noninteractive
  [ -n "$(find /var/lib/apt/lists -name '*Packages*' 2>/dev/null | head -1)" ] || apt-get update -qq || true
  apt-get install -y -qq golang-go > /tmp/gannet-apt-go.log 2>&1 ||
    echo "could not install golang-go (see /tmp/gannet-apt-go.log); the Go example tests will skip"
fi
# Optional: clang-format-14 for `make format` / `make format-check` (CI); the version is pinned
# (tools/format.sh refuses another major version). Installed only as root; without it only those
# two targets fail, with a message saying what to install.
if ! have clang-format-14 && [ "$(id -u)" -eq 0 ]; then
  echo "installing: clang-format-14 (optional, for make format)"
  export DEBIAN_FRONTEND=noninteractive
  [ -n "$(find /var/lib/apt/lists -name '*Packages*' 2>/dev/null | head -1)" ] || apt-get update -qq || true
  apt-get install -y -qq clang-format-14 > /tmp/gannet-apt-clang-format.log 2>&1 ||
    echo "could not install clang-format-14 (see /tmp/gannet-apt-clang-format.log)"
fi
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -eq 0 ]; then
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  [ -n "$(find /var/lib/apt/lists -name '*Packages*' 2>/dev/null | head -1)" ] || apt-get update -qq
  apt-get install -y -qq "${need[@]}" > /tmp/gannet-apt.log 2>&1 || {
    apt-get update -qq && apt-get install -y -qq "${need[@]}"; }
else
  echo "gannet needs these Debian packages; run:"
  echo "  sudo apt-get install -y ${need[*]}"
  exit 1
fi
