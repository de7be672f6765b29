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

# Output that cannot be written is a failure, not exit 0 (issue 56).
if [ -w /dev/full ]; then
  "$gannet" --help > /dev/full 2> "$tmp/full"; [ $? -ne 0 ] && contains "$tmp/full" "cannot write to standard output"
  check "--help to a full device fails" $?
  "$gannet" version > /dev/full 2> /dev/null; [ $? -ne 0 ]; check "version to a full device fails" $?
  "$gannet" info "$tiny/e2b" > /dev/full 2> /dev/null; [ $? -ne 0 ]; check "info to a full device fails" $?
fi
GANNET_LOG_LEVEL=garbage "$gannet" version > /dev/null 2> "$tmp/level"; [ $? -eq 2 ] &&
  contains "$tmp/level" "GANNET_LOG_LEVEL must be one of debug, info, warning, error, off"
check "an unknown GANNET_LOG_LEVEL is named with the valid values" $?
"$gannet" generate -m "$tiny/31b" -n 2 <&- > /dev/null 2> "$tmp/closed"; [ $? -eq 2 ] &&
  contains "$tmp/closed" "standard input is closed"
check "a closed stdin is not an empty prompt" $?

"$gannet" info "$tiny/31b" > "$tmp/info"; check "info exits 0" $?
contains "$tmp/info" "gemma4 custom (8 layers, hidden 48" && contains "$tmp/info" "; dense)" && contains "$tmp/info" "skipped:" && contains "$tmp/info" "KV per token"
check "info describes the checkpoint" $?
"$gannet" info dummy:31b > "$tmp/info_dummy"; check "info on a dummy model exits 0" $?
contains "$tmp/info_dummy" "gemma4-31b" && contains "$tmp/info_dummy" "30.70 B" &&
  contains "$tmp/info_dummy" "generated on load" && contains "$tmp/info_dummy" "window 1024"
check "info describes a dummy model's real geometry" $?
"$gannet" info dummy:nope > "$tmp/info_nope" 2>&1; [ $? -eq 1 ] && contains "$tmp/info_nope" "unknown Gemma-4 variant 'nope'"
check "info on an unknown dummy variant names it" $?
"$gannet" info /nonexistent/model > "$tmp/info_bad" 2>&1; [ $? -eq 1 ] && contains "$tmp/info_bad" "/nonexistent/model/config.json"
check "info on a missing folder names the file" $?

# gannet quantize (gannet-quantize): an int4 checkpoint that info describes and generate runs.
"$gannet" quantize "$tiny/trained" "$tmp/trained-int4" --weight-dtype int4-g32 > "$tmp/quantize" 2>&1 &&
  contains "$tmp/quantize" "27 modules quantized, 0 kept" && [ -f "$tmp/trained-int4/tokenizer.json" ]
check "quantize writes an int4 g32 checkpoint with the tokenizer" $?
"$gannet" info "$tmp/trained-int4" > "$tmp/info_q" &&
  contains "$tmp/info_q" "weights:      int4 g32 (bf16 scales), compressed-tensors" &&
  contains "$tmp/info_q" "kept plain:   embeddings" && contains "$tmp/info_q" "by kind:      attention"
check "info shows the int4 format, bytes by kind and what stayed plain" $?
"$gannet" info "$tiny/trained" > "$tmp/info_bf16" && contains "$tmp/info_bf16" "weights:      bf16" &&
  ! contains "$tmp/info_bf16" "kept plain"
check "info shows a bf16 checkpoint as bf16" $?
"$gannet" generate -m "$tmp/trained-int4" --backend cpu -p hi -n 4 --ignore-eos -q > "$tmp/gen_q" 2>&1
check "generate runs the int4 checkpoint on the CPU backend" $?
"$gannet" quantize "$tiny/trained" "$tmp/trained-fp8" --weight-dtype fp8-channel > "$tmp/quantize_fp8" 2>&1 &&
  "$gannet" info "$tmp/trained-fp8" > "$tmp/info_fp8" &&
  contains "$tmp/info_fp8" "weights:      fp8 channel (bf16 scales), A8 token, compressed-tensors" &&
  "$gannet" generate -m "$tmp/trained-fp8" --backend cpu -p hi -n 4 --ignore-eos -q > "$tmp/gen_fp8" 2>&1
check "quantize writes an FP8 checkpoint that info describes and generate runs" $?
"$gannet" quantize "$tiny/trained" "$tmp/bad" --weight-dtype int4-g16 > "$tmp/quantize_bad" 2>&1
[ $? -eq 2 ] && contains "$tmp/quantize_bad" "weight dtype 'int4-g16': expected int4-g32"
check "quantize names a bad --weight-dtype" $?
"$gannet" quantize "$tmp/trained-int4" "$tmp/twice" > "$tmp/quantize_twice" 2>&1
[ $? -eq 1 ] && contains "$tmp/quantize_twice" "is already quantized"
check "quantize refuses a quantized checkpoint" $?

"$gannet" generate -m "$tiny/e4b" --prompt-ids 2,120,130,140 -n 8 --ids --ignore-eos -q > "$tmp/g1"
check "generate by token ids" $?
ids=$(tail -n 1 "$tmp/g1")
[ "$(echo "$ids" | wc -w)" -eq 8 ]; check "generate prints 8 ids" $?
"$gannet" generate -m "$tiny/e4b" --prompt-ids 2,120,130,140 -n 8 --ids --ignore-eos -q --no-stream > "$tmp/g2"
cmp -s "$tmp/g1" "$tmp/g2"; check "greedy is deterministic; --no-stream prints the same" $?

"$gannet" generate -m "$tiny/e4b" --backend cpu --kv-cache-dtype fp8 --prompt-ids 2,120,130,140 -n 8 --ids --ignore-eos > "$tmp/fp8" 2> "$tmp/fp8_err"
check "--kv-cache-dtype fp8 generates" $?
contains "$tmp/fp8_err" "fp8_e4m3"; check "the banner names the KV cache type" $?
"$gannet" generate -m "$tiny/e4b" --backend cpu --kv-cache-dtype int4 -p hi > /dev/null 2> "$tmp/fp8_bad"; [ $? -eq 1 ] && contains "$tmp/fp8_bad" "kv_cache_dtype 'int4'"
check "an unknown KV cache type is named" $?

echo "The quick brown fox" | "$gannet" generate -m "$tiny/31b" -n 6 --ids > "$tmp/stdin_out" 2> "$tmp/stdin_err"
check "prompt from stdin" $?
contains "$tmp/stdin_err" "prompt tokens" && contains "$tmp/stdin_err" "TTFT"; check "stats on stderr" $?

"$gannet" generate -m "$tiny/31b" -p hi -n abc > /dev/null 2> "$tmp/bad_n"; [ $? -eq 2 ] && contains "$tmp/bad_n" "expects an integer"
check "bad flag value is a usage error" $?
"$gannet" generate -p hi > /dev/null 2> "$tmp/no_model"; [ $? -eq 2 ] && contains "$tmp/no_model" "-m MODEL_DIR"
check "missing model says what to do" $?
"$gannet" generate -m /nonexistent -p hi > /dev/null 2> "$tmp/bad_model"; [ $? -eq 1 ] && contains "$tmp/bad_model" "hint:"
check "unloadable model gives a hint" $?
"$gannet" generate -m "$tiny/31b" -p hi --temperature -1 > /dev/null 2> "$tmp/bad_t"; [ $? -eq 2 ] && contains "$tmp/bad_t" "temperature"
check "invalid sampling value is a usage error" $?

# The parser never guesses.
usage_error() {  # usage_error NAME EXPECTED-TEXT ARGS...: exit 2 naming the problem, nothing loaded
  local name=$1 want=$2
  shift 2
  "$gannet" "$@" > "$tmp/usage_out" 2> "$tmp/usage_err"
  local rc=$?
  [ $rc -eq 2 ] && contains "$tmp/usage_err" "$want" && ! contains "$tmp/usage_err" "[gannet:"
  check "$name" $?
}
usage_error "llama-style -ngl is an error" "unknown option -ngl" generate -m "$tiny/31b" -p hi -ngl 99
usage_error "-n5 is an error that says -n 5" "-n 5" generate -m "$tiny/31b" -p hi -n5
usage_error "a positional argument is an error" "unexpected argument 'extra'" generate -m "$tiny/31b" -p hi extra
usage_error "-p with --prompt-ids is an error" "not both" generate -m "$tiny/31b" -p hi --prompt-ids 2,3
usage_error "-n 4294967297 is out of range" "[0, 2147483647]" generate -m "$tiny/31b" -p hi -n 4294967297
usage_error "--prompt-ids 4294967298 is out of range" "--prompt-ids" generate -m "$tiny/31b" --prompt-ids 4294967298
usage_error "--seed -2 is out of range" "--seed" generate -m "$tiny/31b" -p hi --seed -2
usage_error "--top-p 2 is out of range" "--top-p" generate -m "$tiny/31b" -p hi --top-p 2
usage_error "--stop-id -3 is out of range" "--stop-id" generate -m "$tiny/31b" -p hi --stop-id -3
usage_error "--backend gpu is not a backend" "cpu or cuda" generate -m "$tiny/31b" -p hi --backend gpu
usage_error "--logprobs 99 is out of range" "--logprobs" generate -m "$tiny/31b" -p hi --logprobs 99
usage_error "--threads 5000 is out of range" "--threads" generate -m "$tiny/31b" -p hi --threads 5000
usage_error "a flag given twice is an error" "given twice" generate -m "$tiny/31b" -p hi -n 3 -n 4
usage_error "min_tokens > max_tokens before loading" "min_tokens" generate -m "$tiny/31b" -p hi -n 3 --min-tokens 9
usage_error "--thinking without --chat is an error" "--thinking needs --chat" generate -m "$tiny/31b" -p hi --thinking
# A prompt on stdin with a NUL byte would be cut at it by the C ABI: refused, nothing loaded.
printf 'one\0two' | "$gannet" generate -m "$tiny/31b" > /dev/null 2> "$tmp/nul_err"
[ $? -eq 2 ] && contains "$tmp/nul_err" "NUL byte (at byte 3)"; check "a NUL byte in the stdin prompt is an error" $?
# Checked before any weight loads: a text prompt for a model without tokenizer.json.
start=$(date +%s%N)
usage_error "text prompt without a tokenizer fails before loading" "tokenizer.json" generate -m dummy:e2b -p hi
[ $(( ($(date +%s%N) - start) / 1000000 )) -lt 3000 ]; check "... within 3 s" $?
"$gannet" generate -m "$tiny/31b" -p hi --device 7 > /dev/null 2> "$tmp/dev7"; [ $? -eq 1 ] && contains "$tmp/dev7" "device 7"
check "a device that does not exist is an error" $?

# Tensor parallelism: on the CPU backend the ranks are threads.
contains "$tmp/ghelp" "--tp N" && contains "$tmp/ghelp" "--tensor-parallel-size" && contains "$tmp/ghelp" "--devices IDS"
check "generate --help documents --tp and --devices" $?
usage_error "--tp 0 is out of range" "--tp" generate -m "$tiny/31b" -p hi --tp 0
usage_error "--tensor-parallel-size 9 is out of range" "--tp" generate -m "$tiny/31b" -p hi --tensor-parallel-size 9
usage_error "--devices 0,x is an error" "--devices" generate -m "$tiny/31b" -p hi --devices 0,x
usage_error "--devices with 9 ids is an error" "--devices" generate -m "$tiny/31b" -p hi --devices 0,1,2,3,4,5,6,7,8
"$gannet" generate -m "$tiny/31b" --prompt-ids 2,120,130,140 -n 8 --ids --ignore-eos -q --tp 2 --backend cpu > "$tmp/tp2"
check "--tp 2 --backend cpu generates" $?
[ "$(tail -n 1 "$tmp/tp2" | wc -w)" -eq 8 ]; check "--tp 2 prints 8 ids" $?
"$gannet" generate -m "$tiny/31b" -p hi --tp 3 --backend cpu > /dev/null 2> "$tmp/tp3"; [ $? -eq 1 ] && contains "$tmp/tp3" "num_attention_heads"
check "--tp 3 over 4 heads is refused, naming why" $?

# Tensor parallelism over processes: the group id and the flags that join one.
contains "$tmp/help" "tp-id"; check "--help lists tp-id" $?
contains "$tmp/ghelp" "--tp-id HEX" && contains "$tmp/ghelp" "--tp-rank N"
check "generate --help documents --tp-id and --tp-rank" $?
"$gannet" chat --help > "$tmp/chelp"; contains "$tmp/chelp" "--tp-id HEX" && contains "$tmp/chelp" "--tp-rank N"
check "chat --help documents --tp-id and --tp-rank" $?
"$gannet" tp-id --help > "$tmp/tphelp"; [ $? -eq 0 ] && contains "$tmp/tphelp" "NCCL_COMM_ID"
check "tp-id --help" $?
"$gannet" tp-id > "$tmp/tpid" 2> "$tmp/tpid_err"
rc=$?
if [ $rc -eq 0 ]; then
  grep -qxE '[0-9a-f]{256}' "$tmp/tpid" && [ "$(wc -l < "$tmp/tpid")" -eq 1 ] && [ "$(wc -c < "$tmp/tpid")" -eq 257 ]
  check "tp-id prints 256 lowercase hex characters and a newline" $?
  tpid=$(cat "$tmp/tpid")
else
  [ $rc -eq 1 ] && [ ! -s "$tmp/tpid" ] && contains "$tmp/tpid_err" "NCCL"
  check "tp-id without NCCL fails, saying so" $?
  tpid=$(printf '%0256d' 0)
fi
usage_error "tp-id takes no argument" "unexpected argument" tp-id extra
usage_error "--tp-id with a bad hex string names --tp-id" "--tp-id" generate -m "$tiny/31b" -p hi --tp 2 --tp-id xyz
usage_error "--tp-id of 256 characters, not all hex, names --tp-id" "--tp-id" generate -m "$tiny/31b" -p hi --tp 2 --tp-id "$(printf 'g%0255d' 0)"
usage_error "--tp-id without --tp is an error" "--tp N" generate -m "$tiny/31b" -p hi --tp-id "$tpid"
usage_error "--tp-rank without --tp-id is an error" "--tp-id" generate -m "$tiny/31b" -p hi --tp 2 --tp-rank 1
usage_error "--tp-rank outside --tp is an error" "--tp-rank 2" generate -m "$tiny/31b" -p hi --tp 2 --tp-id "$tpid" --tp-rank 2
usage_error "chat: --tp-id with a bad hex string names --tp-id" "--tp-id" chat -m "$tiny/31b" --tp 2 --tp-id 00
# A rank above 0 serves rank 0 instead of generating; on the CPU backend it cannot join (NCCL).
"$gannet" generate -m "$tiny/31b" --tp 2 --tp-id "$tpid" --tp-rank 1 --backend cpu < /dev/null > "$tmp/serve_out" 2> "$tmp/serve_err"
[ $? -eq 1 ] && [ ! -s "$tmp/serve_out" ] && contains "$tmp/serve_err" "serving rank 0" &&
  contains "$tmp/serve_err" "cannot load the model"
check "--tp-rank 1 serves rank 0, and fails cleanly where it cannot join" $?

# The familiar llama.cpp spellings where they do not clash.
"$gannet" generate -m "$tiny/e4b" --prompt-ids 2,120,130 -n 4 --temp 0.7 --seed 11 -c 512 --ctx-size 512 --ids -q > /dev/null 2>&1
[ $? -eq 2 ]; check "-c and --ctx-size are one flag (given twice)" $?
"$gannet" generate -m "$tiny/e4b" --prompt-ids 2,120,130 -n 4 --temp 0.7 --seed 11 -c 512 --kv-memory 64M --ids -q > "$tmp/llama" 2>&1
check "--temp, --seed, -c and --kv-memory are accepted" $?

# Sampling without --seed is random (OS entropy); --seed makes it repeatable.
sample() { "$gannet" generate -m "$tiny/e4b" --prompt-ids 2,120,130,140 -n 24 --ignore-eos --temperature 1.5 --ids -q "$@" | tail -n 1; }
a=$(sample); b=$(sample)
[ "$a" != "$b" ]; check "unseeded sampling differs between runs" $?
a=$(sample --seed 5); b=$(sample --seed 5)
[ -n "$a" ] && [ "$a" = "$b" ]; check "--seed makes sampling repeatable" $?

# --logprobs prints what it promises: one line per token with the top-N on stderr.
"$gannet" generate -m "$tiny/e4b" --prompt-ids 2,120,130 -n 5 --ignore-eos --logprobs 3 -q > /dev/null 2> "$tmp/lp"
[ "$(grep -ac '^logprobs: ' "$tmp/lp")" -eq 5 ] && [ "$(grep -a '^logprobs: ' "$tmp/lp" | head -1 | grep -oE ' -?[0-9]+\.[0-9]{4}( |$)' | wc -l)" -eq 4 ]
check "--logprobs 3 prints each token with its top 3" $?

# Output errors fail loudly.
"$gannet" generate -m "$tiny/e4b" -p hi -n 4 > /dev/full 2> "$tmp/full"; [ $? -eq 1 ] && contains "$tmp/full" "cannot write to standard output"
check "a full stdout is an error" $?

# The engine says where it runs and how long loading took.
"$gannet" generate -m "$tiny/e4b" -p hi -n 2 > /dev/null 2> "$tmp/summary"
contains "$tmp/summary" "[gannet: cpu" && contains "$tmp/summary" "loaded in" && contains "$tmp/summary" "| load "
check "engine summary and load time in the statistics line" $?

# Speculative decoding: --draft gives the same greedy output, and says what it drafted.
spec_out() { "$gannet" generate -m "$tiny/26b-a4b" --prompt-ids 2,120,130,140 -n 20 --ignore-eos --ids "$@"; }
spec_out > "$tmp/plain" 2> /dev/null
spec_out --draft "$tiny/26b-a4b-assistant" --spec-tokens 5 > "$tmp/spec" 2> "$tmp/spec_err"
[ -s "$tmp/plain" ] && cmp -s "$tmp/plain" "$tmp/spec" && contains "$tmp/spec_err" "5 drafts per round" &&
  contains "$tmp/spec_err" "| drafts "
check "--draft: the same greedy tokens, drafts in the statistics" $?
spec_out --draft "$tiny/26b-a4b-assistant" --no-spec > "$tmp/nospec" 2> "$tmp/nospec_err"
cmp -s "$tmp/plain" "$tmp/nospec" && ! contains "$tmp/nospec_err" "| drafts "
check "--no-spec decodes without drafts" $?
usage_error "--spec-tokens without --draft" "needs --draft" generate -m "$tiny/31b" -p hi --spec-tokens 3
usage_error "--spec-tokens 9 is out of range" "--spec-tokens" generate -m "$tiny/31b" -p hi --draft "$tiny/31b-assistant" --spec-tokens 9
"$gannet" generate -m "$tiny/31b" -p hi --draft "$tiny/e2b-assistant" > /dev/null 2> "$tmp/baddraft"
[ $? -eq 1 ] && contains "$tmp/baddraft" "backbone_hidden_size"
check "a drafter of another target is refused, naming why" $?

# Ctrl-C stops the reply; statistics still print; exit 130.
"$gannet" generate -m "$tiny/e4b" --prompt-ids 2,120,130 -n 0 --ignore-eos > "$tmp/int_out" 2> "$tmp/int_err" &
pid=$!
sleep 1.5
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] && contains "$tmp/int_err" "finish: cancelled"
check "Ctrl-C cancels the reply and prints its statistics (exit 130)" $?

# chat through a pipe: two turns, the second reuses the first from the prefix cache.
printf 'Hello there, how are you doing today?\nAnd what else can you tell me?\n/stats\n' |
  "$gannet" chat -m "$tiny/e4b" -n 16 --ignore-eos > "$tmp/chat_out" 2> "$tmp/chat_err"
check "chat through a pipe" $?
[ "$(grep -c 'prompt tokens' "$tmp/chat_err")" -eq 2 ]; check "chat answered two turns" $?
grep -q "generated" "$tmp/chat_out" && grep -q "prefix cache" "$tmp/chat_out"; check "chat /stats" $?
second=$(grep 'prompt tokens' "$tmp/chat_err" | tail -n 1)
echo "$second" | grep -qv "(0 from the prefix cache)"; check "second turn served from the prefix cache" $?

# Ctrl-C during a chat answer returns to the prompt, and the conversation goes on.
mkfifo "$tmp/chat_in"
"$gannet" chat -m "$tiny/e4b" -n 0 --ignore-eos < "$tmp/chat_in" > "$tmp/chat_int_out" 2> "$tmp/chat_int_err" &
pid=$!
exec 9> "$tmp/chat_in"
echo "Tell me everything." >&9
sleep 1.5
kill -INT $pid
sleep 0.5
printf '/stats\n/exit\n' >&9
exec 9>&-
wait $pid
rc=$?
[ $rc -eq 0 ] && contains "$tmp/chat_int_err" "finish: cancelled" && contains "$tmp/chat_int_out" "prefix cache"
check "Ctrl-C in chat stops the answer and returns to the prompt" $?

# chat under a pseudo-terminal: interactive banner and prompt, /exit ends it.
if command -v script > /dev/null; then
  printf 'Hi!\n/exit\n' | script -qec "'$gannet' chat -m '$tiny/e2b' -n 8" /dev/null > "$tmp/pty" 2>&1
  check "chat under a pty exits 0" $?
  contains "$tmp/pty" "gannet chat (" && contains "$tmp/pty" "/exit to quit"; check "pty shows the interactive banner" $?
  ! contains "$tmp/pty" '\x1b[1m' && ! contains "$tmp/pty" '\x1b[0m'
  check "the chat prompt's style is not shown as escaped text" $?
  printf 'Tell me a story\n' | script -qec "'$gannet' generate -m '$tiny/31b' -n 4" /dev/null > "$tmp/pty_gen" 2>&1
  contains "$tmp/pty_gen" "TTFT"; check "generate under a pty" $?
  contains "$tmp/pty_gen" "loading weights"; check "a terminal shows load progress" $?
else
  echo "skip pty checks: util-linux 'script' not found"
fi

# llama.cpp habits mean what they mean there (issue 57): -t threads, -s seed, -sys system prompt.
trained="$tiny/trained"
threads=$(( $(nproc) + 1 ))  # not the default (all cores)
"$gannet" generate -m "$trained" --backend cpu -p hi -n 2 -t $threads > /dev/null 2> "$tmp/t2"
[ $? -eq 0 ] && contains "$tmp/t2" "cpu $threads threads"; check "-t N is N CPU threads, as in llama.cpp" $?
seeded() { "$gannet" generate -m "$trained" --backend cpu -p "Hello" -n 12 --ignore-eos --temp 1.5 --ids -q "$@" | tail -n 1; }
a=$(seeded -s 42); b=$(seeded --seed 42)
[ -n "$a" ] && [ "$a" = "$b" ]; check "-s 42 is the seed, as in llama.cpp" $?
"$gannet" generate -m "$trained" --backend cpu -p hi -n 1 -s 42 > /dev/null 2> "$tmp/s42"
plain=$("$gannet" generate -m "$trained" --backend cpu -p hi -n 1 2>&1 >/dev/null | grep -o '^\[[0-9]* prompt')
[ -n "$plain" ] && [ "$(grep -o '^\[[0-9]* prompt' "$tmp/s42")" = "$plain" ]; check "-s 42 adds no system message" $?
sys_a=$("$gannet" generate -m "$trained" --backend cpu -p hi -n 1 -sys "Be brief." 2>&1 >/dev/null | grep -o '^\[[0-9]* prompt')
sys_b=$("$gannet" generate -m "$trained" --backend cpu -p hi -n 1 --system-prompt "Be brief." 2>&1 >/dev/null | grep -o '^\[[0-9]* prompt')
[ -n "$sys_a" ] && [ "$sys_a" = "$sys_b" ] && [ "$sys_a" != "$plain" ]; check "-sys and --system-prompt are the system message" $?
"$gannet" generate -m "$trained" --backend cpu -p hi -n -1 -c 24 --ignore-eos -q --ids > "$tmp/n_minus1" 2>&1
[ $? -eq 0 ] && [ "$(tail -n 1 "$tmp/n_minus1" | wc -w)" -ge 10 ]; check "-n -1 generates until the context is full" $?
"$gannet" generate -m "$trained" --backend cpu -p hi -n 2 --seed -1 -c 0 -q > /dev/null 2>&1
check "--seed -1 (random) and -c 0 (the model's context) are accepted" $?
usage_error "--draft N names --spec-tokens" "--spec-tokens" generate -m "$trained" -p hi --draft 8
usage_error "-ngl says why it is not needed" "no layers to offload" generate -m "$trained" -p hi -ngl 99
usage_error "-t is no longer the temperature" "--threads" generate -m "$trained" -p hi -t 0.7

# -f/--file: the prompt from a file.
printf 'The quick brown fox' > "$tmp/prompt.txt"
"$gannet" generate -m "$trained" --backend cpu -f "$tmp/prompt.txt" -n 6 --ids -q > "$tmp/from_file"
"$gannet" generate -m "$trained" --backend cpu -p 'The quick brown fox' -n 6 --ids -q > "$tmp/from_p"
[ -s "$tmp/from_file" ] && cmp -s "$tmp/from_file" "$tmp/from_p"; check "-f FILE is the prompt" $?
usage_error "-f with a missing file names it" "/nonexistent/prompt.txt" generate -m "$trained" -f /nonexistent/prompt.txt
usage_error "-f with -p is an error" "not both" generate -m "$trained" -f "$tmp/prompt.txt" -p hi

# Machine-readable output, read back by a JSON parser.
if command -v python3 > /dev/null; then
  "$gannet" generate -m "$trained" --backend cpu -p "Hello" -n 5 --ignore-eos --logprobs 2 --json > "$tmp/gen.json" 2> /dev/null
  check "generate --json exits 0" $?
  python3 - "$tmp/gen.json" "$tmp/from_p" << 'PY'
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
assert len(lines) == 1, lines
o = json.loads(lines[0])
assert len(o["tokens"]) == 5 and o["generated_tokens"] == 5, o
assert o["finish"] == "length" and isinstance(o["text"], str) and o["thinking"] == "", o
assert len(o["logprobs"]) == 5 and all(len(t["top"]) == 2 for t in o["logprobs"]), o
assert [t["id"] for t in o["logprobs"]] == o["tokens"], o
assert all(t["logprob"] <= 0 for t in o["logprobs"]), o
assert o["prompt_tokens"] > 0 and o["ttft_ms"] >= 0 and "load_s" in o, o
PY
  check "generate --json: text, thinking, tokens, logprobs, stats" $?
  "$gannet" generate -m "$trained" --backend cpu -p "Hello" -n 5 --ignore-eos -q > "$tmp/gen.txt"
  python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); t=open(sys.argv[2]).read(); assert t == o["text"] + "\n", (t, o["text"])' "$tmp/gen.json" "$tmp/gen.txt"
  check "--json's text is the streamed text" $?
  "$gannet" info "$trained" --json > "$tmp/info.json"
  python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); assert o["has_tokenizer"] is True and o["num_layers"] == 4 and o["vocab_size"] > 0 and o["model"].endswith("trained"), o' "$tmp/info.json"
  check "info --json" $?
  "$gannet" tokenize -m "$trained" -p "Hello world" --pieces --json > "$tmp/tok.json"
  python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); assert o["ids"][0] == 2 and len(o["ids"]) == len(o["pieces"]) and "".join(o["pieces"][1:]) == "Hello world", o' "$tmp/tok.json"
  check "tokenize --pieces --json" $?
  printf 'Hello there\nHow are you\n' | "$gannet" chat -m "$trained" --backend cpu -n 4 --ignore-eos --json -q > "$tmp/chat.json"
  python3 -c 'import json,sys; ls=open(sys.argv[1]).read().splitlines(); os=[json.loads(l) for l in ls]; assert len(os) == 2 and all(o["generated_tokens"] == 4 for o in os) and os[1]["cached_prompt_tokens"] > 0, ls' "$tmp/chat.json"
  check "chat --json: one object a line per answer" $?
else
  echo "skip JSON checks: python3 not found"
fi

# tokenize: ids ready for --prompt-ids.
ids=$("$gannet" tokenize -m "$trained" -p "Hello world")
[[ "$ids" =~ ^2(,[0-9]+)+$ ]]; check "tokenize prints comma-separated ids, <bos> first" $?
"$gannet" generate -m "$trained" --backend cpu --prompt-ids "$ids" -n 6 --ids -q > "$tmp/by_ids"
"$gannet" generate -m "$trained" --backend cpu -p "Hello world" -n 6 --ids -q > "$tmp/by_text"
cmp -s "$tmp/by_ids" "$tmp/by_text"; check "tokenize's ids are the prompt generate sees" $?
nobos=$("$gannet" tokenize -m "$trained" -p "Hello world" --no-bos)
[ "2,$nobos" = "$ids" ]; check "tokenize --no-bos" $?
"$gannet" tokenize -m "$trained" -p "Hello" --pieces > "$tmp/pieces"
[ "$(head -n 1 "$tmp/pieces")" = $'2\t<bos>' ]; check "tokenize --pieces: id, tab, piece" $?
echo "Hello world" | "$gannet" tokenize -m "$trained" > /dev/null; check "tokenize reads stdin" $?

# --logprobs on a terminal: after the reply, never interleaved with it.
if command -v script > /dev/null; then
  script -qec "'$gannet' generate -m '$trained' --backend cpu -p Hello -n 5 --ignore-eos --logprobs 1 -q" /dev/null < /dev/null > "$tmp/pty_lp" 2>&1
  [ "$(grep -ac '^logprobs: ' "$tmp/pty_lp")" -eq 5 ]; check "--logprobs lines are whole lines on a terminal" $?
fi

# Chat context policy: -c 64 and four short turns all answer, the oldest turns dropped with a note.
printf 'Hello there\nHow are you\nTell me more\nAnd then\n' |
  "$gannet" chat -m "$trained" --backend cpu -c 64 -n 12 --ignore-eos > /dev/null 2> "$tmp/ctx_err"
[ $? -eq 0 ] && [ "$(grep -c ', 12 generated' "$tmp/ctx_err")" -eq 4 ]; check "chat -c 64: four turns, each answered in full" $?
contains "$tmp/ctx_err" "dropped the oldest 2 turns"; check "chat says when it drops the oldest turns" $?
long=$(printf 'word %.0s' $(seq 1 80))
printf '%s\nHello\n' "$long" | "$gannet" chat -m "$trained" --backend cpu -c 64 -n 8 > /dev/null 2> "$tmp/ctx_long"
[ $? -eq 0 ] && contains "$tmp/ctx_long" "it was not sent" && contains "$tmp/ctx_long" "context holds 64" &&
  [ "$(grep -c 'prompt tokens' "$tmp/ctx_long")" -eq 1 ]
check "chat refuses a message longer than the context, with the numbers, and goes on" $?
usage_error "chat -s is the seed, not the system message" "--seed" chat -m "$trained" -s hello

# Images (issue 59): the tiny multimodal model answers as HF does for this PNG and chat
# (tests/data/golden/mm-api.json, tools/golden/mm_api_golden.py); bad images are refused before
# anything loads.
images=$(cd "$tiny/../images" && pwd)
"$gannet" generate -m "$tiny/mm-api" --backend cpu --image "$images/palette_50x30.png" --image-tokens 70 \
  --chat -p "What is in this picture?" -n 16 --ignore-eos --json > "$tmp/img" 2> /dev/null &&
  contains "$tmp/img" '"tokens":[476,73,490,461,461,429,369,392,418,413,369,272,424,484,57,57]' &&
  contains "$tmp/img" '"prompt_tokens":102'
check "generate --image --chat gives HF's tokens for the image" $?
head -c 100 "$images/palette_50x30.png" > "$tmp/cut.png"
"$gannet" generate -m "$tiny/mm-api" --backend cpu --image "$tmp/cut.png" -p "x" -n 1 > /dev/null 2> "$tmp/img_bad"
[ $? -eq 2 ] && contains "$tmp/img_bad" "images[0]"; check "generate --image refuses a truncated PNG, naming it" $?
"$gannet" generate -m "$tiny/mm-api" --backend cpu --image "$images/palette_50x30.png" --image-tokens 100 -p x > /dev/null 2> "$tmp/img_budget"
[ $? -eq 2 ] && contains "$tmp/img_budget" "--image-tokens"; check "--image-tokens takes the five budgets only" $?

if [ "$failures" -ne 0 ]; then echo "$failures CLI check(s) failed"; exit 1; fi
echo "all CLI checks passed"
