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
# Optional: libedit-dev gives `gannet chat` line editing and history (BSD licence; the CLI alone
# links it, never libgannet; without it chat reads plain lines), and tmux drives the chat test
# through a real terminal (without it that test skips). Installed only as root, like golang-go.
opt=()
for p in libedit-dev pkg-config tmux; do have "$p" || opt+=("$p"); done
if [ ${#opt[@]} -gt 0 ] && [ "$(id -u)" -eq 0 ]; then
  echo "installing: ${opt[*]} (optional: chat line editing and its terminal test)"
  export DEBIAN_FRONTEND=noninteractive
  [ -n "$(find /var/lib/apt/lists -name '*Packages*' 2>/dev/null | head -1)" ] || apt-get update -qq || true
  apt-get install -y -qq "${opt[@]}" > /tmp/gannet-apt-opt.log 2>&1 ||
    echo "could not install ${opt[*]} (see /tmp/gannet-apt-opt.log); chat builds without line editing, its terminal test skips"
elif [ ${#opt[@]} -gt 0 ]; then
  echo "optional, for chat line editing and its terminal test: sudo apt-get install -y ${opt[*]}"
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
