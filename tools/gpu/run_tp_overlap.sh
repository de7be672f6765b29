#!/bin/bash
# The all-reduce of a long tensor-parallel step beside its row-parallel projection
# (runner/row_parallel.h, RunnerOptions::overlap_allreduce_rows), on a machine of 2+ GPUs. From
# the repository root after `source .device/env.sh`:
#   tools/gpu/run_tp_overlap.sh [stage ...]   (default: build test prefill)
#   build    run_multigpu.sh's build
#   test     run_multigpu.sh's multigpu tests with GANNET_TP_OVERLAP_ROWS=2, so that every step of
#            two rows or more (eager prefill and captured decode steps) takes the split path
#   prefill  31B prefill at concurrency 1 (GANNET_PREFILL_LENS, default "8000 2000" tokens),
#            TP=GANNET_TP with the split off (GANNET_TP_OVERLAP_ROWS=0) and on (default),
#            and the halves without the overlap (GANNET_OVERLAP_IN_ORDER=1), GANNET_AB_ROUNDS rounds
#            (default 2), then TP=1 once: the serving bench's prefill line
#   serving  chat 1000/1000 at concurrency GANNET_SERVING_CONC (default 80), TP=1 and TP=GANNET_TP
# Environment: as run_multigpu.sh says (OUT, GANNET_GPU_BUILD, GANNET_TP). NCCL_NVLS_ENABLE=0.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
here=$(dirname "$0")
build=${GANNET_GPU_BUILD:-/tmp/gannet-gpu}
out=${OUT:-/tmp/gannet-multigpu-out}
tp=${GANNET_TP:-2}
mkdir -p "$out"
summary="$out/overlap_summary.txt"
note() { echo "$*" | tee -a "$summary"; }
prefill_run() {  # prefill_run LABEL TP LEN [VAR=VALUE]
  local label=$1 t=$2 len=$3
  shift 3
  env "$@" timeout 300 "$build/bench/serving/gannet-serving-bench" --model dummy:31b \
    --input-len "$len" --output-len 4 --concurrency 1 --requests 4 --tp "$t" \
    --name "$label tp$t in$len" 2>&1 | grep -E "out tok/s|prefill:" | tee -a "$summary"
}
for stage in "${@:-build test prefill}"; do
  for s in $stage; do
    t0=$(date +%s)
    case "$s" in
      build) OUT="$out" "$here/run_multigpu.sh" build > /dev/null 2>&1; note "build: rc $?" ;;
      test)
        GANNET_TP_OVERLAP_ROWS=2 OUT="$out" "$here/run_multigpu.sh" test > /dev/null 2>&1
        note "test (GANNET_TP_OVERLAP_ROWS=2): rc $?"
        grep -E "exit [0-9]|PASSED|FAILED" "$out/multigpu_summary.txt" | tail -12 | tee -a "$summary"
        ;;
      prefill)
        for len in ${GANNET_PREFILL_LENS:-8000 2000}; do
          for r in $(seq "${GANNET_AB_ROUNDS:-2}"); do
            prefill_run "split off r$r" "$tp" "$len" GANNET_TP_OVERLAP_ROWS=0
            prefill_run "split on r$r" "$tp" "$len" GANNET_TP_OVERLAP_ROWS=
            prefill_run "split in order r$r" "$tp" "$len" GANNET_TP_OVERLAP_ROWS= GANNET_OVERLAP_IN_ORDER=1
          done
          prefill_run "one device" 0 "$len" GANNET_TP_OVERLAP_ROWS=
        done
        ;;
      serving)
        for t in 0 "$tp"; do
          timeout 600 "$build/bench/serving/gannet-serving-bench" --model dummy:31b --input-len 1000 \
            --output-len 1000 --concurrency "${GANNET_SERVING_CONC:-80}" --tp "$t" \
            --name "chat tp$t" 2>&1 | grep -E "out tok/s|host on" | tee -a "$summary"
        done
        ;;
      *) echo "unknown stage $s"; exit 2 ;;
    esac
    note "-- $s: $(( $(date +%s) - t0 )) s"
  done
done
