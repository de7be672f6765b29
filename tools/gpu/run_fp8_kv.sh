#!/bin/bash
# The FP8 KV cache on one GPU: kernels against the CPU reference, accuracy against bf16 KV, decode
# bandwidth and capacity. From the repository root on the GPU machine (after
# `source .device/env.sh`):
#   tools/gpu/run_fp8_kv.sh [stage ...]   (default: build test accuracy decode capacity)
#   build     sm_90 Release build of the targets below
#   test      cuda_attention_test (every entry, bf16 and FP8 caches), cuda_ops_test, the runner,
#             graph and engine GPU tests
#   memcheck  compute-sanitizer on the FP8 attention cases
#   accuracy  gannet-kv-accuracy on the dummy full-size variants (--tokens, default 1000) and the
#             tiny checkpoints
#   decode    gannet-decode-bench bf16 vs FP8 (random KV): 31B batch 1/16/64 at 1500, batch 1 at 32k and 100k
#   capacity  gannet-serving-bench chat 1000/1000 for every dummy variant, bf16 and FP8: the KV
#             line (how many such sequences the memory holds), --capacity-only
# Environment: as tools/gpu/stages.sh says, and TOKENS (accuracy continuation length).
source "$(dirname "$0")/stages.sh"
gpu_header "FP8 KV"
tests=(cuda_attention_test cuda_ops_test cuda_runner_test cuda_graph_test kernel_registry_test
       cpu_fp8_kv_test)
tools=(gannet-kv-accuracy gannet-decode-bench gannet-serving-bench)

stage_build() { gpu_build "${tests[@]}" "${tools[@]}"; }
stage_test() { gpu_ctest 400 "tests passed|tests failed|Failed|\*\*\*|FAILED|Failure" "${tests[@]}"; }
stage_memcheck() {
  gpu_memcheck 400 6 '*decode_8q2kv_hd256_window512*fp8*:*decode_sliding_minus_one_holes*fp8*:*mixed_8q2kv_hd512*fp8*:*verify_31b_sliding_q4*fp8*'
}
stage_accuracy() {
  local rc=0 m
  for m in dummy:31b dummy:26b-a4b dummy:e4b dummy:e2b tests/data/tiny/trained; do
    timeout 300 "$build/bench/runner/gannet-kv-accuracy" --model "$m" --backend cuda \
      --prompt-len 100 --tokens "${TOKENS:-1000}" 2>/dev/null | tee -a "$out/accuracy.txt" || rc=$?
  done
  return $rc
}
stage_decode() {
  local rc=0 kv ctx
  for kv in bf16 fp8; do
    timeout 200 "$build/bench/runner/gannet-decode-bench" --model dummy:31b --batches 1,16,64 \
      --context 1500 --steps 20 --kv $kv --random-kv 2>/dev/null | tee -a "$out/decode.txt" || rc=$?
    for ctx in 32768 100000; do
      timeout 200 "$build/bench/runner/gannet-decode-bench" --model dummy:31b --batches 1 \
        --context $ctx --steps 20 --kv $kv --random-kv 2>/dev/null | tee -a "$out/decode.txt" || rc=$?
    done
  done
  return $rc
}
stage_capacity() {
  local rc=0 v kv
  for v in 31b 26b-a4b e4b e2b; do
    for kv in bf16 fp8; do
      echo "$v kv=$kv" >> "$out/capacity.txt"
      timeout 200 "$build/bench/serving/gannet-serving-bench" --model dummy:$v --input-len 1000 \
        --output-len 1000 --kv-cache-dtype $kv --capacity-only 2>/dev/null | tee -a "$out/capacity.txt" || rc=$?
    done
  done
  return $rc
}
gpu_run_stages build test accuracy decode capacity -- "$@"
