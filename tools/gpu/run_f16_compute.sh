#!/bin/bash
# The fp16 compute path (compute_dtype f16: what a V100 runs by default) on one Hopper GPU: the
# kernels and the tiny models against the CPU reference, agreement with the bf16 path, and the
# engine end to end. From the repository root on the GPU machine (after `source .device/env.sh`):
#   tools/gpu/run_f16_compute.sh [stage ...]   (default: build test accuracy engine)
#   build     sm_90 Release build of the targets below (the Volta kernels as compute_75 PTX: JIT)
#   test      cuda_attention_test (the f16io entries with fp16 q/out), cuda_ops_test (f16 Linear
#             and MoE), cuda_runner_test (every tiny variant on the fp16 path against the f32 CPU),
#             kernel_registry_test
#   accuracy  gannet-kv-accuracy --compare f16-compute: the tiny checkpoints (--tokens TOKENS,
#             default 500) and the dummy full-size variants (200 tokens)
#   engine    gannet-serving-bench with --compute-dtype f16 on dummy E2B and 26B-A4B (CUDA graphs,
#             batching, the MoE and PLE paths), and E2B with its MTP drafter
#   memcheck  compute-sanitizer on the f16 tiny-model runner tests
# Environment: as tools/gpu/stages.sh says, and TOKENS.
source "$(dirname "$0")/stages.sh"
gpu_header "f16 compute"
tests=(cuda_attention_test cuda_ops_test cuda_runner_test kernel_registry_test)
tools=(gannet-kv-accuracy gannet-serving-bench)

stage_build() { gpu_build "${tests[@]}" "${tools[@]}"; }
stage_test() { gpu_ctest 500 "tests passed|tests failed|Failed|\*\*\*|FAILED|Failure|f16.*note" "${tests[@]}"; }
stage_accuracy() {
  local rc=0 m
  for m in tests/data/tiny/31b tests/data/tiny/26b-a4b tests/data/tiny/e4b tests/data/tiny/e2b \
           tests/data/tiny/trained; do
    timeout 200 "$build/bench/runner/gannet-kv-accuracy" --model "$m" --backend cuda \
      --compare f16-compute --prompt-len 64 --tokens "${TOKENS:-500}" 2>/dev/null |
      tee -a "$out/accuracy.txt" || rc=$?
  done
  for m in dummy:e2b dummy:e4b dummy:26b-a4b dummy:31b; do
    timeout 300 "$build/bench/runner/gannet-kv-accuracy" --model "$m" --backend cuda \
      --compare f16-compute --prompt-len 100 --tokens 200 2>/dev/null |
      tee -a "$out/accuracy.txt" || rc=$?
  done
  return $rc
}
stage_engine() {
  local rc=0 v
  for v in e2b 26b-a4b; do
    timeout 200 "$build/bench/serving/gannet-serving-bench" --model dummy:$v --input-len 500 \
      --output-len 100 --concurrency 8 --requests 16 --compute-dtype f16 2>&1 |
      tail -12 | tee -a "$out/engine.txt" || rc=$?
  done
  timeout 200 "$build/bench/serving/gannet-serving-bench" --model dummy:e2b --input-len 500 \
    --output-len 100 --concurrency 4 --requests 8 --compute-dtype f16 \
    --draft dummy:e2b-assistant 2>&1 | tail -12 | tee -a "$out/engine.txt" || rc=$?
  return $rc
}
stage_memcheck() { gpu_memcheck_runner 400 '*F16Compute*'; }
gpu_run_stages build test accuracy engine -- "$@"
