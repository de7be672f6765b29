#!/bin/bash
# int4 (compressed-tensors W4A16) checks on the GPU machine, which has torch + transformers:
#   build   gannet-quantize and cuda_int4_model_test (tools/gpu/stages.sh's build)
#   cuda    cuda_int4_model_test: int4 checkpoints on the CUDA backend against the CPU backend
#   oracle  `gannet quantize` the tiny targets, decompress them with compressed-tensors itself and
#           run HF's Gemma-4 on them (tools/golden/int4_oracle.py): int4-<name>.safetensors in
#           $OUT/golden. Copy those into tests/data/golden/ and run `ctest -R quantized_test` on
#           any machine: QuantizedHfOracle compares gannet's CPU logits with them.
# Usage, from the repository root on the GPU machine:
#   tools/gpu/int4_oracle.sh [WHEEL ...] [-- stage ...]   (default stages: build cuda oracle)
# WHEELs are installed with pip --no-deps first: compressed-tensors 0.20.1 and what it needs that
# the machine lacks (loguru; pydantic and psutil if absent).
wheels=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do wheels+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
source "$(dirname "$0")/stages.sh"
gpu_header "int4 checks"

stage_build() {
  cmake -S . -B "$build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    > "$out/build.log" 2>&1 &&
    ninja -C "$build" -j"$(nproc)" gannet-quantize cuda_int4_model_test >> "$out/build.log" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && tail -40 "$out/build.log"
  return $rc
}
stage_cuda() { gpu_ctest 600 "tests passed|tests failed|Failed|PASSED|FAILED|note \]" cuda_int4_model_test; }
stage_oracle() {
  if [ ${#wheels[@]} -gt 0 ]; then
    python3 -m pip install --no-deps "${wheels[@]}" > "$out/pip.log" 2>&1 || { tail -5 "$out/pip.log"; return 1; }
  fi
  local work args=() case v spec
  work=$(mktemp -d)
  for case in 31b:int4-g32 26b-a4b:int4-g32 e4b:int4-g32 e2b:int4-g32 e2b:int4-channel-asym \
              e4b:int4-g64-asym; do
    v=${case%%:*}; spec=${case#*:}
    "$build/examples/cli/gannet-quantize" "tests/data/tiny/$v" "$work/$v-$spec" \
      --weight-dtype "$spec" > /dev/null || return 1
    args+=("$v-$spec=$work/$v-$spec")
  done
  python3 tools/golden/int4_oracle.py --out "$out/golden" "${args[@]}" 2>&1 | tee -a "$summary"
  local rc=${PIPESTATUS[0]}
  rm -rf "$work"
  return $rc
}
gpu_run_stages build cuda oracle -- "$@"
