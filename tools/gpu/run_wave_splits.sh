#!/bin/bash
# Decode attention's split count for grids past one wave (a partly filled last wave) against a
# baseline commit, built and run side by side on one machine of 1, 2 or 4 GPUs. From the
# repository root on the GPU machine (after `source .device/env.sh`):
#   tools/gpu/make_base.sh <commit>      (on the workstation: .base/src.tar.gz; carry ".base")
#   tools/gpu/run_wave_splits.sh [stage ...]   (default: build base test decode)
#   build     sm_90 Release build: attention and registry tests, decode and serving benches
#   base      the benches from .base/src.tar.gz, in $GANNET_BASE_BUILD
#   test      cuda_attention_test (the 80-sequence narrow-tile split case among them) and
#             kernel_registry_test
#   decode    gannet-decode-bench at batch 64 and 80 (context 1500), 31B and 26B-A4B, each TP
#             degree of GANNET_TPS (default "0", plus 2 and 4 where the GPUs are there), both builds
#   serving   this build: 31B and 26B-A4B chat 1000/1000 at concurrency 80, each TP degree, all 80
#             running (--max-running 80: TP=1's pools hold 82, the default limit is 64)
# Environment: as tools/gpu/stages.sh says; GANNET_BASE_BUILD (default /tmp/gannet-base).
source "$(dirname "$0")/stages.sh"
export NCCL_NVLS_ENABLE=0
gpu_header "decode splits past one wave A/B"
gpus=$(nvidia-smi -L | wc -l)
default_tps="0"
[ "$gpus" -ge 2 ] && default_tps+=" 2"
[ "$gpus" -ge 4 ] && default_tps+=" 4"
tps=${GANNET_TPS:-$default_tps}
bench_targets=(gannet-decode-bench gannet-serving-bench)

stage_build() { gpu_build cuda_attention_test kernel_registry_test "${bench_targets[@]}"; }
stage_base() { gpu_build_base "${bench_targets[@]}"; }
stage_test() {
  gpu_ctest 900 "tests passed|tests failed|Failed|FAILED|\*\*\*" cuda_attention_test kernel_registry_test
}
stage_decode() {
  local m t
  for m in 31b 26b-a4b; do
    for t in $tps; do
      gpu_decode_ab --model "dummy:$m" --batches 64,80 --context 1500 --steps 15 --tp "$t"
    done
  done
}
stage_serving() {
  local m t
  for m in 31b 26b-a4b; do
    for t in $tps; do
      timeout 300 "$build/bench/serving/gannet-serving-bench" --model "dummy:$m" --input-len 1000 \
        --output-len 1000 --concurrency 80 --tp "$t" --max-running 80 --name "$m tp$t c80" 2>&1 |
        grep --line-buffered -v "^gannet \[I\]" | tee -a "$summary"
    done
  done
}
gpu_run_stages build base test decode -- "$@"
