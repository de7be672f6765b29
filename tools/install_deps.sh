#!/usr/bin/env bash
# Installs the Debian packages gannet builds with, when they are missing. As root it runs
# apt-get; otherwise it prints the one command to run. CUDA is optional and never installed here.
# --required: only what every build needs (`make demo`: a new user's first command should not wait
# for Go, tmux or pip packages that only tests use).
set -euo pipefail
required_only=false
[ "${1:-}" = "--required" ] && required_only=true
need=()
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
# libcpp-httplib-dev (HTTP) and nlohmann-json3-dev (the project's JSON library) build
# `gannet serve` (examples/server); pkg-config finds cpp-httplib. libpng-dev, libjpeg-dev
# (libjpeg-turbo) and libwebp-dev decode images (lib/vision; pkg-config finds libwebp).
for p in cmake ninja-build g++ ccache libabsl-dev libfmt-dev libgtest-dev libbenchmark-dev \
         libcpp-httplib-dev nlohmann-json3-dev pkg-config libpng-dev libjpeg-dev libwebp-dev; do
  have "$p" || need+=("$p")
done
if ! $required_only; then
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
# Optional: the official `openai` Python client (PyPI) drives the server tests
# (tests/server); without it they skip with a message. Installed only as root; never fails.
if command -v python3 > /dev/null && ! python3 -c 'import openai' 2> /dev/null &&
   [ "$(id -u)" -eq 0 ]; then
  echo "installing: openai (optional, pip, for the gannet serve tests)"
  python3 -m pip install -q openai > /tmp/gannet-pip-openai.log 2>&1 ||
    echo "could not install openai (see /tmp/gannet-pip-openai.log); the server tests will skip"
fi
# Optional: AIPerf (PyPI `aiperf`, NVIDIA's OpenAI load generator) runs a fixed workload against
# the server in tests/server (server_loadgen_test); without it that test skips. It gets a virtual
# environment of its own, /opt/gannet-aiperf: it pins ~140 packages (pandas, matplotlib, aiohttp,
# transformers, no torch) that must not move the versions the other Python tests see. The version
# is pinned too: the test reads its report's fields. About 230 MB from PyPI and a minute to
# install on 2 cores, once. Installed only as root; never fails.
aiperf_venv=/opt/gannet-aiperf
if command -v python3 > /dev/null && [ ! -x "$aiperf_venv/bin/aiperf" ] && [ "$(id -u)" -eq 0 ]; then
  echo "installing: aiperf (optional, pip, into $aiperf_venv, for the load-generator test)"
  { python3 -m venv "$aiperf_venv" && "$aiperf_venv/bin/pip" install -q aiperf==0.13.0; } \
    > /tmp/gannet-pip-aiperf.log 2>&1 ||
    { rm -rf "$aiperf_venv"
      echo "could not install aiperf (see /tmp/gannet-pip-aiperf.log); the load-generator test will skip"; }
fi
# Optional: Chromium (headless) drives gannet serve's chat page in tests/server (cdp.py, over
# the DevTools protocol); without it that one test skips. Installed only as root; never fails.
# Chat templates need no package: Debian has no C++ Jinja, gannet interprets the subset itself
# (lib/tokenizer/jinja_*, docs/chat-templates.md).
if ! have chromium && [ "$(id -u)" -eq 0 ]; then
  echo "installing: chromium (optional, for the chat page test)"
  export DEBIAN_FRONTEND=noninteractive
  [ -n "$(find /var/lib/apt/lists -name '*Packages*' 2>/dev/null | head -1)" ] || apt-get update -qq || true
  apt-get install -y -qq --no-install-recommends chromium > /tmp/gannet-apt-chromium.log 2>&1 ||
    echo "could not install chromium (see /tmp/gannet-apt-chromium.log); the chat page test will skip"
fi
# Optional: pytest runs the Python package's tests (python/tests, ctest python_pytest) and
# scikit-build-core builds the package (`pip install --no-build-isolation ./python`, offline once
# it is here; ctest python_pip_install); without them those tests skip with a message. Installed
# only as root, from PyPI like openai; never fails.
if command -v python3 > /dev/null && [ "$(id -u)" -eq 0 ]; then
  py_need=()
  python3 -c 'import pytest' 2> /dev/null || py_need+=(pytest)
  python3 -c 'import scikit_build_core' 2> /dev/null || py_need+=(scikit-build-core)
  if [ ${#py_need[@]} -gt 0 ]; then
    echo "installing: ${py_need[*]} (optional, pip, for the Python package and its tests)"
    # Debian's own python3 refuses pip installs (PEP 668): pytest then comes from apt
    # (python3-pytest); scikit-build-core has no Debian package, so the pip-install test skips.
    python3 -m pip install -q "${py_need[@]}" > /tmp/gannet-pip-python.log 2>&1 ||
      { python3 -c 'import pytest' 2> /dev/null ||
          DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pytest >> /tmp/gannet-pip-python.log 2>&1 || true
        echo "could not pip install ${py_need[*]} (see /tmp/gannet-pip-python.log); Python tests without them skip"; }
  fi
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
