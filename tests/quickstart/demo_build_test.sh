#!/usr/bin/env bash
# `make demo` builds only what the demo needs for this machine (tools/demo_build.sh): with no
# NVIDIA driver the cpu preset, with a GPU its architecture only, with a GPU of an architecture
# outside the release list the release preset. Checked with a stand-in nvidia-smi on a PATH
# that holds nothing else but the tools the script uses; and `make demo` must go through it, not
# through the release build of `make build`.
# usage: demo_build_test.sh SOURCE_DIR
set -uo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
mkdir -p "$tmp/bin"
for tool in bash sed grep tr head dirname cat; do ln -s "$(command -v $tool)" "$tmp/bin/$tool"; done

expect() {  # expect NAME WANT [NVIDIA_SMI_BODY]: the build folder chosen with that nvidia-smi
  local name=$1 want=$2 body=${3:-}
  rm -f "$tmp/bin/nvidia-smi"
  if [ -n "$body" ]; then
    printf '#!%s\n%s\n' "$(command -v bash)" "$body" > "$tmp/bin/nvidia-smi"
    chmod +x "$tmp/bin/nvidia-smi"
  fi
  local got
  got=$(PATH=$tmp/bin "$src/tools/demo_build.sh" --dir 2>&1)
  if [ "$got" = "$want" ]; then
    echo "ok   $name: $got"
  else
    echo "FAIL $name: got '$got', want '$want'"
    failures=$((failures + 1))
  fi
}
expect "no nvidia-smi" build/cpu
expect "nvidia-smi without a driver" build/cpu \
  'echo "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver."; exit 9'
expect "an H100 (9.0)" build/demo-sm90 'echo "9.0"'
expect "an L4 (8.9), first of two GPUs" build/demo-sm89 'printf "8.9\n9.0\n"'
expect "an arch outside the release list (12.0)" build/release 'echo "12.0"'

# make demo builds through tools/demo_build.sh, and never the release preset's whole build.
plan=$(make -C "$src" -n demo 2> /dev/null)
if grep -q 'tools/demo_build.sh' <<< "$plan" && ! grep -q 'cmake --build build/release' <<< "$plan"; then
  echo "ok   make demo builds through tools/demo_build.sh"
else
  echo "FAIL make demo does not build through tools/demo_build.sh:"
  echo "$plan" | head -20
  failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then echo "$failures check(s) failed"; exit 1; fi
echo "all demo build checks passed"
