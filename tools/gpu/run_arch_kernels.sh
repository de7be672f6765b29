#!/bin/bash
# The per-architecture kernel entries (issue 16) on an H100/H200: the sm_90 wgmma prefill entries
# natively, and the sm_75 ones under JIT. The sm_75 (Turing) tensor-core
# entries' .cu files carry compute_75 PTX, which the driver JIT-compiles when a test forces them,
# so the Turing code paths (m16n8k8 fp16 MMAs, synchronous copies, single-stage tiles) run against
# the CPU reference here. No T4 was available: this checks their correctness, not Turing speed.
# From the repository root on the GPU machine (after `source .device/env.sh`):
#   tools/gpu/run_arch_kernels.sh [stage ...]   (default: build test e2e memcheck accuracy prefill)
#   build     sm_90 Release build of the targets below (the sm75 entries as PTX)
#   test      kernel_registry_test, cuda_attention_test (every entry forced, sm75 ones included),
#             cuda_ops_test (every MoE entry), cuda_runner_test
#   e2e       cuda_runner_test and capi_gpu_test with every op forced onto the sm75 entries
#   volta     the same forced onto the entries a V100 selects (sm70_*: m8n8k4 tensor-core attention
#             under JIT, the CUDA-core kernel where operands are unaligned, GEMVs, per-pair MoE
#             GEMVs at any token count)
#   memcheck  compute-sanitizer on the sm75, sm70 (m8n8k4) and sm90 (wgmma) attention entries
#             (GANNET_TEST_ENTRY_PREFIX=sm75_ / sm70_hd / sm90_)
#   accuracy  cuda_attention_test on the sm75 entries alone, then the sm70 and the sm90 ones, each
#             case's rel-L2 against the CPU reference per entry (<arch>_errors.txt)
#   prefill   attention_bench: every prefill entry's fraction of the GEMM rate at 8k/32k/128k
#             (batch 1, 31B's full and sliding layers), and 31B prefill tok/s at 32k context
# Environment: as tools/gpu/stages.sh says.
source "$(dirname "$0")/stages.sh"
gpu_header "per-architecture kernel entries"
tests=(kernel_registry_test cuda_attention_test cuda_ops_test cuda_runner_test capi_gpu_test)
tools=(attention_bench gannet-serving-bench)
sm75_entries=sm75_hd256_bf16_split,sm75_hd512_bf16_split,sm75_hd256_fp8_split,sm75_hd512_fp8_split
sm75_entries+=,sm75_hd256_bf16_prefill,sm75_hd512_bf16_prefill,sm75_hd256_fp8_prefill,sm75_hd512_fp8_prefill
sm75_entries+=,sm75_moe_grouped_bf16
sm70_entries=sm70_hd256_bf16_split,sm70_hd512_bf16_split,sm70_hd256_fp8_split,sm70_hd512_fp8_split
sm70_entries+=,sm70_hd256_bf16_prefill,sm70_hd512_bf16_prefill,sm70_hd256_fp8_prefill,sm70_hd512_fp8_prefill
sm70_entries+=,sm70_generic_bf16_decode,sm70_generic_bf16_prefill,sm70_generic_fp8_decode
sm70_entries+=,sm70_generic_fp8_prefill,sm70_gemv_bf16_m8,sm70_gemv_f32in_m8,sm70_moe_pair_gemv_any_bf16
# The fp16 compute path (a V100's default; the runner tests' F16Compute cases run it).
sm70_entries+=,sm70_hd256_bf16_split_f16io,sm70_hd512_bf16_split_f16io,sm70_hd256_fp8_split_f16io
sm70_entries+=,sm70_hd512_fp8_split_f16io,sm70_hd256_bf16_prefill_f16io,sm70_hd512_bf16_prefill_f16io
sm70_entries+=,sm70_hd256_fp8_prefill_f16io,sm70_hd512_fp8_prefill_f16io,sm70_generic_bf16_decode_f16io
sm70_entries+=,sm70_generic_bf16_prefill_f16io,sm70_generic_fp8_decode_f16io,sm70_generic_fp8_prefill_f16io
sm70_entries+=,sm70_gemv_f16_m8,sm70_gemv_f32in_f16_m8,sm70_moe_pair_gemv_f16,sm70_moe_pair_gemv_any_f16

stage_build() { gpu_build "${tests[@]}" "${tools[@]}"; }
stage_test() {
  gpu_ctest 600 "tests passed|tests failed|Failed|\*\*\*|FAILED|Failure" kernel_registry_test \
    cuda_attention_test cuda_ops_test cuda_runner_test
}
# forced_e2e ENTRIES PREFIX: cuda_runner_test and capi_gpu_test with every op forced onto ENTRIES.
forced_e2e() {
  local rc=0 t
  for t in backend/cuda_runner_test capi/capi_gpu_test; do
    GANNET_FORCE_KERNEL=$1 timeout 500 "$build/tests/$t" > "$out/e2e_$2_$(basename $t).log" 2>&1 || rc=$?
    grep -E "PASSED|FAILED|Failure" "$out/e2e_$2_$(basename $t).log" | tail -8
    grep -E "(attention\.(decode|prefill)|moe\.experts|linear\.gemv): $2" "$out/e2e_$2_$(basename $t).log" | sort -u | head -8
  done
  return $rc
}
stage_e2e() { forced_e2e "$sm75_entries" sm75; }
stage_volta() { forced_e2e "$sm70_entries" sm70; }
stage_memcheck() {
  local rc=0 prefix
  for prefix in sm75_ sm70_hd sm90_; do
    GANNET_TEST_ENTRY_PREFIX=$prefix gpu_memcheck 500 6 \
      '*decode_31b_full_hd512_bf16*:*prefill_31b_sliding_hd256*:*mixed_8q2kv_hd512*:*kfromv_verify_31b_q4*' || rc=$?
    cp "$out/memcheck.log" "$out/memcheck_${prefix%_}.log"
  done
  return $rc
}
stage_accuracy() {
  local rc=0 arch
  for arch in sm75 sm70 sm90; do
    GANNET_TEST_ENTRY_PREFIX=${arch}_ timeout 500 "$build/tests/backend/cuda_attention_test" \
      --gtest_output=xml:"$out/${arch}_attention.xml" > "$out/accuracy_$arch.log" 2>&1 || rc=$?
    grep -oE "[a-z0-9_]+/${arch}_[a-z0-9_/]+\" value=\"[^\"]+" "$out/${arch}_attention.xml" |
      sed 's/" value="/ /' > "$out/${arch}_errors.txt"
    note "$arch entry checks: $(wc -l < "$out/${arch}_errors.txt"), worst rel-L2: $(sort -k2 -g "$out/${arch}_errors.txt" | tail -1)"
    grep -E "PASSED|FAILED" "$out/accuracy_$arch.log" | tail -3
  done
  return $rc
}
stage_prefill() {
  timeout 400 "$build/bench/kernels/attention_bench" --benchmark_filter=BM_AttentionPrefillEntry \
    --benchmark_counters_tabular=true 2>/dev/null | tee "$out/prefill_entries.txt" | grep -vE "no such entry"
  local rc=${PIPESTATUS[0]}
  timeout 180 "$build/bench/serving/gannet-serving-bench" --model dummy:31b --input-len 32768 \
    --output-len 1 --concurrency 1 --requests 2 --max-model-len 33024 2>/dev/null |
    tee "$out/prefill_31b_32k.txt" | tail -12
  return $(( rc | PIPESTATUS[0] ))
}
gpu_run_stages build test e2e memcheck accuracy prefill -- "$@"
