#!/bin/bash
# The trained pair on the CUDA backend (GPU machine): greedy output of the CLI with and without
# its assistant, against the CPU backend, and the acceptance the engine reports.
# Usage: tools/train_tiny/gpu_check.sh BUILD_DIR
set -uo pipefail
g="$1/examples/cli/gannet"
[ -x "$g" ] || { echo "no CLI at $g (ninja gannet_cli)"; exit 1; }
m=tests/data/tiny/trained
status=0
for p in "In the beginning God" "And Jesus said unto them," "The word of the LORD came to"; do
  cpu=$("$g" generate --backend cpu -m $m -p "$p" -n 128 --ids -q --ignore-eos | tail -1)
  gpu=$("$g" generate --backend cuda -m $m -p "$p" -n 128 --ids -q --ignore-eos | tail -1)
  spec_out=$("$g" generate --backend cuda -m $m --draft $m-assistant -p "$p" -n 128 --ids --ignore-eos 2>&1)
  spec=$(echo "$spec_out" | grep -E '^[0-9]+( [0-9]+)*$' | tail -1)
  echo "prompt '$p': cuda == cpu: $([ "$cpu" == "$gpu" ] && echo yes || echo NO)," \
       "cuda+draft == cuda: $([ "$spec" == "$gpu" ] && echo yes || echo NO)"
  echo "$spec_out" | grep -o 'TPOT[^|]*|[^]]*' | tail -1
  "$g" generate --backend cuda -m $m -p "$p" -n 128 --ignore-eos 2>&1 | grep -o 'TPOT[^]]*' | sed 's/^/  plain: /'
  [ -n "$gpu" ] && [ "$cpu" == "$gpu" ] && [ "$spec" == "$gpu" ] || status=1
done
exit $status
