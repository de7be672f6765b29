#!/usr/bin/env bash
# Installs the Debian packages gannet builds with, when they are missing. As root it runs
# apt-get; otherwise it prints the one command to run. CUDA is optional and never installed here.
set -euo pipefail
need=()
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in cmake ninja-build g++ ccache libabsl-dev libfmt-dev libgtest-dev libbenchmark-dev; do
  have "$p" || need+=("$p")
done
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
