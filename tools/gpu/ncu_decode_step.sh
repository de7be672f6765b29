#!/bin/bash
# Kernel times of one eager 31B decode step (gannet-decode-bench's NVTX range "decode_step") under
# Nsight Compute, one CSV per batch size in $OUT: ncu_decode_b<batch>.csv. Clocks and caches are
# left as they run (a decode step streams its weights from HBM whatever the L2 holds).
#   tools/gpu/ncu_decode_step.sh <build dir> <batch>...
# GANNET_NCU_MODEL picks another model, GANNET_NCU_METRICS more metrics (tools/gpu/ncu_summary.py
# groups a CSV by kernel, with DRAM rates when it has dram__bytes_{read,write}.sum).
set -uo pipefail
build=$1
shift
out=${OUT:-/tmp/gannet-engine-out}
status=0
for b in "$@"; do
  ncu --clock-control none --cache-control none --nvtx --nvtx-include "decode_step/" \
    --metrics "${GANNET_NCU_METRICS:-gpu__time_duration.sum}" --csv --page raw \
    "$build/bench/runner/gannet-decode-bench" --model "${GANNET_NCU_MODEL:-dummy:31b}" \
    --batches "$b" --context 1500 --steps 1 --no-graphs > "$out/ncu_decode_b$b.csv" 2> "$out/ncu_decode_b$b.err"
  rc=$?
  [ $rc -ne 0 ] && status=1
  echo "ncu batch $b: rc=$rc $(grep -c '^"' "$out/ncu_decode_b$b.csv") rows"
done
exit $status
