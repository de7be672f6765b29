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
# Environment: as tools/gpu/stages.sh says; GANNET_BASE_BUILD (default /tmp/gannet-base).
source "$(dirname "$0")/stages.sh"
gpu_header "small-batch decode A/B"
base_build=${GANNET_BASE_BUILD:-/tmp/gannet-base}
base_src=/tmp/gannet-base-src
targets=(cuda_ops_test cuda_runner_test gannet-decode-bench gemm_bench moe_bench)

stage_build() { gpu_build "${targets[@]}"; }
stage_base() {
  [ -f .base/src.tar.gz ] || { echo "no .base/src.tar.gz (tools/gpu/make_base.sh)"; return 2; }
  note "baseline: $(cat .base/commit 2>/dev/null)"
  rm -rf "$base_src" && mkdir -p "$base_src" && tar -xzf .base/src.tar.gz -C "$base_src" &&
    (cd "$base_src" && GANNET_GPU_BUILD="$base_build" OUT="$out/base" bash -c \
      'source tools/gpu/stages.sh && gpu_build "$@"' _ "${targets[@]}")
}
stage_test() { gpu_ctest 900 "tests passed|tests failed|Failed|FAILED|\*\*\*" cuda_ops_test cuda_runner_test; }

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

decode_ab() {  # decode_ab ARGS...: the same run on the baseline, then on this tree
  local b label
  for label in base new; do
    b=$build
    [ $label = base ] && b=$base_build
    note "-- $label: $*"
    timeout 240 "$b/bench/runner/gannet-decode-bench" "$@" 2>&1 | grep -vE "^\s*$" | tail -5 |
      tee -a "$summary"
  done
}
stage_decode() {
  decode_ab --model dummy:26b-a4b --batches 1,4,16 --context 1000 --steps 30
  decode_ab --model dummy:e2b --batches 1,4,16 --context 1000 --steps 30
  decode_ab --model dummy:e4b --batches 1,4,16 --context 1000 --steps 30
  decode_ab --model dummy:31b --batches 1,64 --context 1500 --steps 15
}
gpu_run_stages build base test kernels decode -- "$@"
