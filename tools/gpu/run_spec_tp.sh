#!/bin/bash
# Speculative decoding with tensor parallelism on GPUs (issue 54 items 1-2): builds the touched
# targets for sm_90 and runs
#   - on one GPU (label gpu): CudaTpTest.* of cuda_tp_test, among them the drafter of a one-rank
#     NCCL group against the plain drafter (OneGpuDrafterThroughTheNcclPathDraftsAsThePlainDrafter);
#   - on 2+ GPUs (label multigpu, skipped below 2): multigpu_spec_engine_test (the TP 2 engine with
#     drafts against TP 2 without, the four tiny pairs and the trained pair) and the multigpu TP
#     tests (cuda_tp_test *MultiGpu*, tp_multiprocess_test);
#   - the CPU-rank tests of the same code (tp_drafter_test, tp_spec_engine_test).
# Usage, from the repository root: tools/gpu/run_spec_tp.sh [build dir, default /tmp/gannet-spec-tp]
# Prints each test's result lines; exit status non-zero when any test failed.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
build=${1:-/tmp/gannet-spec-tp}
export GANNET_TEST_DATA=${GANNET_TEST_DATA:-$PWD/tests/data}
cmake -S . -B "$build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  > /tmp/gannet-spec-tp-build.log 2>&1 &&
  ninja -C "$build" -j"$(nproc)" cuda_tp_test spec_engine_gpu_test tp_multiprocess_test \
    tp_drafter_test tp_spec_engine_test >> /tmp/gannet-spec-tp-build.log 2>&1 ||
  { tail -30 /tmp/gannet-spec-tp-build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
status=0
run() {
  local name=$1
  shift
  local t0=$(date +%s)
  timeout 900 "$@" > "/tmp/gannet-spec-tp-$name.log" 2>&1
  local rc=$?
  grep -hE "^\[ +(OK|FAILED|SKIPPED) +\]|^\[  (PASSED|FAILED) |parts at|drafts [0-9]+|Failure" \
    "/tmp/gannet-spec-tp-$name.log" | tail -40 | sed "s/^/[$name] /"
  echo "[$name] exit $rc in $(( $(date +%s) - t0 )) s"
  [ $rc -eq 0 ] || status=1
}
run cuda_tp_test "$build/tests/parallel/cuda_tp_test" --gtest_filter='CudaTpTest.*'
run multigpu_spec_engine "$build/tests/spec/spec_engine_gpu_test" --gtest_filter='*MultiGpu*'
run multigpu_tp "$build/tests/parallel/cuda_tp_test" --gtest_filter='*MultiGpu*'
run tp_multiprocess "$build/tests/parallel/tp_multiprocess_test"
run tp_drafter "$build/tests/parallel/tp_drafter_test"
run tp_spec_engine "$build/tests/parallel/tp_spec_engine_test"
exit $status
