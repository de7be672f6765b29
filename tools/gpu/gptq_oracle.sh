#!/bin/bash
# GPTQ / AWQ against HF transformers on the GPU machine (torch + transformers there):
#   build   model_gptq_test (the CPU loader and the test's GPTQ/AWQ writer)
#   export  model_gptq_test's GptqOracleExport with GANNET_GPTQ_EXPORT_DIR=$OUT/gptq-export:
#           GPTQ (g32 act-order asym v1, g32 sym v2, per-channel sym v1 / asym v2) and AWQ (g32,
#           g128) checkpoints of the dense tiny variants, each with gannet's CPU logits
#   oracle  tools/golden/gptq_oracle.py: HF loads each folder through its GPTQ / AWQ integration
#           (the tools' own unpacking and kernels, float16) and compares the logits
# Usage, from the repository root on the GPU machine:
#   tools/gpu/gptq_oracle.sh [WHEEL ...] [-- stage ...]   (default stages: build export oracle)
# WHEELs are installed with pip --no-deps first: for GPTQ optimum and gptqmodel (or auto-gptq),
# for AWQ autoawq, and what they need that the machine lacks. Without them the oracle stage fails
# naming the missing package (nothing here downloads anything).
wheels=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do wheels+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
source "$(dirname "$0")/stages.sh"
gpu_header "GPTQ/AWQ oracle"

stage_build() { gpu_build model_gptq_test; }
stage_export() {
  rm -rf "$out/gptq-export" && mkdir -p "$out/gptq-export"
  GANNET_GPTQ_EXPORT_DIR="$out/gptq-export" timeout 300 "$build/tests/model/model_gptq_test" \
    --gtest_filter='GptqOracleExport.*' 2>&1 | grep -E "wrote|OK|FAILED|Failure" | tee -a "$summary"
  return "${PIPESTATUS[0]}"
}
stage_oracle() {
  if [ ${#wheels[@]} -gt 0 ]; then
    python3 -m pip install --no-deps "${wheels[@]}" > "$out/pip.log" 2>&1 || { tail -5 "$out/pip.log"; return 1; }
  fi
  python3 tools/golden/gptq_oracle.py "$out/gptq-export" 2>&1 | tee -a "$summary"
  return "${PIPESTATUS[0]}"
}
gpu_run_stages build export oracle -- "$@"
