#!/bin/bash
# The residual update in the GEMV's last CTA (Backend::LinearPostNormResidual, GemvResidualUpdate):
# its tests, then batch-1/2/4 decode steps with it on and off in the same binary
# (GANNET_GEMV_UPDATE=0), interleaved, and the fused step traced (tools/trace). From the repository
# root on the GPU machine (after `source .device/env.sh`):
#   tools/gpu/run_gemv_update.sh [stage ...]     (default: build test decode trace)
# Environment: as tools/gpu/stages.sh says; GANNET_AB_ROUNDS (default 2).
source "$(dirname "$0")/stages.sh"
gpu_header "GEMV residual update A/B"
targets=(cuda_ops_test cuda_graph_test cuda_runner_test gannet-decode-bench gannet_kernel_trace)

stage_build() { gpu_build "${targets[@]}"; }
stage_test() {
  gpu_ctest 900 "tests passed|tests failed|Failed|FAILED|\*\*\*" cuda_ops_test cuda_graph_test cuda_runner_test
}
decode() {  # decode ON|OFF ARGS...
  local flag=$1
  shift
  note "-- update $flag: $*"
  GANNET_GEMV_UPDATE=$([ "$flag" = on ] && echo 1 || echo 0) timeout 240 \
    "$build/bench/runner/gannet-decode-bench" "$@" 2>&1 | grep -E "^ +batch" | tee -a "$summary"
}
stage_decode() {
  local r m
  for r in $(seq "${GANNET_AB_ROUNDS:-2}"); do
    for m in e2b e4b 26b-a4b; do
      decode off --model dummy:$m --batches 1,2,4 --context 1000 --steps 30
      decode on --model dummy:$m --batches 1,2,4 --context 1000 --steps 30
    done
  done
}
stage_trace() {
  local m
  for m in e2b e4b; do
    CUDA_INJECTION64_PATH="$build/tools/trace/libgannet_kernel_trace.so" GANNET_KERNEL_TRACE="$out/trace.csv" \
      timeout 240 "$build/bench/runner/gannet-decode-bench" --model dummy:$m --batches 1 --context 1000 \
      --steps 20 > /dev/null 2>&1
    note "-- traced $m, update on"
    python3 tools/trace/critical_path.py "$out/trace.csv" --top 12 | tee -a "$summary"
  done
  rm -f "$out/trace.csv"
}
gpu_run_stages build test decode trace -- "$@"
