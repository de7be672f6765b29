#!/bin/bash
# Where a decode step's time goes with CUDA graphs and PDL on: gannet-decode-bench under the CUPTI
# kernel tracer (tools/trace/kernel_trace.cc), each graph replay's kernels attributed by
# tools/trace/critical_path.py. Also the GPU tests a change owes. From the repository root on the
# GPU machine (after `source .device/env.sh`):
#   tools/gpu/run_trace.sh [stage ...]     (default: build test trace wait_tests trace_tp)
#   build   sm_90 Release build of the decode bench, the tracer and the GPU tests below
#   test    the single-GPU kernel and runner tests (on the last GPU when there are two or more,
#           in the background, so that the trace stage can use GPU 0 meanwhile; waited for at
#           the end), and on a machine of two or more GPUs the multigpu tests (run_multigpu.sh)
#   trace   each model's batch-1 (and 4) step, traced and untraced (the tracer's own cost),
#           GANNET_TRACE_MODELS (default "e2b e4b 26b-a4b 31b")
#   wait_tests  waits for the background single-GPU tests
#   trace_tp    with two or more GPUs, 31B at TP=2 traced the same way (batches
#               GANNET_TRACE_TP_BATCHES, default 1); the traces come back as traces.tar
#   linear_ab   31B decode with the timed linear paths against cuBLASLt alone, TP=1 and TP=2
# Environment: as tools/gpu/stages.sh says.
source "$(dirname "$0")/stages.sh"
export NCCL_NVLS_ENABLE=0
gpu_header "decode traces"
gpus=$(nvidia-smi -L | wc -l)
targets=(gannet-decode-bench gannet_kernel_trace "${gpu_single_test_targets[@]}")
[ "$gpus" -ge 2 ] && targets+=(cuda_tp_test cuda_custom_allreduce_test tp_multiprocess_test
  cuda_custom_allreduce_ipc_test)

stage_build() { gpu_build "${targets[@]}"; }

stage_test() {
  local rc=0
  if [ "$gpus" -ge 2 ]; then
    CUDA_VISIBLE_DEVICES=$((gpus - 1)) gpu_single_tests > /dev/null &
    echo $! > "$out/single_tests.pid"
    GANNET_GPU_BUILD="$build" OUT="$out" tools/gpu/run_multigpu.sh test > /dev/null 2>&1 || rc=1
    grep -E "exit [0-9]|PASSED|FAILED" "$out/multigpu_summary.txt" | tail -12 | tee -a "$summary"
  else
    gpu_single_tests | tee -a "$summary"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  fi
  return $rc
}

traced() {  # traced NAME ARGS...: the decode bench traced into $out/trace_NAME.csv, then plain
  local name=$1
  shift
  note "-- $name: $*"
  CUDA_VISIBLE_DEVICES=${TRACE_DEVICES:-0} CUDA_INJECTION64_PATH="$build/tools/trace/libgannet_kernel_trace.so" \
    GANNET_KERNEL_TRACE="$out/trace_$name.csv" timeout 300 "$build/bench/runner/gannet-decode-bench" "$@" 2>&1 |
    grep -E "^ +batch|kernel_trace" | sed 's/^/traced: /' | tee -a "$summary"
  CUDA_VISIBLE_DEVICES=${TRACE_DEVICES:-0} timeout 300 "$build/bench/runner/gannet-decode-bench" "$@" 2>&1 |
    grep -E "^ +batch" | sed 's/^/plain:  /' | tee -a "$summary"
  python3 tools/trace/critical_path.py "$out/trace_$name.csv" --top 18 | tee -a "$summary"
}
stage_trace() {
  local m
  for m in ${GANNET_TRACE_MODELS:-e2b e4b 26b-a4b 31b}; do
    if [ "$m" = 31b ]; then
      traced 31b --model dummy:31b --batches 1 --context 1500 --steps 10
    else
      traced "$m" --model "dummy:$m" --batches 1,4 --context 1000 --steps 20
    fi
  done
}
stage_trace_tp() {  # after wait_tests: the tests ran on the last GPU
  [ "$gpus" -ge 2 ] || return 0
  TRACE_DEVICES=0,1 traced 31b_tp2 --model dummy:31b --batches "${GANNET_TRACE_TP_BATCHES:-1}" \
    --context 1500 --steps 10 --tp 2
  xz -T0 -3 "$out"/trace_*.csv 2>/dev/null
  tar -cf "$out/traces.tar" -C "$out" $(cd "$out" && ls trace_*.csv.xz) && rm -f "$out"/trace_*.csv.xz
}
# The timed linear-path choice against cuBLASLt alone (GANNET_LINEAR_PATH=cublaslt), same binary,
# interleaved: 31B at TP=1 and, with two GPUs, TP=2.
stage_linear_ab() {
  local r p
  for r in 1 2; do
    for p in auto cublaslt; do
      note "-- GANNET_LINEAR_PATH=$p, TP=1"
      CUDA_VISIBLE_DEVICES=0 GANNET_LINEAR_PATH=$p timeout 300 "$build/bench/runner/gannet-decode-bench" \
        --model dummy:31b --batches 1,16 --context 1500 --steps 15 2>&1 | grep -E "^ +batch" | tee -a "$summary"
      [ "$gpus" -ge 2 ] || continue
      note "-- GANNET_LINEAR_PATH=$p, TP=2"
      CUDA_VISIBLE_DEVICES=0,1 GANNET_LINEAR_PATH=$p timeout 300 "$build/bench/runner/gannet-decode-bench" \
        --model dummy:31b --batches 1,16,64 --context 1500 --steps 15 --tp 2 2>&1 | grep -E "^ +batch" | tee -a "$summary"
    done
  done
}

stage_wait_tests() {
  [ -f "$out/single_tests.pid" ] || return 0
  while kill -0 "$(cat "$out/single_tests.pid")" 2>/dev/null; do sleep 2; done
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$out/ctest.log" | tail -20 | tee -a "$summary"
  grep -q "100% tests passed" "$out/ctest.log"
}
gpu_run_stages build test trace wait_tests trace_tp -- "$@"
