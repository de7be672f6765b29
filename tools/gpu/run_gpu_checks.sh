#!/bin/bash
# Builds gannet's CUDA backend tests and kernel benchmarks for sm_90 and runs them on a GPU:
#   build     cmake -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90, only the targets below
#   test      the gpu-labelled ctest tests (plus the registry and CPU-sampling tests)
#   memcheck  compute-sanitizer --tool memcheck on the decode and prefill attention tests
#   bench     the attention and GEMM benchmarks (console tables + JSON)
#   ncu       Nsight Compute counters of the hd512 decode / prefill kernels (not in the default set)
# Usage, from the repository root on the GPU machine (after `source .device/env.sh` there):
#   tools/gpu/run_gpu_checks.sh [stage ...]      (default: build test memcheck bench)
# Environment: GANNET_GPU_BUILD (build dir, default /tmp/gannet-gpu), OUT (log dir, default
# /tmp/gannet-gpu-out), GANNET_COMMIT (recorded in the logs; the GPU copy has no .git),
# GANNET_BENCH_FILTER (a --benchmark_filter regex), GANNET_MEMCHECK_FILTER (a --gtest_filter).
set -uo pipefail
build=${GANNET_GPU_BUILD:-/tmp/gannet-gpu}
out=${OUT:-/tmp/gannet-gpu-out}
mkdir -p "$out"
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build test memcheck bench)
summary="$out/summary.txt"
status=0
note() { echo "$*" | tee -a "$summary"; }

note "== gannet GPU checks: commit ${GANNET_COMMIT:-unknown}, $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$summary"

tests=(cuda_attention_test cuda_ops_test cuda_runner_test kernel_registry_test cpu_sample_test)
benches=(attention_bench gemm_bench)

for stage in "${stages[@]}"; do
  t0=$(date +%s)
  case "$stage" in
    build)
      cmake -S . -B "$build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
        -DGANNET_BUILD_EXAMPLES=OFF > "$out/build.log" 2>&1 &&
      ninja -C "$build" -j"$(nproc)" "${tests[@]}" "${benches[@]}" >> "$out/build.log" 2>&1
      rc=$?
      [ $rc -ne 0 ] && tail -40 "$out/build.log"
      ;;
    test)
      (cd "$build" && ctest -R '^(cuda_attention_test|cuda_ops_test|cuda_runner_test|kernel_registry_test|cpu_sample_test)$' \
        -V --timeout 240) > "$out/ctest.log" 2>&1
      rc=$?
      grep -E "tests passed|tests failed|Failed|\*\*\*|SKIPPED|PASSED|FAILED|note \]" "$out/ctest.log" | tail -40
      ;;
    memcheck)
      filter=${GANNET_MEMCHECK_FILTER:-'*decode_8q2kv_hd256_window512*:*decode_sliding_minus_one_holes*:*decode_q2_hd512*:*mixed_8q2kv_hd256*:*mixed_8q2kv_hd512*'}
      timeout 300 compute-sanitizer --tool memcheck --error-exitcode 1 --leak-check no \
        "$build/tests/backend/cuda_attention_test" --gtest_filter="$filter" > "$out/memcheck.log" 2>&1
      rc=$?
      tail -15 "$out/memcheck.log"
      ;;
    bench)
      rc=0
      : > "$out/bench.txt"
      for b in "${benches[@]}"; do
        timeout 200 "$build/bench/kernels/$b" --benchmark_out="$out/$b.json" --benchmark_out_format=json \
          ${GANNET_BENCH_FILTER:+--benchmark_filter="$GANNET_BENCH_FILTER"} >> "$out/bench.txt" 2>&1 || rc=$?
      done
      grep -E "references" "$out/bench.txt"
      ;;
    ncu)
      # Hardware counters of the hd512 decode kernels (and their split merge) at batch 1 and 16,
      # 8k context: the shape furthest from the copy bandwidth.
      rc=0
      for f in 'BM_AttentionDecode/hd:512/nkv:4/window:0/batch:1/ctx:8192' \
               'BM_AttentionDecode/hd:512/nkv:4/window:0/batch:16/ctx:8192'; do
        timeout 75 ncu --kernel-name regex:'Flash(Decode|Prefill|Combine)' --launch-count 2 \
          --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
          --section WarpStateStats --section LaunchStats --section SchedulerStats \
          "$build/bench/kernels/attention_bench" --benchmark_filter="^$f/" >> "$out/ncu.txt" 2>&1 || rc=$?
      done
      grep -E "Memory Throughput|DRAM Throughput|Duration|Achieved Occupancy|Registers Per|Compute \(SM\)" "$out/ncu.txt" | head -40
      ;;
    *) echo "unknown stage $stage"; rc=2 ;;
  esac
  note "== stage $stage: rc=$rc ($(( $(date +%s) - t0 )) s)"
  [ $rc -ne 0 ] && status=1
  [ "$stage" = build ] && [ $rc -ne 0 ] && break
done
exit $status
