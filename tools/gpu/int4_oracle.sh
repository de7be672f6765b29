#!/usr/bin/env bash
# On the GPU machine (it has torch + transformers): writes int4 checkpoints of the tiny targets
# with `gannet quantize`, decompresses them with compressed-tensors and runs HF's Gemma-4 on them
# (tools/golden/int4_oracle.py), leaving int4-<name>.safetensors in $OUT (default /tmp/int4_oracle).
# Copy those into tests/data/golden/ and run `ctest -R quantized_test`: QuantizedHfOracle then
# compares gannet's CPU logits with HF's for each.
#
#   tools/gpu/int4_oracle.sh [path/to/compressed_tensors-*.whl]
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/int4_oracle}
WHEEL=${1:-}
if ! python3 -c "import compressed_tensors" 2>/dev/null; then
  if [[ -z "$WHEEL" ]]; then
    echo "compressed-tensors is not installed: pass its wheel (compressed_tensors-0.20.1-py3-none-any.whl)" >&2
    exit 2
  fi
  python3 -m pip install --no-deps "$WHEEL"
fi
cmake --preset cpu >/dev/null
cmake --build build/cpu -j"$(nproc)" --target gannet-quantize
Q=build/cpu/examples/cli/gannet-quantize
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
args=()
for case in 31b:int4-g32 26b-a4b:int4-g32 e4b:int4-g32 e2b:int4-g32 e2b:int4-channel-asym e4b:int4-g64-asym; do
  v=${case%%:*}; spec=${case#*:}
  "$Q" "tests/data/tiny/$v" "$WORK/$v-$spec" --weight-dtype "$spec" >/dev/null
  args+=("$v-$spec=$WORK/$v-$spec")
done
python3 tools/golden/int4_oracle.py --out "$OUT" "${args[@]}"
ls -l "$OUT"
