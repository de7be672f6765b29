#!/bin/bash
# The trained pair on the CUDA backend (GPU machine): greedy output of the CLI with and without
# its assistant, against the CPU backend, and the acceptance the engine reports.
# Usage: tools/train_tiny/gpu_check.sh BUILD_DIR
set -uo pipefail
g="$1/examples/cli/gannet"
[ -x "$g" ] || { echo "no CLI at $g (ninja gannet_cli)"; exit 1; }
m=tests/data/tiny/trained
status=0
# The CUDA kernels compute in bf16 and the CPU reference in fp32, and a verify chunk's rows round
# differently from a one-token decode, so long greedy runs may part at a near-tie (seen on the
# H200 after token 112 at the earliest). The first MIN_SAME tokens must agree.
MIN_SAME=64
# "yes", or the index of the first differing token of two id lines; fails below MIN_SAME.
same() {
  [ -n "$1" ] && [ "$1" == "$2" ] && { echo yes; return; }
  local -a a=($1) b=($2); local i=0
  while [ $i -lt ${#a[@]} ] && [ "${a[$i]}" == "${b[$i]:-}" ]; do i=$((i + 1)); done
  echo "from token $i of ${#a[@]}"
}
for p in "In the beginning God" "And Jesus said unto them," "The word of the LORD came to"; do
  cpu=$("$g" generate --backend cpu -m $m -p "$p" -n 128 --ids -q --ignore-eos | tail -1)
  gpu=$("$g" generate --backend cuda -m $m -p "$p" -n 128 --ids -q --ignore-eos | tail -1)
  spec_out=$("$g" generate --backend cuda -m $m --draft $m-assistant -p "$p" -n 128 --ids --ignore-eos 2>&1)
  spec=$(echo "$spec_out" | grep -E '^[0-9]+( [0-9]+)*$' | tail -1)
  a=$(same "$cpu" "$gpu"); b=$(same "$gpu" "$spec")
  echo "prompt '$p': cuda == cpu: $a, cuda+draft == cuda: $b"
  echo "$spec_out" | grep -o 'TPOT[^|]*|[^]]*' | tail -1
  "$g" generate --backend cuda -m $m -p "$p" -n 128 --ignore-eos 2>&1 | grep -o 'TPOT[^]]*' | sed 's/^/  plain: /'
  for r in "$a" "$b"; do
    [ "$r" == yes ] || [ "$(echo "$r" | awk '{print $3}')" -ge $MIN_SAME ] || status=1
  done
done
exit $status
