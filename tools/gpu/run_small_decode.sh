#!/bin/bash
# Small-batch decode kernels (issue 14, item 4) against a baseline commit, on one GPU, built and
# run side by side on the same machine. From the repository root on the GPU machine (after
# `source .device/env.sh`); the baseline is a source tarball prepared on the workstation:
#   tools/gpu/make_base.sh <commit>      (writes .base/src.tar.gz; carry ".base")
#   tools/gpu/run_small_decode.sh [stage ...]   (default: build base test kernels decode)
#   build     sm_90 Release build of this tree's kernel tests, kernel benches and decode bench
#   base      the same targets from .base/src.tar.gz, in $GANNET_BASE_BUILD
#   test      cuda_ops_test and cuda_runner_test (this tree)
#   kernels   gemm_bench's small-model projections and moe_bench's decode sizes, both builds
#   decode    gannet-decode-bench for every dummy variant, both builds, interleaved
#   envab     the same on this build alone, with $GANNET_AB_ENV (VAR or VAR=VALUE) set and
#             unset (env_sweep_models over VALUE and the default; e.g. GANNET_AB_ENV=GANNET_PDL)
#   envsweep  the same over several values of one switch: GANNET_SWEEP_ENV (VAR) and
#             GANNET_SWEEP_VALUES ("v1 v2 default"; gpu_decode_env_sweep), E2B, E4B and 26B-A4B
#             at batch 1 and 4, and 31B at batch 1 unless GANNET_AB_SMALL_ONLY is set; or 31B
#             alone (batch 1 and GANNET_SWEEP_31B_BATCHES) with GANNET_SWEEP_31B_ONLY
#   single    the single-GPU kernel and runner tests (gpu_single_tests)
#   tuning    the linear layers' timed choices (cuBLASLt or GEMV, both times, the GEMV's PDL
#             credit) for every dummy variant at M = 1 and 4, from the debug log
#   profile   Nsight Compute: one eager batch-1 step of 26B-A4B and E2B (kernel times, CSV in
#             $OUT), and the MoE pair kernels of moe_bench at 1 and 4 tokens (DRAM, occupancy)
# Environment: as tools/gpu/stages.sh says; GANNET_BASE_BUILD (default /tmp/gannet-base);
# GANNET_AB_MOE_ONLY=1 limits the decode stage to 26B-A4B.
source "$(dirname "$0")/stages.sh"
gpu_header "small-batch decode A/B"
targets=(gannet-decode-bench gemm_bench moe_bench "${gpu_single_test_targets[@]}")

stage_build() { gpu_build "${targets[@]}"; }
stage_base() { gpu_build_base "${targets[@]}"; }
stage_test() { gpu_ctest 900 "tests passed|tests failed|Failed|FAILED|\*\*\*" cuda_ops_test cuda_graph_test cuda_runner_test; }

kernel_benches() {  # kernel_benches BUILD LABEL
  note "-- $2: gemm_bench (small models) and moe_bench"
  "$1/bench/kernels/gemm_bench" --benchmark_filter='BM_LinearSmallModels' 2>&1 |
    grep -E "^BM_" | tee -a "$summary"
  "$1/bench/kernels/moe_bench" --benchmark_filter='BM_MoeExpertsEntry/tokens:(1|2|4|8|16)/' 2>&1 |
    grep -E "^BM_" | tee -a "$summary"
}
stage_kernels() {
  kernel_benches "$build" new
  kernel_benches "$base_build" base
}

stage_decode() {
  gpu_decode_ab --model dummy:26b-a4b --batches 1,4,16 --context 1000 --steps 30
  [ -n "${GANNET_AB_MOE_ONLY:-}" ] && return 0
  gpu_decode_ab --model dummy:e2b --batches 1,4,16 --context 1000 --steps 30
  gpu_decode_ab --model dummy:e4b --batches 1,4,16 --context 1000 --steps 30
  gpu_decode_ab --model dummy:31b --batches "1,$(gpu_31b_batch)" --context 1500 --steps 15
}
# env_sweep_models VAR "VALUE..." BATCHES_31B MODEL...: gpu_decode_env_sweep over each small
# MODEL at batch 1 and 4, then 31B at BATCHES_31B unless GANNET_AB_SMALL_ONLY is set.
env_sweep_models() {
  local var=$1 values=$2 batches_31b=$3 m
  shift 3
  for m in "$@"; do
    gpu_decode_env_sweep "$var" "$values" --model "dummy:$m" --batches 1,4 --context 1000 --steps 30
  done
  [ -n "${GANNET_AB_SMALL_ONLY:-}" ] && return 0
  gpu_decode_env_sweep "$var" "$values" --model dummy:31b --batches "$batches_31b" --context 1500 \
    --steps 15
}
stage_envab() {
  local set=${GANNET_AB_ENV:?GANNET_AB_ENV names the switch: VAR or VAR=VALUE}
  [[ "$set" == *=* ]] || set="$set=0"
  env_sweep_models "${set%%=*}" "${set#*=} default" "1,$(gpu_31b_batch)" e2b e4b 26b-a4b
}
stage_envsweep() {
  local var=${GANNET_SWEEP_ENV:?GANNET_SWEEP_ENV names the switch}
  local values=${GANNET_SWEEP_VALUES:?GANNET_SWEEP_VALUES lists its values}
  local batches_31b="1${GANNET_SWEEP_31B_BATCHES:+,$GANNET_SWEEP_31B_BATCHES}"
  if [ -n "${GANNET_SWEEP_31B_ONLY:-}" ]; then
    GANNET_AB_SMALL_ONLY='' env_sweep_models "$var" "$values" "$batches_31b"
  else
    env_sweep_models "$var" "$values" "$batches_31b" e2b e4b 26b-a4b
  fi
}
stage_single() { gpu_single_tests; }
stage_tuning() {
  local m
  for m in e2b e4b 26b-a4b 31b; do
    note "-- linear tuning, $m (M = 1 and 4)"
    GANNET_LOG_LEVEL=debug timeout 120 "$build/bench/runner/gannet-decode-bench" --model dummy:$m \
      --batches 1,4 --context 1000 --steps 3 2>&1 | grep -E "linear M=" | sort -u | tee -a "$summary"
  done
}
stage_profile() {
  local m
  for m in 26b-a4b e2b; do
    GANNET_NCU_MODEL=dummy:$m OUT="$out" tools/gpu/ncu_decode_step.sh "$build" 1
    mv "$out/ncu_decode_b1.csv" "$out/ncu_decode_${m}_b1.csv"
  done
  local t
  for t in 1 4; do
    timeout 120 ncu --clock-control none --cache-control none --kernel-name regex:MoePair \
      --launch-count 2 --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size \
      "$build/bench/kernels/moe_bench" --benchmark_filter="tokens:$t/entry:2/" > "$out/ncu_moe_t$t.txt" 2>&1
    note "-- MoE pair kernels, $t token(s)"
    grep -E "MoePair|duration|dram__|warps_active|registers|grid_size" "$out/ncu_moe_t$t.txt" | tee -a "$summary"
  done
}
gpu_run_stages build base test kernels decode -- "$@"
