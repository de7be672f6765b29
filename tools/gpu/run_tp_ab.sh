#!/bin/bash
# Tensor-parallel decode against a baseline commit, built and run side by side on one machine of
# 2+ GPUs (session 18: the custom all-reduce launched with PDL). From the repository root on the
# GPU machine, after `source .device/env.sh`; the baseline from tools/gpu/make_base.sh <commit>
# (carry ".base"):
#   tools/gpu/run_tp_ab.sh [stage ...]   (default: build base test decode)
#   build     this tree's decode and all-reduce benches and the all-reduce / TP tests (sm_90 Release)
#   base      the same benches from .base/src.tar.gz
#   test      cuda_custom_allreduce_test (all ranks on one GPU) and cuda_tp_test's multi-GPU and
#             one-GPU cases, tp_multiprocess_test and cuda_custom_allreduce_ipc_test
#   single    the single-GPU kernel and runner tests (GEMV, attention, graphs), on the last GPU
#   small     E2B, E4B and 26B-A4B decode at batch 1 and 4 on GPU 0, both builds
#   allreduce gannet-allreduce-bench at TP=GANNET_TP, both builds, NCCL and the default (auto)
#   decode    31B (batch GANNET_AB_BATCHES, default 1,16) and 26B-A4B (batch 1) at TP=GANNET_TP
#             (default 2), both builds, twice for 31B; then this build at TP=1 for the ratio
#   decode1   31B at TP=1 (GANNET_AB_BATCHES), both builds, on GPU 0
#   sweep     attention_bench's split sweeps at 24-80 sequences, context 1500 (31B's layers at
#             TP=1 and one rank of TP=2), both builds, on GPU 0
#   memcheck  compute-sanitizer on cuda_attention_test's split decode and K=V cases, last GPU
#   gemm      gemm_bench's BM_LinearBatched (31B's projections, TP=1 and a TP=2 rank, M 48-96) on
#             GPU 0 with GANNET_LINEAR_ALGOS = each of GANNET_GEMM_ALGOS (default "8 64")
#   algos     31B decode (GANNET_AB_BATCHES) at TP=GANNET_TP and at TP=1 with
#             GANNET_LINEAR_ALGOS=${GANNET_ALGOS_AB:-64} against the default, this build, two rounds
#   tunings   31B decode at TP=GANNET_TP, batch GANNET_AB_BATCHES, GANNET_TUNING_RUNS (default 4)
#             fresh processes with the linear tuning's debug lines (every candidate's time, per
#             device) kept in $OUT/tuning_<run>.log: how much a step's time depends on the picks
#   serving   this build's chat 1000/1000 at concurrency GANNET_SERVING_CONC (default 80), TP=1
#             and TP=GANNET_TP (run_multigpu.sh's serving stage)
# Environment: as tools/gpu/stages.sh says. NCCL_NVLS_ENABLE=0 stays set.
source "$(dirname "$0")/stages.sh"
export NCCL_NVLS_ENABLE=0
gpu_header "tensor-parallel decode A/B"
tp=${GANNET_TP:-2}

batches=${GANNET_AB_BATCHES:-1,16}

stage_build() {
  gpu_build gannet-decode-bench gannet-allreduce-bench gannet-serving-bench attention_bench gemm_bench \
    cuda_custom_allreduce_test cuda_tp_test tp_multiprocess_test cuda_custom_allreduce_ipc_test \
    "${gpu_single_test_targets[@]}"
}
stage_base() { gpu_build_base gannet-decode-bench gannet-allreduce-bench attention_bench; }
stage_allreduce() {
  local label mode
  for label in base new; do
    for mode in nccl auto; do
      GANNET_ALLREDUCE=$mode timeout 120 "$(ab_build $label)/bench/parallel/gannet-allreduce-bench" --tp "$tp" \
        --iters 200 2>&1 | grep -v "^gannet \[I\]" | sed "s/^/[$label $mode] /" | tee -a "$summary"
    done
  done
}
stage_test() {
  export GANNET_TEST_DATA=${GANNET_TEST_DATA:-$PWD/tests/data}
  local rc=0
  timeout 120 "$build/tests/parallel/cuda_custom_allreduce_test" > "$out/allreduce_test.log" 2>&1 || rc=1
  timeout 300 "$build/tests/parallel/cuda_tp_test" --gtest_filter='*MultiGpu*:*OneGpu*' \
    > "$out/tp_test.log" 2>&1 || rc=1
  (cd "$build" && ctest -R "^(tp_multiprocess_test|cuda_custom_allreduce_ipc_test)$" -V \
    --timeout 300) > "$out/tp_ctest.log" 2>&1 || rc=1
  grep -hE "^\[  (PASSED|FAILED)|FAILED  \]|Failure|tests passed|tests failed" \
    "$out/allreduce_test.log" "$out/tp_test.log" "$out/tp_ctest.log" | tee -a "$summary"
  return $rc
}
stage_single() {
  CUDA_VISIBLE_DEVICES=$(($(nvidia-smi -L | wc -l) - 1)) gpu_single_tests | tee -a "$summary"
  return "${PIPESTATUS[0]}"
}
stage_small() {
  local m
  for m in e2b e4b 26b-a4b; do
    CUDA_VISIBLE_DEVICES=0 gpu_decode_ab --model dummy:$m --batches 1,4 --context 1000 --steps 30
  done
}
stage_decode() {
  gpu_decode_ab --model dummy:31b --batches "$batches" --context 1500 --steps 20 --tp "$tp"
  gpu_decode_ab --model dummy:26b-a4b --batches 1 --context 1000 --steps 30 --tp "$tp"
  gpu_decode_ab --model dummy:31b --batches "$batches" --context 1500 --steps 20 --tp "$tp"
  note "-- new, TP=1: --model dummy:31b --batches $batches --context 1500 --steps 20"
  timeout 120 "$build/bench/runner/gannet-decode-bench" --model dummy:31b --batches "$batches" \
    --context 1500 --steps 20 --tp 0 2>&1 | grep -E "^ +batch" | tee -a "$summary"
}
stage_decode1() {
  CUDA_VISIBLE_DEVICES=0 gpu_decode_ab --model dummy:31b --batches "$batches" --context 1500 --steps 20
}
stage_sweep() {
  local label
  for label in base new; do
    CUDA_VISIBLE_DEVICES=0 timeout 300 "$(ab_build $label)/bench/kernels/attention_bench" \
      --benchmark_filter='BM_AttentionDecodeSplits/.*/batch:(80|64|24)/ctx:1500' 2>&1 | grep -E "^BM_" |
      sed "s/^/[$label] /" | tee -a "$summary"
  done
}
stage_gemm() {
  local a
  for a in ${GANNET_GEMM_ALGOS:-8 64}; do
    note "-- GANNET_LINEAR_ALGOS=$a"
    CUDA_VISIBLE_DEVICES=0 GANNET_LINEAR_ALGOS=$a timeout 300 "$build/bench/kernels/gemm_bench" \
      --benchmark_filter='BM_LinearBatched' 2>&1 | grep -E "^BM_" | tee -a "$summary"
  done
}
stage_algos() {
  local set="GANNET_LINEAR_ALGOS=${GANNET_ALGOS_AB:-64}"
  gpu_decode_env_ab "$set" --model dummy:31b --batches "$batches" --context 1500 --steps 20 --tp "$tp"
  CUDA_VISIBLE_DEVICES=0 gpu_decode_env_ab "$set" --model dummy:31b --batches "$batches" \
    --context 1500 --steps 20
}
stage_tunings() {
  local r
  for r in $(seq "${GANNET_TUNING_RUNS:-4}"); do
    GANNET_LOG_LEVEL=debug timeout 240 "$build/bench/runner/gannet-decode-bench" --model dummy:31b \
      --batches "$batches" --context 1500 --steps 20 --tp "$tp" > "$out/tuning_$r.log" 2>&1
    note "-- run $r: $(grep -E '^ +batch' "$out/tuning_$r.log" | tr -s ' ' | tr '\n' ';')"
  done
}
stage_memcheck() {
  CUDA_VISIBLE_DEVICES=$(($(nvidia-smi -L | wc -l) - 1)) gpu_memcheck 600 6 \
    '*kfromv_decode*:*decode_narrow_split*:*decode_q2_hd512*:*decode_8q2kv*'
}
stage_serving() {
  GANNET_GPU_BUILD="$build" OUT="$out" GANNET_TPS="0 $tp" GANNET_SERVING_CONC="${GANNET_SERVING_CONC:-80}" \
    tools/gpu/run_multigpu.sh serving > /dev/null 2>&1
  grep -E "out tok/s|critical path" "$out/multigpu_summary.txt" | tee -a "$summary"
}
gpu_run_stages build base test decode -- "$@"
