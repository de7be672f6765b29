#!/bin/bash
# Tensor parallelism on a machine with 2+ GPUs (issue: multi-GPU run): the multigpu tests and the
# custom all-reduce's own (in one process and over CUDA IPC), then the all-reduce per size (custom
# vs NCCL), 31B decode at TP=1 vs TP=N, and the chat serving set.
# Usage, from the repository root after `source .device/env.sh`:
#   tools/gpu/run_multigpu.sh build test [test_eager] allreduce decode capacity serving
# GANNET_MODEL (default dummy:31b) and GANNET_TPS (the TP degrees, 0 = the plain runner; default
# "0 $GANNET_TP") choose what the decode, capacity and serving stages run. GANNET_DECODE_PREFILL=N
# (and GANNET_DECODE_PREFILL_AT=P) adds a prompt chunk to every decode-bench step (mixed steps);
# GANNET_SERVING_ROUNDS=N runs each serving workload N times on one engine (the first is cold);
# GANNET_SERVING_STARTUP_WARMUP=1 has the engine warm every step shape at create instead.
# Logs and a summary go to $OUT (default /tmp/gannet-multigpu-out). NCCL_NVLS_ENABLE=0 stays set.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
build=${GANNET_GPU_BUILD:-/tmp/gannet-gpu}
out=${OUT:-/tmp/gannet-multigpu-out}
tp=${GANNET_TP:-2}
model=${GANNET_MODEL:-dummy:31b}
tps=${GANNET_TPS:-0 $tp}
mname=${model#dummy:}
mkdir -p "$out"
summary="$out/multigpu_summary.txt"
note() { echo "$*" | tee -a "$summary"; }
note "== gannet multi-GPU runs: commit ${GANNET_COMMIT:-unknown}, $(date -u +%FT%TZ), $model, tp $tps"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$summary"
nvidia-smi topo -m 2>&1 | head -12 >> "$summary"
# Runs a command with a time limit; past it, every thread's stack (cuda-gdb attached, where the
# machine has it) goes to $out/<name>.stacks.txt before the command is killed, so a hang leaves
# where it hung, not only that it did.
run_watched() {
  local name=$1 limit=$2
  shift 2
  stdbuf -oL -eL "$@" > "$out/$name.log" 2>&1 &
  local pid=$! waited=0
  while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "$limit" ]; do sleep 1; waited=$((waited + 1)); done
  if kill -0 "$pid" 2>/dev/null; then
    note "$name: still running after $limit s; stacks in $name.stacks.txt"
    for p in $pid $(pgrep -P "$pid"); do
      timeout 60 cuda-gdb -p "$p" -batch -ex "info threads" -ex "thread apply all bt" \
        >> "$out/$name.stacks.txt" 2>&1 || true
    done
    pkill -9 -P "$pid" 2>/dev/null; kill -9 "$pid" 2>/dev/null
  fi
  wait "$pid"
}
# The two multigpu binaries, each watched (ctest would hold their output until they end); logs
# and stacks are named with the prefix $1.
multigpu_tests() {
  local p=$1 lim=${GANNET_TEST_LIMIT_S:-240}
  export GANNET_TEST_DATA=${GANNET_TEST_DATA:-$PWD/tests/data}
  run_watched "${p}multigpu_tp_test" "$lim" "$build/tests/parallel/cuda_tp_test" --gtest_filter='*MultiGpu*'
  note "${p}multigpu_tp_test: exit $?"
  run_watched "${p}tp_multiprocess_test" "$lim" "$build/tests/parallel/tp_multiprocess_test"
  note "${p}tp_multiprocess_test: exit $?"
  # Speculative decoding with tensor parallelism (every rank drafting with its assistant shard).
  run_watched "${p}multigpu_spec_engine_test" "$lim" "$build/tests/spec/spec_engine_gpu_test" \
    --gtest_filter='*MultiGpu*'
  note "${p}multigpu_spec_engine_test: exit $?"
  # The custom all-reduce itself: every rank on one GPU, and two processes over CUDA IPC.
  run_watched "${p}custom_allreduce_test" "$lim" "$build/tests/parallel/cuda_custom_allreduce_test"
  note "${p}custom_allreduce_test: exit $?"
  run_watched "${p}custom_allreduce_ipc_test" "$lim" "$build/tests/parallel/cuda_custom_allreduce_ipc_test"
  note "${p}custom_allreduce_ipc_test: exit $?"
  # Every test's own result line, so the summary shows which ran (a filter that matched fewer
  # than meant passed quietly before: 'MultiGpu*' missed the parameterized Variants/MultiGpuTpTest).
  grep -hE "^\[ +(OK|FAILED|SKIPPED) +\] [A-Za-z]|^\[  (PASSED|FAILED) |note|Failure|DEVICE_LOST" \
    "$out/${p}multigpu_tp_test.log" "$out/${p}tp_multiprocess_test.log" \
    "$out/${p}multigpu_spec_engine_test.log" \
    "$out/${p}custom_allreduce_test.log" "$out/${p}custom_allreduce_ipc_test.log" | tail -60 |
    sed -u "s/^/[${p:-lazy}] /" | tee -a "$summary"
}
for stage in "$@"; do
  t0=$(date +%s)
  case "$stage" in
    build)
      cmake -S . -B "$build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
        > "$out/build.log" 2>&1 &&
        ninja -C "$build" -j"$(nproc)" gannet gannet-serving-bench gannet-decode-bench \
          gannet-allreduce-bench cuda_tp_test cuda_custom_allreduce_test tp_multiprocess_test \
          cuda_custom_allreduce_ipc_test spec_engine_gpu_test \
          >> "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
      ;;
    test)
      multigpu_tests ""
      ;;
    test_eager)
      # The same tests with every kernel loaded when its context is made: a hang under lazy
      # loading that passes here is a kernel-loading deadlock between the ranks' threads.
      CUDA_MODULE_LOADING=EAGER multigpu_tests eager_
      ;;
    allreduce)
      for t in $tps; do
        [ "$t" -gt 1 ] || continue
        for mode in nccl auto; do
          GANNET_ALLREDUCE=$mode "$build/bench/parallel/gannet-allreduce-bench" --tp "$t" --iters 200 2>&1 |
            grep --line-buffered -v "^gannet \[I\]" | sed -u "s/^/[tp$t $mode] /" | tee -a "$summary"
        done
      done
      ;;
    decode)
      for t in $tps; do
        t1=$(date +%s)
        mixed=()
        [ -n "${GANNET_DECODE_PREFILL:-}" ] &&
          mixed=(--prefill "$GANNET_DECODE_PREFILL" --prefill-at "${GANNET_DECODE_PREFILL_AT:-0}")
        timeout 300 "$build/bench/runner/gannet-decode-bench" --model "$model" --batches "${GANNET_DECODE_BATCHES:-1,16,64}" \
          --context 1500 --steps 20 --tp "$t" "${mixed[@]}" 2>&1 | grep --line-buffered -v "^gannet \[I\]" | tee -a "$summary"
        note "   (decode-bench --tp $t: $(( $(date +%s) - t1 )) s)"
      done
      ;;
    capacity)
      # The most 1000/1000 sequences the KV pools hold at once, per TP degree.
      for t in $tps; do
        t1=$(date +%s)
        timeout 300 "$build/bench/serving/gannet-serving-bench" --model "$model" --input-len 1000 \
          --output-len 1000 --tp "$t" --capacity-only 2>&1 | grep --line-buffered -v "^gannet \[I\]" |
          sed -u "s/^/[$mname tp$t] /" | tee -a "$summary"
        note "   (capacity $mname tp$t: $(( $(date +%s) - t1 )) s)"
      done
      ;;
    serving)
      # GANNET_SERVING_CONC: the concurrencies (default 1 16 80). GANNET_MAXRUN_TP0 / _TPN: a
      # running limit per TP degree (what the capacity stage found), taken as min(limit, conc).
      for c in ${GANNET_SERVING_CONC:-1 16 80}; do
        for t in $tps; do
          lim=$([ "$t" = 0 ] && echo "${GANNET_MAXRUN_TP0:-}" || echo "${GANNET_MAXRUN_TPN:-}")
          extra=()
          [ -n "$lim" ] && extra=(--max-running $(( lim < c ? lim : c )))
          [ "${GANNET_SERVING_STARTUP_WARMUP:-0}" = 1 ] && extra+=(--startup-warmup)
          t1=$(date +%s)
          timeout 600 "$build/bench/serving/gannet-serving-bench" --model "$model" --input-len 1000 \
            --output-len 1000 --concurrency "$c" --tp "$t" "${extra[@]}" --name "$mname tp$t c$c" \
            --rounds "${GANNET_SERVING_ROUNDS:-1}" 2>&1 |
            grep --line-buffered -v "^gannet \[I\]" | tee -a "$summary"
          note "   (serving $mname tp$t c$c: $(( $(date +%s) - t1 )) s)"
        done
      done
      ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
  note "-- $stage: $(( $(date +%s) - t0 )) s"
done
