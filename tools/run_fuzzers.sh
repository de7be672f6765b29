#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (the "fuzz" preset: clang, ASan + UBSan, CPU only)
# and runs each for FUZZ_SECONDS on a fresh copy of its committed corpus (tests/fuzz/corpus/<t>;
# the committed files are never modified), with its dictionary (tests/fuzz/dict). Prints per
# target the executions, exec/s, coverage (cov:/ft: of libFuzzer's last status line), the seed,
# and any crash/leak/timeout/OOM artifact. Exits non-zero when any target found something.
#
#   FUZZ_SECONDS=60     seconds per target (make fuzz; CI uses less, see .ci/run)
#   FUZZ_TARGETS="..."  a subset, e.g. "tokenizer_fuzz request_fuzz"
#   FUZZ_JOBS=N         targets run at the same time (default: nproc; each uses one core)
#   FUZZ_SEED=N         libFuzzer's -seed (default: random; the log names the one used)
#   FUZZ_EXTRA="..."    more libFuzzer flags
# Work folders: build/fuzz/runs/<target>/{corpus,artifacts,log}. To reproduce a finding:
#   build/fuzz/tests/fuzz/<target> <artifact>
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
read -r -a targets <<< "${FUZZ_TARGETS:-safetensors_fuzz config_fuzz tokenizer_fuzz chat_template_fuzz jinja_template_fuzz request_fuzz api_request_fuzz tool_calls_fuzz image_decode_fuzz}"
jobs=$(nproc)

# -max_len per target: the largest seed fits (safetensors headers of the tiny checkpoints are up
# to 24 KB, the tiny tokenizer.json 20 KB); the others are small structured inputs.
max_len() {
  case "$1" in
    safetensors_fuzz) echo 32768 ;;
    tokenizer_fuzz) echo 24576 ;;
    config_fuzz) echo 8192 ;;
    jinja_template_fuzz) echo 20480 ;;
    image_decode_fuzz) echo 16384 ;;
    *) echo 4096 ;;
  esac
}
dict() {
  case "$1" in
    safetensors_fuzz) echo tests/fuzz/dict/safetensors.dict ;;
    config_fuzz) echo tests/fuzz/dict/config.dict ;;
    tokenizer_fuzz) echo tests/fuzz/dict/tokenizer.dict ;;
    chat_template_fuzz) echo tests/fuzz/dict/chat_template.dict ;;
    api_request_fuzz) echo tests/fuzz/dict/api_request.dict ;;
    *) echo "" ;;
  esac
}

if ! command -v clang++ > /dev/null; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "installing: clang (libFuzzer)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq clang > /tmp/gannet-apt-clang.log 2>&1 || {
      apt-get update -qq && apt-get install -y -qq clang; }
  else
    echo "the fuzz targets need clang with libFuzzer; run:"
    echo "  sudo apt-get install -y clang"
    exit 1
  fi
fi

build_start=$(date +%s)
mkdir -p build
cmake --preset fuzz > build/fuzz.configure.log 2>&1 || { cat build/fuzz.configure.log; exit 1; }
# The C ABI objects too: the fuzz preset is clang, so it also runs the thread-safety analysis
# (GANNET_THREAD_SAFETY) over the whole library (the C ABI objects and the engine under them;
# libgannet.so itself does not link with ASan), which CI would otherwise compile once more.
cmake --build build/fuzz -j "$jobs" --target gannet_fuzzers gannet_capi_objs
echo "fuzz build: $(( $(date +%s) - build_start )) s"

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0:${ASAN_OPTIONS:-}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}

# One target: fresh work folder, the run, then its one-line result in $work/result (and "failed"
# when it found something).
run_one() {
  local t=$1 bin=build/fuzz/tests/fuzz/$1 work=build/fuzz/runs/$1
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp tests/fuzz/corpus/"$t"/* "$work/corpus/"
  local args=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len="$(max_len "$t")"
              -print_final_stats=1 -artifact_prefix="$work/artifacts/")
  local d
  d=$(dict "$t")
  [ -n "$d" ] && args+=(-dict="$d")
  [ -n "${FUZZ_SEED:-}" ] && args+=(-seed="$FUZZ_SEED")
  # shellcheck disable=SC2206
  [ -n "${FUZZ_EXTRA:-}" ] && args+=(${FUZZ_EXTRA})
  local rc=0
  # The outer timeout only guards against a fuzzer that ignores -max_total_time.
  timeout --signal=KILL $(( seconds + 300 )) "$bin" "${args[@]}" "$work/corpus" \
    > "$work/log" 2>&1 || rc=$?
  local last execs rate cov ft corp seed artifacts line
  last=$(grep -E '^#[0-9]+' "$work/log" | tail -1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<< "$last")
  seed=$(sed -n 's/^INFO: Seed: //p' "$work/log" | head -1)
  artifacts=$(find "$work/artifacts" -type f | sort)
  line=$(printf '%-20s execs %-9s exec/s %-6s cov %-5s ft %-6s corpus %-10s seed %s' "$t" \
         "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "${seed:-?}")
  if [ "$rc" -ne 0 ] || [ -n "$artifacts" ]; then
    line+="  FAILED (exit $rc, log $work/log)"
    local details
    details=$(grep -E 'ERROR: |SUMMARY: |fuzz property violated|runtime error' "$work/log" | head -10 || true)
    [ -n "$details" ] && line+=$'\n    '"${details//$'\n'/$'\n    '}"
    for a in $artifacts; do
      line+=$'\n'"    artifact: $a  (reproduce: $bin $a)"
    done
    touch "$work/failed"
  fi
  echo "$line" > "$work/result"
  echo "$line"
}

# Targets run side by side, FUZZ_JOBS at a time (default: one per core): each is one process on
# one core, so the per-target numbers match a sequential run on an idle machine.
parallel=${FUZZ_JOBS:-$jobs}
echo "== fuzzing ${#targets[@]} targets, ${seconds} s each, ${parallel} at a time"
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$parallel" ]; then
    wait -n || true
    running=$(( running - 1 ))
  fi
  run_one "$t" &
  running=$(( running + 1 ))
done
wait || true

status=0
echo
echo "== fuzz summary (${seconds} s per target, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
for t in "${targets[@]}"; do
  cat "build/fuzz/runs/$t/result" 2>/dev/null || { echo "$t: no result"; status=1; }
  [ -e "build/fuzz/runs/$t/failed" ] && status=1
done
[ "$status" -eq 0 ] && echo "no findings" || echo "FINDINGS: see the artifacts above"
exit $status
