#!/usr/bin/env bash
# Checks that a Volta build carries sm_70 machine code and compute_70 PTX (libgannet.so and a
# GPU test binary of the build): what `make sm70` ends with. No V100 is needed (none is at hand).
set -euo pipefail
build=${1:-build/sm70}
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
objdump="$root/.cuda12/toolkit/bin/cuobjdump"
status=0
for bin in "$build/lib/capi/libgannet.so" "$build/tests/backend/cuda_ops_test"; do
  [ -x "$bin" ] || { echo "sm70: $bin was not built"; status=1; continue; }
  sass=$("$objdump" --list-elf "$bin" | grep -c 'sm_70' || true)
  ptx=$("$objdump" --list-ptx "$bin" | grep -c 'sm_70' || true)
  echo "sm70: $(basename "$bin"): $sass sm_70 cubins, $ptx compute_70 PTX"
  [ "$sass" -gt 0 ] && [ "$ptx" -gt 0 ] || status=1
done
exit $status
