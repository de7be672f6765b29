#!/usr/bin/env bash
# `gannet chat` in a real terminal (a tmux pane): the prompt is styled, never shown as escaped
# text; arrow keys edit the line; up recalls the last line; a pasted block of two lines is one
# turn; a line ending in \ goes on. Each turn's prompt length (the statistics line) is compared
# with the same conversation piped in, which proves what the terminal run sent.
# usage: chat_tty_test.sh GANNET_BINARY MODEL_DIR
set -uo pipefail
gannet=$1
model=$2
if ! command -v tmux > /dev/null; then
  echo "SKIP: tmux not found, so chat is not tested in a terminal (apt-get install tmux;"
  echo "      tools/install_deps.sh installs it)"
  exit 77
fi
failures=0
tmp=$(mktemp -d)
sock="gannet-chat-test-$$"
cleanup() { tmux -L "$sock" kill-server 2> /dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
check() {  # check NAME CONDITION-EXIT-CODE
  if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; failures=$((failures + 1)); fi
}
flags=(-m "$model" --backend cpu -n 6 --ignore-eos)
turns() { grep -c 'prompt tokens' "$1" 2> /dev/null || true; }
prompt_lengths() { grep -o '^\[[0-9]* prompt tokens' "$1" | grep -o '[0-9]*' | tr '\n' ' '; }
wait_for() {  # wait_for SECONDS COMMAND...: until the command succeeds
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.2
  done
}
pane() { tmux -L "$sock" capture-pane -p -t chat "$@"; }
keys() { tmux -L "$sock" send-keys -t chat "$@"; }
screen_has() { pane | grep -qF -- "$1"; }
turns_are() { [ "$(turns "$tmp/tty_err")" -eq "$1" ]; }

# The reference: the same four messages through a pipe (one message a line; the third and fourth
# written with the \ rule, which a pipe honours too).
printf 'Hello\nHello\nline one\\\nline two\nabc\\\ndef\n' |
  "$gannet" chat "${flags[@]}" > "$tmp/pipe_out" 2> "$tmp/pipe_err"
check "piped reference chat" $?
[ "$(turns "$tmp/pipe_err")" -eq 4 ]; check "the pipe sends four turns" $?

tmux -L "$sock" new-session -d -s chat -x 160 -y 40 \
  "'$gannet' chat ${flags[*]} 2> '$tmp/tty_err'; echo \"chat exited: \$?\"; sleep 60"
wait_for 120 screen_has 'gannet chat ('; check "chat starts in a terminal" $?

# 1. Arrow keys edit: type "Hllo", go left three characters, insert "e": the turn is "Hello".
keys "Hllo" Left Left Left "e" Enter
wait_for 60 turns_are 1; check "an edited line is one turn" $?
# 2. Up recalls the last line.
keys Up Enter
wait_for 60 turns_are 2; check "up and Enter send the last line again" $?
# 3. A paste of two lines is one turn.
tmux -L "$sock" set-buffer "line one
line two
"
tmux -L "$sock" paste-buffer -t chat
wait_for 60 turns_are 3; check "a pasted block is answered" $?
sleep 1
turns_are 3; check "... as one turn" $?
# 4. A typed line ending in \ goes on.
keys 'abc\' Enter
sleep 0.5
keys "def" Enter
wait_for 60 turns_are 4; check "a line ending in \\ and the next are one turn" $?

want=$(prompt_lengths "$tmp/pipe_err")
got=$(prompt_lengths "$tmp/tty_err")
[ -n "$want" ] && [ "$got" = "$want" ]
check "the terminal sent what the pipe sent (prompt tokens: '$got' vs '$want')" $?

pane > "$tmp/screen"
pane -e > "$tmp/screen_styled"
! grep -qF '\x1b' "$tmp/screen"; check "no escaped control bytes on the screen" $?
grep -q '^> Hello' "$tmp/screen"; check "the edited line shows as typed" $?
grep -qF $'\e[1m> ' "$tmp/screen_styled"; check "the prompt is bold" $?
! grep -qF '^[[D' "$tmp/screen"; check "arrow keys never reach the screen as ^[[D" $?

keys "/exit" Enter
wait_for 20 screen_has 'chat exited: 0'; check "/exit ends chat with status 0" $?

if [ "$failures" -ne 0 ]; then
  echo "--- screen"; cat "$tmp/screen"; echo "--- stderr"; cat "$tmp/tty_err"
  echo "$failures chat terminal check(s) failed"
  exit 1
fi
echo "all chat terminal checks passed"
