#!/bin/bash
# The image-block attention mask (issue 59 item 3, docs/vision.md) on one GPU. From the repository
# root on the GPU machine (after `source .device/env.sh`):
#   tools/gpu/run_vision_mask.sh [stage ...]   (default: build test)
#   build     sm_90 Release build of the targets below
#   test      cuda_vision_mask_test (every entry that declares the mask capability, forced, against
#             the CPU reference, bf16 and FP8 KV; the others refused; the backend's own choice),
#             kernel_registry_test, and cuda_attention_test / cuda_runner_test (the kernels'
#             unmasked paths did not change)
#   memcheck  compute-sanitizer on cuda_vision_mask_test (the mask reads past a query's position)
# Environment: as tools/gpu/stages.sh says.
source "$(dirname "$0")/stages.sh"
gpu_header "vision mask"
tests=(cuda_vision_mask_test kernel_registry_test cuda_attention_test cuda_runner_test)

stage_build() { gpu_build "${tests[@]}"; }
stage_test() { gpu_ctest 900 "tests passed|tests failed|Failed|FAILED|Failure|\*\*\*" "${tests[@]}"; }
stage_memcheck() {
  timeout 600 compute-sanitizer --tool memcheck --error-exitcode 1 --leak-check no \
    "$build/tests/backend/cuda_vision_mask_test" > "$out/memcheck.log" 2>&1
  local rc=$?
  tail -8 "$out/memcheck.log"
  return $rc
}
gpu_run_stages build test -- "$@"
