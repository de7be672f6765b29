#!/bin/bash
# Builds gannet's CUDA backend tests and kernel benchmarks for sm_90 and runs them on a GPU:
#   build     cmake -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90, only the targets below
#   test      the gpu-labelled ctest tests (plus the registry and CPU-sampling tests)
#   memcheck  compute-sanitizer --tool memcheck on the decode and prefill attention tests
#   bench     the attention and GEMM benchmarks (console tables + JSON)
#   ncu       Nsight Compute counters of the hd512 decode / prefill kernels (not in the default set)
# Usage, from the repository root on the GPU machine (after `source .device/env.sh` there):
#   tools/gpu/run_gpu_checks.sh [stage ...]      (default: build test memcheck bench)
# Environment: as tools/gpu/stages.sh says, and GANNET_BENCH_FILTER (a --benchmark_filter regex),
# GANNET_MEMCHECK_FILTER (a --gtest_filter).
source "$(dirname "$0")/stages.sh"
gpu_header "GPU checks" clocks.max.sm
tests=(cuda_attention_test cuda_ops_test cuda_runner_test kernel_registry_test cpu_sample_test)
benches=(attention_bench gemm_bench)

stage_build() { gpu_build "${tests[@]}" "${benches[@]}"; }
stage_test() { gpu_ctest 240 "tests passed|tests failed|Failed|\*\*\*|SKIPPED|PASSED|FAILED|note \]" "${tests[@]}"; }
stage_memcheck() {
  local filter=${GANNET_MEMCHECK_FILTER:-'*decode_8q2kv_hd256_window512*:*decode_sliding_minus_one_holes*:*decode_q2_hd512*:*mixed_8q2kv_hd256*:*mixed_8q2kv_hd512*'}
  gpu_memcheck 300 15 "$filter"
}
stage_bench() {
  local rc=0 b f
  : > "$out/bench.txt"
  for b in "${benches[@]}"; do
    timeout 200 "$build/bench/kernels/$b" --benchmark_out="$out/$b.json" --benchmark_out_format=json \
      ${GANNET_BENCH_FILTER:+--benchmark_filter="$GANNET_BENCH_FILTER"} >> "$out/bench.txt" 2>&1 || rc=$?
  done
  grep -E "references" "$out/bench.txt"
  return $rc
}
stage_ncu() {
  # Hardware counters of the hd512 decode kernels (and their split merge) at batch 1 and 16,
  # 8k context: the shape furthest from the copy bandwidth.
  local rc=0 f
  for f in 'BM_AttentionDecode/hd:512/nkv:4/window:0/batch:1/ctx:8192' \
           'BM_AttentionDecode/hd:512/nkv:4/window:0/batch:16/ctx:8192'; do
    timeout 75 ncu --kernel-name regex:'Flash(Decode|Prefill|Combine)' --launch-count 2 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
      --section WarpStateStats --section LaunchStats --section SchedulerStats \
      "$build/bench/kernels/attention_bench" --benchmark_filter="^$f/" >> "$out/ncu.txt" 2>&1 || rc=$?
  done
  grep -E "Memory Throughput|DRAM Throughput|Duration|Achieved Occupancy|Registers Per|Compute \(SM\)" "$out/ncu.txt" | head -40
  return $rc
}
gpu_run_stages build test memcheck bench -- "$@"
