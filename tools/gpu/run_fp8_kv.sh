#!/bin/bash
# The FP8 KV cache on one GPU: kernels against the CPU reference, accuracy against bf16 KV, decode
# bandwidth and capacity. From the repository root on the GPU machine (after
# `source .device/env.sh`):
#   tools/gpu/run_fp8_kv.sh [stage ...]   (default: build test accuracy decode capacity)
#   build     sm_90 Release build of the targets below
#   test      cuda_attention_test (every entry, bf16 and FP8 caches), cuda_ops_test, the runner,
#             graph and engine GPU tests
#   memcheck  compute-sanitizer on the FP8 attention cases
#   accuracy  gannet-kv-accuracy on the dummy full-size variants (--tokens, default 1000) and the
#             tiny checkpoints
#   decode    gannet-decode-bench bf16 vs FP8: 31B batch 1/16/64 at 1500, batch 1 at 32k and 100k
#   capacity  gannet-serving-bench chat 1000/1000 for every dummy variant, bf16 and FP8: the KV
#             line (how many such sequences the memory holds), --capacity-only
# Environment: GANNET_GPU_BUILD (default /tmp/gannet-gpu), OUT (default /tmp/gannet-gpu-out),
# GANNET_COMMIT (recorded; the GPU copy has no .git), TOKENS (accuracy continuation length).
set -uo pipefail
build=${GANNET_GPU_BUILD:-/tmp/gannet-gpu}
out=${OUT:-/tmp/gannet-gpu-out}
mkdir -p "$out"
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build test accuracy decode capacity)
summary="$out/summary.txt"
status=0
note() { echo "$*" | tee -a "$summary"; }
note "== gannet FP8 KV: commit ${GANNET_COMMIT:-unknown}, $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$summary"
tests=(cuda_attention_test cuda_ops_test cuda_runner_test cuda_graph_test kernel_registry_test
       cpu_fp8_kv_test)
tools=(gannet-kv-accuracy gannet-decode-bench gannet-serving-bench)
for stage in "${stages[@]}"; do
  t0=$(date +%s)
  case "$stage" in
    build)
      cmake -S . -B "$build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
        -DGANNET_BUILD_EXAMPLES=OFF > "$out/build.log" 2>&1 &&
      ninja -C "$build" -j"$(nproc)" "${tests[@]}" "${tools[@]}" >> "$out/build.log" 2>&1
      rc=$?
      [ $rc -ne 0 ] && tail -40 "$out/build.log"
      ;;
    test)
      (cd "$build" && ctest -R "^($(IFS='|'; echo "${tests[*]}"))$" -V --timeout 400) > "$out/ctest.log" 2>&1
      rc=$?
      grep -E "tests passed|tests failed|Failed|\*\*\*|FAILED|Failure" "$out/ctest.log" | tail -30
      ;;
    memcheck)
      timeout 400 compute-sanitizer --tool memcheck --error-exitcode 1 --leak-check no \
        "$build/tests/backend/cuda_attention_test" \
        --gtest_filter='*decode_8q2kv_hd256_window512*fp8*:*decode_sliding_minus_one_holes*fp8*:*mixed_8q2kv_hd512*fp8*:*verify_31b_sliding_q4*fp8*' \
        > "$out/memcheck.log" 2>&1
      rc=$?
      tail -6 "$out/memcheck.log"
      ;;
    accuracy)
      rc=0
      for m in dummy:31b dummy:26b-a4b dummy:e4b dummy:e2b tests/data/tiny/trained; do
        timeout 300 "$build/bench/runner/gannet-kv-accuracy" --model "$m" --backend cuda \
          --prompt-len 100 --tokens "${TOKENS:-1000}" 2>/dev/null | tee -a "$out/accuracy.txt" || rc=$?
      done
      ;;
    decode)
      rc=0
      for kv in bf16 fp8; do
        timeout 200 "$build/bench/runner/gannet-decode-bench" --model dummy:31b --batches 1,16,64 \
          --context 1500 --steps 20 --kv $kv 2>/dev/null | tee -a "$out/decode.txt" || rc=$?
        for ctx in 32768 100000; do
          timeout 200 "$build/bench/runner/gannet-decode-bench" --model dummy:31b --batches 1 \
            --context $ctx --steps 20 --kv $kv 2>/dev/null | tee -a "$out/decode.txt" || rc=$?
        done
      done
      ;;
    capacity)
      rc=0
      for v in 31b 26b-a4b e4b e2b; do
        for kv in bf16 fp8; do
          echo "$v kv=$kv" >> "$out/capacity.txt"
          timeout 200 "$build/bench/serving/gannet-serving-bench" --model dummy:$v --input-len 1000 \
            --output-len 1000 --kv-cache-dtype $kv --capacity-only 2>/dev/null | tee -a "$out/capacity.txt" || rc=$?
        done
      done
      ;;
    *) echo "unknown stage $stage"; rc=2 ;;
  esac
  note "stage $stage: rc=$rc, $(( $(date +%s) - t0 )) s"
  [ $rc -ne 0 ] && status=1
done
exit $status
