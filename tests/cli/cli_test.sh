#!/usr/bin/env bash
# The gannet CLI through pipes and under a pseudo-terminal (util-linux `script`).
# usage: cli_test.sh GANNET_BINARY TINY_MODELS_DIR
set -uo pipefail
gannet=$1
tiny=$2
failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() {  # check NAME CONDITION-EXIT-CODE
  if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; failures=$((failures + 1)); fi
}
contains() { grep -qF -- "$2" "$1"; }

"$gannet" --help > "$tmp/help" 2>&1; check "--help exits 0" $?
contains "$tmp/help" "generate"; check "--help lists commands" $?
"$gannet" > /dev/null 2>&1; [ $? -eq 2 ]; check "no command exits 2" $?
"$gannet" frobnicate > "$tmp/unk" 2>&1; [ $? -eq 2 ] && contains "$tmp/unk" "unknown command 'frobnicate'"
check "unknown command is a usage error" $?
"$gannet" generate --help > "$tmp/ghelp"; contains "$tmp/ghelp" "--max-tokens"; check "generate --help" $?

"$gannet" info "$tiny/31b" > "$tmp/info"; check "info exits 0" $?
contains "$tmp/info" "gemma4-31b" && contains "$tmp/info" "skipped:" && contains "$tmp/info" "KV per token"
check "info describes the checkpoint" $?
"$gannet" info dummy:31b > "$tmp/info_dummy"; check "info on a dummy model exits 0" $?
contains "$tmp/info_dummy" "gemma4-31b" && contains "$tmp/info_dummy" "30.70 B" &&
  contains "$tmp/info_dummy" "generated on load" && contains "$tmp/info_dummy" "window 1024"
check "info describes a dummy model's real geometry" $?
"$gannet" info dummy:nope > "$tmp/info_nope" 2>&1; [ $? -eq 1 ] && contains "$tmp/info_nope" "unknown Gemma-4 variant 'nope'"
check "info on an unknown dummy variant names it" $?
"$gannet" info /nonexistent/model > "$tmp/info_bad" 2>&1; [ $? -eq 1 ] && contains "$tmp/info_bad" "/nonexistent/model/config.json"
check "info on a missing folder names the file" $?

"$gannet" generate -m "$tiny/e4b" --prompt-ids 2,120,130,140 -n 8 --ids --ignore-eos -q > "$tmp/g1"
check "generate by token ids" $?
ids=$(tail -n 1 "$tmp/g1")
[ "$(echo "$ids" | wc -w)" -eq 8 ]; check "generate prints 8 ids" $?
"$gannet" generate -m "$tiny/e4b" --prompt-ids 2,120,130,140 -n 8 --ids --ignore-eos -q --no-stream > "$tmp/g2"
cmp -s "$tmp/g1" "$tmp/g2"; check "greedy is deterministic; --no-stream prints the same" $?

echo "The quick brown fox" | "$gannet" generate -m "$tiny/31b" -n 6 --ids > "$tmp/stdin_out" 2> "$tmp/stdin_err"
check "prompt from stdin" $?
contains "$tmp/stdin_err" "prompt tokens" && contains "$tmp/stdin_err" "TTFT"; check "stats on stderr" $?

"$gannet" generate -m "$tiny/31b" -p hi -n abc > /dev/null 2> "$tmp/bad_n"; [ $? -eq 2 ] && contains "$tmp/bad_n" "expects an integer"
check "bad flag value is a usage error" $?
"$gannet" generate -p hi > /dev/null 2> "$tmp/no_model"; [ $? -eq 2 ] && contains "$tmp/no_model" "-m MODEL_DIR"
check "missing model says what to do" $?
"$gannet" generate -m /nonexistent -p hi > /dev/null 2> "$tmp/bad_model"; [ $? -eq 1 ] && contains "$tmp/bad_model" "hint:"
check "unloadable model gives a hint" $?
"$gannet" generate -m "$tiny/31b" -p hi --temperature -1 > /dev/null 2> "$tmp/bad_t"; [ $? -eq 1 ] && contains "$tmp/bad_t" "temperature"
check "invalid sampling value is reported" $?

# chat through a pipe: two turns, the second reuses the first from the prefix cache.
printf 'Hello there, how are you doing today?\nAnd what else can you tell me?\n/stats\n' |
  "$gannet" chat -m "$tiny/e4b" -n 16 --ignore-eos > "$tmp/chat_out" 2> "$tmp/chat_err"
check "chat through a pipe" $?
[ "$(grep -c 'prompt tokens' "$tmp/chat_err")" -eq 2 ]; check "chat answered two turns" $?
grep -q "generated" "$tmp/chat_out" && grep -q "prefix cache" "$tmp/chat_out"; check "chat /stats" $?
second=$(grep 'prompt tokens' "$tmp/chat_err" | tail -n 1)
echo "$second" | grep -qv "(0 from the prefix cache)"; check "second turn served from the prefix cache" $?

# chat under a pseudo-terminal: interactive banner and prompt, /exit ends it.
if command -v script > /dev/null; then
  printf 'Hi!\n/exit\n' | script -qec "'$gannet' chat -m '$tiny/e2b' -n 8" /dev/null > "$tmp/pty" 2>&1
  check "chat under a pty exits 0" $?
  contains "$tmp/pty" "gannet chat (" && contains "$tmp/pty" "/exit to quit"; check "pty shows the interactive banner" $?
  printf 'Tell me a story\n' | script -qec "'$gannet' generate -m '$tiny/31b' -n 4" /dev/null > "$tmp/pty_gen" 2>&1
  contains "$tmp/pty_gen" "TTFT"; check "generate under a pty" $?
else
  echo "skip pty checks: util-linux 'script' not found"
fi

if [ "$failures" -ne 0 ]; then echo "$failures CLI check(s) failed"; exit 1; fi
echo "all CLI checks passed"
