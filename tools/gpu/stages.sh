#!/bin/bash
# The skeleton the single-GPU run scripts (run_gpu_checks.sh, run_fp8_kv.sh, run_k_from_v.sh)
# share. Source it, define a stage_<name> function for each stage, then call
# `gpu_run_stages DEFAULT... -- "$@"`. Environment: GANNET_GPU_BUILD (build dir, default
# /tmp/gannet-gpu), OUT (log dir, default /tmp/gannet-gpu-out), GANNET_COMMIT (recorded in the
# logs; the GPU copy has no .git).
set -uo pipefail
build=${GANNET_GPU_BUILD:-/tmp/gannet-gpu}
out=${OUT:-/tmp/gannet-gpu-out}
mkdir -p "$out"
summary="$out/summary.txt"

note() { echo "$*" | tee -a "$summary"; }

# The run's first summary lines: what it is, the commit, the date and the GPU (extra
# nvidia-smi --query-gpu fields as $2).
gpu_header() {
  note "== gannet $1: commit ${GANNET_COMMIT:-unknown}, $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total${2:+,$2} --format=csv,noheader 2>&1 | tee -a "$summary"
}

# An sm_90 Release build of the given targets only.
gpu_build() {
  cmake -S . -B "$build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DGANNET_BUILD_EXAMPLES=OFF > "$out/build.log" 2>&1 &&
    ninja -C "$build" -j"$(nproc)" "$@" >> "$out/build.log" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && tail -40 "$out/build.log"
  return $rc
}

# gpu_build_base TARGET...: the same build of the baseline in .base/src.tar.gz (tools/gpu/make_base.sh
# on the workstation; carry ".base"), unpacked in /tmp/gannet-base-src and built in
# $GANNET_BASE_BUILD (default /tmp/gannet-base), for A/B runs side by side on one machine.
base_build=${GANNET_BASE_BUILD:-/tmp/gannet-base}
gpu_build_base() {
  local src=/tmp/gannet-base-src
  [ -f .base/src.tar.gz ] || { echo "no .base/src.tar.gz (tools/gpu/make_base.sh)"; return 2; }
  note "baseline: $(cat .base/commit 2>/dev/null)"
  rm -rf "$src" && mkdir -p "$src" && tar -xzf .base/src.tar.gz -C "$src" &&
    (cd "$src" && GANNET_GPU_BUILD="$base_build" OUT="$out/base" bash -c \
      'source tools/gpu/stages.sh && gpu_build "$@"' _ "$@")
}

# ab_build base|new: the build directory of the baseline or of this tree.
ab_build() { if [ "$1" = base ]; then echo "$base_build"; else echo "$build"; fi; }

# gpu_decode_ab ARGS...: gannet-decode-bench ARGS on the baseline build, then on this tree's (the
# run's last lines, info logs left out), for A/B runs side by side on one machine;
# GANNET_AB_ROUNDS (default 1) pairs, interleaved.
gpu_decode_ab() {
  local label round
  for round in $(seq "${GANNET_AB_ROUNDS:-1}"); do
    for label in base new; do
      note "-- $label: $*"
      timeout 240 "$(ab_build $label)/bench/runner/gannet-decode-bench" "$@" 2>&1 |
        grep -vE "^\s*$|^gannet \[I\]" | tail -5 | tee -a "$summary"
    done
  done
}

# 31B's largest decode batch at context 1500 that fits the GPU: 64 on an H200, 16 on an H100
# 80GB (64 sequences' KV, 55 GiB, does not fit beside the 61 GB of weights).
gpu_31b_batch() {
  local mib
  mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)
  if [ "${mib:-0}" -gt 100000 ]; then echo 64; else echo 16; fi
}

# gpu_decode_env_sweep VAR "VALUE..." ARGS...: gannet-decode-bench ARGS on this tree's build once
# per VALUE of VAR (the value "default" leaves VAR unset), GANNET_AB_ROUNDS (default 2) rounds,
# interleaved: where a diagnostic's default should sit (GANNET_GEMV_PREFETCH_KB="0 8 default").
gpu_decode_env_sweep() {
  local var=$1 values=$2 round value
  shift 2
  for round in $(seq "${GANNET_AB_ROUNDS:-2}"); do
    for value in $values; do
      note "-- $var=$value (round $round): $*"
      if [ "$value" = default ]; then
        env -u "$var" timeout 240 "$build/bench/runner/gannet-decode-bench" "$@" 2>&1
      else
        env "$var=$value" timeout 240 "$build/bench/runner/gannet-decode-bench" "$@" 2>&1
      fi | grep -E "^ +batch" | tee -a "$summary"
    done
  done
}

# gpu_decode_env_ab VAR[=VALUE] ARGS...: the sweep above over VALUE (default 0, the switch off)
# and the default: A/B of a change behind a switch (GANNET_PDL=0, GANNET_LINEAR_PATH=gemv) with
# no baseline build.
gpu_decode_env_ab() {
  local set=$1
  shift
  [[ "$set" == *=* ]] || set="$set=0"
  gpu_decode_env_sweep "${set%%=*}" "${set#*=} default" "$@"
}

# gpu_ctest TIMEOUT GREP TEST...: the named ctest tests, verbose into ctest.log; prints the log's
# lines that match GREP.
gpu_ctest() {
  local timeout=$1 pattern=$2
  shift 2
  (cd "$build" && ctest -R "^($(IFS='|'; echo "$*"))$" -V --timeout "$timeout") > "$out/ctest.log" 2>&1
  local rc=$?
  grep -E "$pattern" "$out/ctest.log" | tail -40
  return $rc
}

# The single-GPU kernel and runner tests a change to shared kernels owes, and gpu_single_tests,
# which runs them through gpu_ctest (the log in $out/ctest.log, its summary lines on stdout).
gpu_single_test_targets=(cuda_ops_test cuda_attention_test kernel_registry_test cuda_runner_test
  cuda_graph_test)
gpu_single_tests() {
  gpu_ctest 900 "tests passed|tests failed|Failed|FAILED|\*\*\*" "${gpu_single_test_targets[@]}"
}
# gpu_memcheck TIMEOUT LINES FILTER: compute-sanitizer memcheck on cuda_attention_test's cases
# matching the gtest FILTER; prints the log's last LINES lines.
gpu_memcheck() {
  timeout "$1" compute-sanitizer --tool memcheck --error-exitcode 1 --leak-check no \
    "$build/tests/backend/cuda_attention_test" --gtest_filter="$3" > "$out/memcheck.log" 2>&1
  local rc=$?
  tail -"$2" "$out/memcheck.log"
  return $rc
}

# gpu_memcheck_runner TIMEOUT FILTER: compute-sanitizer memcheck on cuda_runner_test's tests
# matching the gtest FILTER; prints the log's last lines.
gpu_memcheck_runner() {
  timeout "$1" compute-sanitizer --tool memcheck --error-exitcode 1 --leak-check no \
    "$build/tests/backend/cuda_runner_test" --gtest_filter="$2" > "$out/memcheck.log" 2>&1
  local rc=$?
  tail -8 "$out/memcheck.log"
  return $rc
}

# gpu_run_stages DEFAULT... -- STAGE...: runs each STAGE (the defaults when none is given) through
# its stage_<name> function, timing it into the summary; a failed build ends the run. Exits 1 if
# any stage failed.
gpu_run_stages() {
  local defaults=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do defaults+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  local stages=("$@") status=0 stage rc t0
  [ ${#stages[@]} -eq 0 ] && stages=("${defaults[@]}")
  for stage in "${stages[@]}"; do
    t0=$(date +%s)
    if declare -F "stage_$stage" > /dev/null; then
      "stage_$stage"
      rc=$?
    else
      echo "unknown stage $stage"
      rc=2
    fi
    note "== stage $stage: rc=$rc ($(( $(date +%s) - t0 )) s)"
    [ $rc -ne 0 ] && status=1
    [ "$stage" = build ] && [ $rc -ne 0 ] && break
  done
  exit $status
}
