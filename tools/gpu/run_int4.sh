#!/bin/bash
# The W4A16 int4 kernels (kernels/quant, docs/int4-kernels.md) on one GPU: every kernel against the
# CPU reference, compute-sanitizer on them, and the benchmark against the bf16 linear layer. From
# the repository root on the GPU machine:
#   tools/gpu/run_int4.sh [stage ...]   (default: build test memcheck bench)
#   build     sm_90 Release build (cmake -G Ninja) of the int4 tests and benchmark only
#   test      cuda_int4_test (MMA GEMV, MMA GEMM, SIMT = the Volta path, dequantize, registry
#             launches), int4_repack_test, kernel_registry_test
#   memcheck  compute-sanitizer memcheck on cuda_int4_test (out-of-bounds reads of the tiles)
#   bench     int4_bench: Gemma-4 projection shapes at M = 1, 4, 8, 16, 64, 2048, int4 (the
#             registry's choice, then each kernel alone) next to bf16; us, GB/s, frac_copy_bw
# Logs under $OUT (default /tmp/gannet-gpu-out): summary.txt, build.log, ctest.log, memcheck.log,
# int4_bench.txt and int4_bench.json. Environment: as tools/gpu/stages.sh says, and
# INT4_BENCH_FILTER (a --benchmark_filter regex, e.g. 'BM_Int4/shape:7/' or '/m:1/'). Each stage
# stays under 10 minutes; a device call of that limit runs `build`, then `test memcheck`, then
# `bench` (the build directory persists while the machine is held).
source "$(dirname "$0")/stages.sh"
gpu_header "int4 W4A16 kernels"
tests=(cuda_int4_test int4_repack_test kernel_registry_test)

stage_build() { gpu_build "${tests[@]}" int4_bench; }
stage_test() { gpu_ctest 540 "tests passed|tests failed|Failed|FAILED|Failure|\*\*\*" "${tests[@]}"; }
stage_memcheck() {
  timeout 540 compute-sanitizer --tool memcheck --error-exitcode 1 --leak-check no \
    "$build/tests/kernels/cuda_int4_test" --gtest_filter='-*LongK*' > "$out/memcheck.log" 2>&1
  local rc=$?
  tail -8 "$out/memcheck.log"
  return $rc
}
stage_bench() {
  timeout 540 "$build/bench/kernels/int4_bench" --benchmark_counters_tabular=true \
    ${INT4_BENCH_FILTER:+--benchmark_filter="$INT4_BENCH_FILTER"} \
    --benchmark_out="$out/int4_bench.json" --benchmark_out_format=json 2>&1 |
    grep --line-buffered -v "^gannet \[I\]" > "$out/int4_bench.txt"
  local rc=${PIPESTATUS[0]}
  grep -E "^references|^BM_" "$out/int4_bench.txt" | tee -a "$summary" | head -400
  return $rc
}
gpu_run_stages build test memcheck bench -- "$@"
