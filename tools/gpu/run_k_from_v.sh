#!/bin/bash
# Single-store K=V (one cached array on the K=V full layers of 31B and 26B-A4B, K derived in the
# attention kernels) on one GPU: kernels against the CPU reference, decode bandwidth and capacity,
# against the separate K and V store. From the repository root on the GPU machine (after
# `source .device/env.sh`):
#   tools/gpu/run_k_from_v.sh [stage ...]   (default: build test decode capacity)
#   build     sm_90 Release build of the targets below
#   test      cuda_attention_test (every entry, kfromv_* cases, bf16 and FP8), cuda_ops_test, the
#             runner, graph and C ABI GPU tests
#   memcheck  compute-sanitizer on the kfromv attention cases
#   decode    gannet-decode-bench, one array vs two (--kv-separate-k-eq-v), bf16 and FP8, random
#             KV: 31B batch 1/16/64 at 1500, batch 1 at 32k; 26B-A4B batch 64 at 1500
#   capacity  gannet-serving-bench --capacity-only chat 1000/1000, 31B and 26B-A4B, bf16 and FP8,
#             one array vs two
# Environment: GANNET_GPU_BUILD (default /tmp/gannet-gpu), OUT (default /tmp/gannet-gpu-out),
# GANNET_COMMIT (recorded; the GPU copy has no .git).
set -uo pipefail
build=${GANNET_GPU_BUILD:-/tmp/gannet-gpu}
out=${OUT:-/tmp/gannet-gpu-out}
mkdir -p "$out"
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build test decode capacity)
summary="$out/summary.txt"
status=0
note() { echo "$*" | tee -a "$summary"; }
note "== gannet single-store K=V: commit ${GANNET_COMMIT:-unknown}, $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$summary"
tests=(cuda_attention_test cuda_ops_test cuda_runner_test cuda_graph_test capi_gpu_test)
tools=(gannet-decode-bench gannet-serving-bench)
decode() { timeout 200 "$build/bench/runner/gannet-decode-bench" --random-kv --steps 20 "$@" 2>/dev/null; }
for stage in "${stages[@]}"; do
  t0=$(date +%s)
  case "$stage" in
    build)
      cmake -S . -B "$build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
        -DGANNET_BUILD_EXAMPLES=OFF > "$out/build.log" 2>&1 &&
      ninja -C "$build" -j"$(nproc)" "${tests[@]}" "${tools[@]}" >> "$out/build.log" 2>&1
      rc=$?
      [ $rc -ne 0 ] && tail -40 "$out/build.log"
      ;;
    test)
      (cd "$build" && ctest -R "^($(IFS='|'; echo "${tests[*]}"))$" -V --timeout 400) > "$out/ctest.log" 2>&1
      rc=$?
      grep -E "tests passed|tests failed|Failed|\*\*\*|FAILED|Failure" "$out/ctest.log" | tail -30
      ;;
    memcheck)
      timeout 400 compute-sanitizer --tool memcheck --error-exitcode 1 --leak-check no \
        "$build/tests/backend/cuda_attention_test" \
        --gtest_filter='*kfromv_decode_26b*:*kfromv_verify_31b_q4*:*kfromv_mixed_26b*' \
        > "$out/memcheck.log" 2>&1
      rc=$?
      tail -6 "$out/memcheck.log"
      ;;
    decode)
      rc=0
      for kv in bf16 fp8; do
        for store in "" --kv-separate-k-eq-v; do
          echo "== 31b kv=$kv ${store:-single}" >> "$out/decode.txt"
          decode --model dummy:31b --batches 1,16,64 --context 1500 --kv $kv $store | tee -a "$out/decode.txt" || rc=$?
          decode --model dummy:31b --batches 1 --context 32768 --kv $kv $store | tee -a "$out/decode.txt" || rc=$?
          echo "== 26b-a4b kv=$kv ${store:-single}" >> "$out/decode.txt"
          decode --model dummy:26b-a4b --batches 64 --context 1500 --kv $kv $store | tee -a "$out/decode.txt" || rc=$?
        done
      done
      ;;
    capacity)
      rc=0
      for v in 31b 26b-a4b; do
        for kv in bf16 fp8; do
          for store in "" --kv-separate-k-eq-v; do
            echo "$v kv=$kv ${store:-single}" >> "$out/capacity.txt"
            timeout 200 "$build/bench/serving/gannet-serving-bench" --model dummy:$v --input-len 1000 \
              --output-len 1000 --kv-cache-dtype $kv --capacity-only $store 2>/dev/null | tee -a "$out/capacity.txt" || rc=$?
          done
        done
      done
      ;;
    *) echo "unknown stage $stage"; rc=2 ;;
  esac
  note "stage $stage: rc=$rc, $(( $(date +%s) - t0 )) s"
  [ $rc -ne 0 ] && status=1
done
exit $status
