#!/bin/bash
# 31B decode at batch 64 (issue 14, item 4: >= 85% of copy bandwidth for weights + KV), on one GPU.
# From the repository root on the GPU machine (after `source .device/env.sh`):
#   tools/gpu/run_batch64.sh [stage ...]   (default: build test attn decode profile)
#   build    sm_90 Release build of the decode bench, attention_bench and cuda_attention_test
#   test     cuda_attention_test on the sm80 hd256 entries (GANNET_TEST_ENTRY_PREFIX)
#   attn     attention_bench's decode entries side by side at batch 16 and 64, context 1500
#   decode   gannet-decode-bench 31B batch 64 with the selected entries, then with each
#            GANNET_FORCE_KERNEL list of GANNET_DECODE64_FORCE (space-separated; none by default)
#   profile  Nsight Compute: one eager 31B batch-64 step, kernel time and DRAM bytes per kernel
#            (CSV in $OUT; tools/gpu/ncu_summary.py groups it by kernel)
# Environment: as tools/gpu/stages.sh says.
source "$(dirname "$0")/stages.sh"
gpu_header "31B batch-64 decode"

stage_build() { gpu_build gannet-decode-bench attention_bench cuda_attention_test kernel_registry_test; }
stage_test() {
  GANNET_TEST_ENTRY_PREFIX=sm80_hd256 gpu_ctest 600 "tests passed|tests failed|Failed|FAILED" \
    cuda_attention_test kernel_registry_test
}
stage_attn() {
  "$build/bench/kernels/attention_bench" --benchmark_filter='BM_AttentionDecodeEntry' 2>&1 |
    grep -E "^BM_" | sed -E 's/iterations:1.manual_time//' | tee -a "$summary"
}
decode64() {  # decode64 LABEL: one 31B batch-64 run with the environment given
  note "-- $1"
  timeout 300 "$build/bench/runner/gannet-decode-bench" --model dummy:31b --batches 64 \
    --context 1500 --steps 15 2>&1 | grep -vE "^\s*$" | tail -3 | tee -a "$summary"
}
stage_decode() {
  decode64 "selected entries"
  local e
  for e in ${GANNET_DECODE64_FORCE:-}; do
    GANNET_FORCE_KERNEL=$e decode64 "GANNET_FORCE_KERNEL=$e"
  done
  [ -n "${GANNET_DECODE64_FORCE:-}" ] && decode64 "selected entries, again"
  return 0
}
stage_profile() {
  GANNET_NCU_METRICS=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    OUT="$out" "$(dirname "$0")/ncu_decode_step.sh" "$build" 64 | tee -a "$summary"
  local rc=${PIPESTATUS[0]}
  mv "$out/ncu_decode_b64.csv" "$out/ncu_decode_31b_b64.csv"
  python3 "$(dirname "$0")/ncu_summary.py" "$out/ncu_decode_31b_b64.csv" | tee -a "$summary"
  return $rc
}
gpu_run_stages build test attn decode profile -- "$@"
