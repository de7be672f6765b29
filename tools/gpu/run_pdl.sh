#!/bin/bash
# Programmatic dependent launch (kernels::Launch, PdlEnter) on one Hopper GPU: every GPU test with
# it on, and decode steps with it on and off (GANNET_PDL=0) for every variant. From the repository
# root on the GPU machine (after `source .device/env.sh`):
#   tools/gpu/run_pdl.sh [stage ...]   (default: build test decode)
#   build     sm_90 Release build of the GPU tests and gannet-decode-bench
#   test      ctest -L gpu (every single-GPU test; kernels, runner, engine, graphs, C ABI)
#   decode    gannet-decode-bench, PDL off then on: batch 1 (and 16) for every dummy variant,
#             batch 64 for 31B; graphs on, as the engine runs
#   memcheck  compute-sanitizer memcheck on the tiny-model runner tests (eager and graphs)
# Environment: as tools/gpu/stages.sh says.
source "$(dirname "$0")/stages.sh"
gpu_header "PDL"

stage_build() { gpu_build; }  # every target: the test stage runs all of label gpu
stage_test() {
  (cd "$build" && ctest -L gpu --timeout 600 -j1) > "$out/ctest.log" 2>&1
  local rc=$?
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$out/ctest.log" | tail -30
  return $rc
}
decode_pair() {  # decode_pair ARGS...: the same run with PDL off, then on
  local pdl
  for pdl in 0 1; do
    note "-- GANNET_PDL=$pdl $*"
    GANNET_PDL=$pdl timeout 240 "$build/bench/runner/gannet-decode-bench" "$@" 2>&1 |
      grep -vE "^\s*$" | tail -6 | tee -a "$summary"
  done
}
stage_decode() {
  decode_pair --model dummy:e2b --batches 1,16 --context 1000 --steps 30
  decode_pair --model dummy:e4b --batches 1,16 --context 1000 --steps 30
  decode_pair --model dummy:26b-a4b --batches 1,16 --context 1000 --steps 30
  decode_pair --model dummy:31b --batches 1,64 --context 1500 --steps 15
}
stage_memcheck() { gpu_memcheck_runner 500 '*Greedy*:*Graph*'; }
gpu_run_stages build test decode -- "$@"
