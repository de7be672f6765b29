#!/usr/bin/env bash
# Builds what `make demo` runs and nothing more: the CLI (target gannet_cli), for this machine.
#   no NVIDIA GPU (no nvidia-smi, or no driver)  the cpu preset into build/cpu: no CUDA code at all
#   a GPU of an arch of the release list         that arch only, into build/demo-smNN
#   a GPU of another arch                        the release preset (its whole list)
# On a fresh 2-core machine without a GPU this takes a few minutes, where the release preset's
# six CUDA architectures took ten. `make build` and `make test` keep the release list (PRESET).
# usage: tools/demo_build.sh --dir   print the build folder the demo runs from
#        tools/demo_build.sh JOBS    configure and build it
set -euo pipefail
cd "$(dirname "$0")/.."
# The present GPU's compute capability as nvidia-smi reports it ("9.0" -> 90); empty without a
# driver (nvidia-smi then fails, or prints its complaint instead of a number).
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | head -n 1 |
       tr -d ' .' | grep -E '^[0-9]+$' || true)
release=$(sed -n 's/^set(GANNET_CUDA_ARCHS_RELEASE "\(.*\)")$/\1/p' cmake/GannetCudaArchs.cmake)
if [ -z "$arch" ]; then
  dir=build/cpu config=(--preset cpu)
elif [[ ";$release;" == *";$arch;"* ]]; then
  dir=build/demo-sm$arch config=(--preset release -B "build/demo-sm$arch" -DCMAKE_CUDA_ARCHITECTURES="$arch")
else
  dir=build/release config=(--preset release)
fi
if [ "${1:-}" = "--dir" ]; then
  echo "$dir"
  exit 0
fi
jobs=${1:?usage: tools/demo_build.sh JOBS}
mkdir -p build
if [ -z "$arch" ]; then
  echo "== no NVIDIA GPU found: building the CLI without CUDA ($dir)"
else
  echo "== GPU of compute capability $arch: building the CLI for it ($dir)"
fi
cmake "${config[@]}" > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" -j "$jobs" --target gannet_cli
