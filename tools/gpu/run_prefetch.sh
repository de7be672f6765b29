#!/bin/bash
# Weight prefetch into the L2 during decode steps (lib/runner/weight_prefetch.h) on one Hopper
# GPU: its tests, and decode steps at several distances ahead (GANNET_PREFETCH_MB; 0 = off) in
# the same build, interleaved. From the repository root on the GPU machine (after
# `source .device/env.sh`):
#   tools/gpu/run_prefetch.sh [stage ...]   (default: build test sweep)
#   build     sm_90 Release build of the kernel/runner/graph tests and gannet-decode-bench
#   test      cuda_ops_test, cuda_graph_test, cuda_runner_test
#   sweep     gannet-decode-bench for each model in GANNET_SWEEP_MODELS (default e2b e4b 26b-a4b)
#             at batches 1, 4, 16 and for each distance in GANNET_SWEEP_MB (default "0 16 24 32");
#             31B at batches 1 and 64 with 0 and the default distance when 31b is listed
#   memcheck  compute-sanitizer memcheck on the prefetch and graph cases of cuda_ops_test
# Environment: as tools/gpu/stages.sh says.
source "$(dirname "$0")/stages.sh"
gpu_header "weight prefetch"
targets=(cuda_ops_test cuda_graph_test cuda_runner_test gannet-decode-bench)

stage_build() { gpu_build "${targets[@]}"; }
stage_test() {
  gpu_ctest 900 "tests passed|tests failed|Failed|FAILED|\*\*\*" cuda_ops_test cuda_graph_test cuda_runner_test
}
decode_at() {  # decode_at MB ARGS...
  local mb=$1
  shift
  note "-- GANNET_PREFETCH_MB=${mb:-default} $*"
  if [ -n "$mb" ]; then
    GANNET_PREFETCH_MB=$mb timeout 240 "$build/bench/runner/gannet-decode-bench" "$@"
  else
    timeout 240 "$build/bench/runner/gannet-decode-bench" "$@"
  fi 2>&1 | grep -E "^ +batch" | tee -a "$summary"
}
stage_sweep() {
  local m mb
  for m in ${GANNET_SWEEP_MODELS:-e2b e4b 26b-a4b}; do
    if [ "$m" = 31b ]; then
      for mb in 0 ""; do decode_at "$mb" --model dummy:31b --batches 1,64 --context 1500 --steps 15; done
      continue
    fi
    for mb in ${GANNET_SWEEP_MB:-0 16 24 32}; do
      decode_at "$mb" --model dummy:$m --batches 1,4,16 --context 1000 --steps 30
    done
  done
}
stage_memcheck() {
  timeout 500 compute-sanitizer --tool memcheck --error-exitcode 1 --leak-check no \
    "$build/tests/backend/cuda_ops_test" --gtest_filter='*Prefetch*:*Chain*:*Graph*' > "$out/memcheck.log" 2>&1
  local rc=$?
  tail -6 "$out/memcheck.log"
  return $rc
}
gpu_run_stages build test sweep -- "$@"
