#!/bin/bash
# The tensor-parallel pieces that one GPU can check (issue 12), and the Hopper prefill profile
# (issue 16), on an H100/H200. From the repository root on the GPU machine (after
# `source .device/env.sh`):
#   tools/gpu/run_tp_single_gpu.sh [stage ...]   (default: build test moesplit moe ncu)
#   build     sm_90 Release build of the targets below
#   test      cuda_ops_test (every MoE entry, expert-parallel ranges included),
#             cuda_custom_allreduce_test, cuda_custom_allreduce_ipc_test (two processes on one GPU
#             over CUDA IPC), cuda_tp_test (TP=1 through NCCL; the multigpu cases skip)
#   moesplit  gannet-moe-split-bench: each rank's expert time under either MoE split
#   decode    gannet-decode-bench, 26B-A4B at batch 1-64 (not a default stage)
#   moe       moe_bench: every MoE experts entry at 1-64 tokens (the pair-GEMV / grouped crossover)
#   ncu       Nsight Compute on the sm90 wgmma prefill kernels (31B sliding hd256 and full hd512
#             layers, 32k context): speed of light, warp stall reasons, pipe utilisation
# Environment: as tools/gpu/stages.sh says.
source "$(dirname "$0")/stages.sh"
gpu_header "tensor parallelism on one GPU, Hopper prefill profile"
tests=(cuda_ops_test cuda_custom_allreduce_test cuda_custom_allreduce_ipc_test cuda_tp_test)
tools=(gannet-moe-split-bench attention_bench moe_bench gannet-decode-bench)

stage_build() { gpu_build "${tests[@]}" "${tools[@]}"; }
stage_test() {
  gpu_ctest 600 "tests passed|tests failed|Failed|\*\*\*|FAILED|Failure|exit codes" "${tests[@]}"
}
stage_moesplit() {
  timeout 300 "$build/bench/parallel/gannet-moe-split-bench" 2>&1 | tee "$out/moe_split.txt"
  return "${PIPESTATUS[0]}"
}
stage_moe() {
  timeout 300 "$build/bench/kernels/moe_bench" --benchmark_counters_tabular=true 2>/dev/null |
    tee "$out/moe_entries.txt" | grep -vE "no such entry"
  return "${PIPESTATUS[0]}"
}
# 26B-A4B decode steps at the batches the MoE crossover touches.
stage_decode() {
  timeout 300 "$build/bench/runner/gannet-decode-bench" --model dummy:26b-a4b --batches 1,4,8,16,32,64 \
    --context 1000 2>&1 | tee "$out/decode_26b.txt" | tail -12
  return "${PIPESTATUS[0]}"
}
# Every prefill entry of the shape runs; ncu profiles the first launch of the sm90 kernel.
stage_ncu() {
  local rc=0 shape name
  for shape in "256/16/1024:sliding_hd256" "512/4/0:full_hd512"; do
    name=${shape#*:}
    timeout 280 ncu --clock-control none -k "regex:FlashPrefillHd(256|512)Sm90" -c 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section Occupancy --section LaunchStats --section InstructionStats \
      "$build/bench/kernels/attention_bench" \
      --benchmark_filter="BM_AttentionPrefillEntry/hd:${shape%%/*}/.*ctx:32768/" \
      > "$out/ncu_prefill_$name.txt" 2>&1 || rc=$?
    grep -E "Duration|SM Busy|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Stall|Theoretical Occupancy|Achieved Occupancy|Registers Per|Executed Ipc|Warp Cycles Per Issued" \
      "$out/ncu_prefill_$name.txt" | head -30
  done
  return $rc
}
gpu_run_stages build test moesplit moe ncu -- "$@"
