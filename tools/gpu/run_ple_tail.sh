#!/bin/bash
# The PLE tail of E2B/E4B layers as one cluster kernel (kernels/ple/ple_tail.cu) on one GPU. From
# the repository root on the GPU machine (after `source .device/env.sh`):
#   tools/gpu/run_ple_tail.sh [stage ...]   (default: build test memcheck decode)
#   build     sm_90 Release build of the targets below
#   test      cuda_ple_tail_test (the op against its separate ops and the CPU; E2B/E4B runners
#             fused against split), cuda_ops_test, cuda_runner_test, cuda_graph_test
#   memcheck  compute-sanitizer on cuda_ple_tail_test's op cases
#   decode    gannet-decode-bench, GANNET_PLE_TAIL=0 (the separate ops) against the kernel,
#             interleaved: E2B and E4B at batch 1, 2 and 4, context 1000
# Environment: as tools/gpu/stages.sh says.
source "$(dirname "$0")/stages.sh"
gpu_header "PLE tail"
tests=(cuda_ple_tail_test cuda_ops_test cuda_runner_test cuda_graph_test)

stage_build() { gpu_build "${tests[@]}" gannet-decode-bench; }
stage_test() { gpu_ctest 600 "tests passed|tests failed|Failed|\*\*\*|FAILED|Failure|note" "${tests[@]}"; }
stage_memcheck() {
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 1 --leak-check no \
    "$build/tests/backend/cuda_ple_tail_test" --gtest_filter='CudaPleTailTest.*' > "$out/memcheck.log" 2>&1
  local rc=$?
  tail -6 "$out/memcheck.log"
  return $rc
}
stage_decode() {
  local rc=0 v
  for v in e2b e4b; do
    gpu_decode_env_ab GANNET_PLE_TAIL --model dummy:$v --batches 1,2,4 --context 1000 --steps 40 || rc=$?
  done
  return $rc
}
gpu_run_stages build test memcheck decode -- "$@"
