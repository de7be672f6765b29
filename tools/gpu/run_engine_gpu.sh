#!/bin/bash
# End-to-end GPU runs of the engine (complements run_gpu_checks.sh, which covers kernels):
#   build    cmake -G Ninja for sm_90: libgannet, the serving driver, the gpu-labelled tests
#   test     gpu-labelled tests (kernels, ops, runner, engine through the C ABI)
#   serving  gannet-serving-bench runs, one per line of $GANNET_SERVING (see tools/gpu/serving_*.txt)
#   sweep    gannet-spec-sweep runs, one per line of $GANNET_SWEEP (see tools/gpu/spec_sweep.txt):
#            `<time limit> <args>`
#   decode   gannet-decode-bench runs, one per line of $GANNET_DECODE (see tools/gpu/decode_*.txt);
#            a line is `<time limit> plain|profile|linear-<path> <args>`: profile sets
#            GANNET_PROFILE_OPS=1, linear-<path> GANNET_LINEAR_PATH=<path>
# Usage on the GPU machine, from the repository root after `source .device/env.sh`:
#   GANNET_SERVING=tools/gpu/serving_31b.txt tools/gpu/run_engine_gpu.sh build test serving
# Logs and a summary go to $OUT (default /tmp/gannet-engine-out).
set -uo pipefail
build=${GANNET_GPU_BUILD:-/tmp/gannet-gpu}
out=${OUT:-/tmp/gannet-engine-out}
mkdir -p "$out"
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build test)
summary="$out/engine_summary.txt"
status=0
note() { echo "$*" | tee -a "$summary"; }
note "== gannet engine GPU runs: commit ${GANNET_COMMIT:-unknown}, $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$summary"

tests=(cuda_attention_test cuda_ops_test cuda_runner_test cuda_graph_test kernel_registry_test capi_gpu_test
       cuda_large_kv_test capi_gpu_defaults_test cuda_status_test cuda_drafter_test spec_engine_gpu_test)
for stage in "${stages[@]}"; do
  t0=$(date +%s)
  rc=0
  case "$stage" in
    build)
      cmake -S . -B "$build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
        > "$out/engine_build.log" 2>&1 &&
        ninja -C "$build" -j"$(nproc)" gannet gannet-serving-bench gannet-decode-bench gannet-spec-sweep gemm_bench "${tests[@]}" \
        >> "$out/engine_build.log" 2>&1
      rc=$?
      [ $rc -ne 0 ] && tail -40 "$out/engine_build.log"
      ;;
    test)
      (cd "$build" && ctest -L gpu ${GANNET_TEST_REGEX:+-R "$GANNET_TEST_REGEX"} --output-on-failure --timeout 400) > "$out/engine_ctest.log" 2>&1
      rc=$?
      grep -E "tests passed|tests failed|Failed|SKIPPED|FAILED|Passed|\*\*\*" "$out/engine_ctest.log" | tail -30
      ;;
    serving)
      list=${GANNET_SERVING:-tools/gpu/serving_31b.txt}
      grep -v '^#' "$list" | while read -r limit args; do
        [ -z "$limit" ] && continue
        timeout "$limit" "$build/bench/serving/gannet-serving-bench" $args 2>> "$out/serving.err" |
          tee -a "$out/serving.txt"
        [ "${PIPESTATUS[0]}" -ne 0 ] && echo "  (exit ${PIPESTATUS[0]}: $args)" | tee -a "$out/serving.txt"
      done
      ;;
    sweep)
      list=${GANNET_SWEEP:-tools/gpu/spec_sweep.txt}
      grep -v '^#' "$list" | while read -r limit args; do
        [ -z "$limit" ] && continue
        timeout "$limit" "$build/bench/spec/gannet-spec-sweep" $args 2>> "$out/sweep.err" |
          tee -a "$out/sweep.txt"
        [ "${PIPESTATUS[0]}" -ne 0 ] && echo "  (exit ${PIPESTATUS[0]}: $args)" | tee -a "$out/sweep.txt"
      done
      ;;
    decode)
      list=${GANNET_DECODE:-tools/gpu/decode_31b.txt}
      grep -v '^#' "$list" | while read -r limit mode args; do
        [ -z "$limit" ] && continue
        profile=0 linear=auto
        [ "$mode" = profile ] && profile=1
        case "$mode" in linear-*) linear=${mode#linear-} ;; esac
        echo "-- $mode $args" | tee -a "$out/decode.txt"
        GANNET_PROFILE_OPS=$profile GANNET_LINEAR_PATH=$linear timeout "$limit" "$build/bench/runner/gannet-decode-bench" $args \
          2>&1 | grep -v '^gannet \[I\]' | tee -a "$out/decode.txt"
        [ "${PIPESTATUS[0]}" -ne 0 ] && echo "  (exit ${PIPESTATUS[0]}: $args)" | tee -a "$out/decode.txt"
      done
      ;;
    *) echo "unknown stage $stage"; rc=2 ;;
  esac
  note "== stage $stage: rc=$rc ($(( $(date +%s) - t0 )) s)"
  [ $rc -ne 0 ] && status=1
  [ "$stage" = build ] && [ $rc -ne 0 ] && break
done
exit $status
