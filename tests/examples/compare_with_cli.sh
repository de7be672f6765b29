#!/usr/bin/env bash
# An embedding example must print exactly what the gannet CLI prints for the same request (greedy,
# or sampled with the same --seed: without one every run draws a random seed).
# usage: compare_with_cli.sh GANNET_CLI TINY_MODELS_DIR KIND EXAMPLE
#   KIND minimal:  EXAMPLE MODEL PROMPT N      vs  gannet generate -m MODEL --chat -p PROMPT -n N -q
#   KIND generate: EXAMPLE <CLI generate flags> vs  gannet generate <the same flags> -q
# (The CLI rejects positional arguments and unknown flags: every case spells its flags as
# `gannet generate --help` does.)
# An EXAMPLE of the form "missing:TOOL" means the toolchain was not found: the test is skipped
# (exit 77, ctest's SKIP_RETURN_CODE).
set -uo pipefail
cli=$1 tiny=$2 kind=$3 example=$4
if [[ $example == missing:* ]]; then
  echo "SKIP: ${example#missing:} is not installed, so this example was not built"
  exit 77
fi
[ -x "$example" ] || { echo "FAIL: $example was not built"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0 cases=0

# compare NAME EXPECTED_IDS CLI_ARGS... -- EXAMPLE_ARGS...
# EXPECTED_IDS > 0: the output's last line must hold that many token ids (the request ran).
compare() {
  local name=$1 want_ids=$2
  shift 2
  local cli_args=() ex_args=()
  while [ "$1" != "--" ]; do cli_args+=("$1"); shift; done
  shift
  ex_args=("$@")
  cases=$((cases + 1))
  "$cli" generate "${cli_args[@]}" -q > "$tmp/cli" 2> "$tmp/cli.err" || {
    echo "FAIL $name: the CLI failed:"; cat "$tmp/cli.err"; failures=$((failures + 1)); return; }
  "$example" "${ex_args[@]}" > "$tmp/ex" 2> "$tmp/ex.err" || {
    echo "FAIL $name: the example failed:"; cat "$tmp/ex.err"; failures=$((failures + 1)); return; }
  if ! cmp -s "$tmp/cli" "$tmp/ex"; then
    echo "FAIL $name: output differs from the CLI's"
    diff <(od -c "$tmp/cli") <(od -c "$tmp/ex") | head -20
    failures=$((failures + 1))
    return
  fi
  if [ "$want_ids" -gt 0 ] && [ "$(tail -n 1 "$tmp/ex" | wc -w)" -ne "$want_ids" ]; then
    echo "FAIL $name: expected $want_ids token ids, got: $(tail -n 1 "$tmp/ex")"
    failures=$((failures + 1))
    return
  fi
  if [ ! -s "$tmp/ex" ] || [ "$(wc -c < "$tmp/ex")" -le 1 ]; then
    echo "FAIL $name: no text was generated"
    failures=$((failures + 1))
    return
  fi
  echo "ok   $name ($(wc -c < "$tmp/ex") bytes)"
}

case $kind in
  minimal)
    compare "chat e4b" 0 -m "$tiny/e4b" --chat -p "Hello there, who are you?" -n 16 \
      -- "$tiny/e4b" "Hello there, who are you?" 16
    compare "chat 31b" 0 -m "$tiny/31b" --chat -p "Tell me a story" -n 12 \
      -- "$tiny/31b" "Tell me a story" 12
    ;;
  generate)
    same() { local name=$1 ids=$2; shift 2; compare "$name" "$ids" "$@" -- "$@"; }
    same "token ids, 31b" 12 -m "$tiny/31b" --prompt-ids 2,120,130,140 -n 12 --ids --ignore-eos
    same "system + chat, e4b" 0 -m "$tiny/e4b" --system "Be brief." -p "Hello there, who are you?" -n 16 --ids
    # llama.cpp's short flags: -s is the seed, -t the CPU threads.
    same "sampled with -s, 2 threads, e4b" 10 -m "$tiny/e4b" --prompt-ids 2,120,130,140 -n 10 --ids \
      --ignore-eos --temp 0.9 -s 77 -t 2
    same "text, e2b" 8 -m "$tiny/e2b" -p "The quick brown fox" -n 8 --ids --ignore-eos
    # Unseeded sampling is random (GANNET_SEED_RANDOM): a sampled case must fix the seed.
    same "sampled with --seed, e4b" 10 -m "$tiny/e4b" --prompt-ids 2,120,130,140 -n 10 --ids \
      --ignore-eos --temperature 0.9 --top-k 50 --top-p 0.95 --seed 1234
    # Speculative decoding with the tiny model's MTP assistant (greedy: the plain output).
    same "speculative with --draft, 31b" 12 -m "$tiny/31b" --draft "$tiny/31b-assistant" \
      --spec-tokens 2 --prompt-ids 2,120,130,140 -n 12 --ids --ignore-eos
    same "chat with --draft and --no-spec, e4b" 0 -m "$tiny/e4b" --draft "$tiny/e4b-assistant" \
      --no-spec -p "Hello there, who are you?" --chat -n 16 --ids
    ;;
  *) echo "unknown kind $kind"; exit 2 ;;
esac
if [ "$failures" -ne 0 ]; then echo "$failures of $cases comparisons failed"; exit 1; fi
echo "all $cases outputs equal the CLI's"
