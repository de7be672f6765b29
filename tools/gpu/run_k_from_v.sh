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
# Environment: as tools/gpu/stages.sh says.
source "$(dirname "$0")/stages.sh"
gpu_header "single-store K=V"
tests=(cuda_attention_test cuda_ops_test cuda_runner_test cuda_graph_test capi_gpu_test)
tools=(gannet-decode-bench gannet-serving-bench)
decode() { timeout 200 "$build/bench/runner/gannet-decode-bench" --random-kv --steps 20 "$@" 2>/dev/null; }

stage_build() { gpu_build "${tests[@]}" "${tools[@]}"; }
stage_test() { gpu_ctest 400 "tests passed|tests failed|Failed|\*\*\*|FAILED|Failure" "${tests[@]}"; }
stage_memcheck() { gpu_memcheck 400 6 '*kfromv_decode_26b*:*kfromv_verify_31b_q4*:*kfromv_mixed_26b*'; }
stage_decode() {
  local rc=0 kv store
  for kv in bf16 fp8; do
    for store in "" --kv-separate-k-eq-v; do
      echo "== 31b kv=$kv ${store:-single}" >> "$out/decode.txt"
      decode --model dummy:31b --batches 1,16,64 --context 1500 --kv $kv $store | tee -a "$out/decode.txt" || rc=$?
      decode --model dummy:31b --batches 1 --context 32768 --kv $kv $store | tee -a "$out/decode.txt" || rc=$?
      echo "== 26b-a4b kv=$kv ${store:-single}" >> "$out/decode.txt"
      decode --model dummy:26b-a4b --batches 64 --context 1500 --kv $kv $store | tee -a "$out/decode.txt" || rc=$?
    done
  done
  return $rc
}
stage_capacity() {
  local rc=0 v kv store
  for v in 31b 26b-a4b; do
    for kv in bf16 fp8; do
      for store in "" --kv-separate-k-eq-v; do
        echo "$v kv=$kv ${store:-single}" >> "$out/capacity.txt"
        timeout 200 "$build/bench/serving/gannet-serving-bench" --model dummy:$v --input-len 1000 \
          --output-len 1000 --kv-cache-dtype $kv --capacity-only $store 2>/dev/null | tee -a "$out/capacity.txt" || rc=$?
      done
    done
  done
  return $rc
}
gpu_run_stages build test decode capacity -- "$@"
