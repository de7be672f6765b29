#!/bin/bash
# The issue-56 soak on one GPU: gannet-soak (tests/soak/soak.cc) through the C ABI on the CUDA
# backend, long form, with device memory sampled by nvidia-smi, then a shorter run under
# compute-sanitizer memcheck, then the fault hook (a device lost mid-step). From the repository
# root on the GPU machine:
#   tools/gpu/soak.sh [stage ...]   (default: build soak memcheck fault)
#   build     sm_90 Release build of gannet-soak
#   soak      REQUESTS (default 10000) mixed requests at CONCURRENCY (64) for at least MIN_SECONDS
#             (1200) on MODEL (default tests/data/tiny/trained; dummy:e2b works too); host RSS
#             slope from gannet-soak, device memory slope from nvidia-smi samples every 10 s
#   memcheck  compute-sanitizer --tool memcheck on a short soak (200 requests, concurrency 16)
#   fault     a short soak with GANNET_FAULT_INJECT_STEP=50: must end with every request's final
#             event (DEVICE_LOST ones counted as failures by gannet-soak: the stage checks that
#             the run ended, reported them, and did not hang)
# Environment: as tools/gpu/stages.sh says; MODEL, REQUESTS, CONCURRENCY, MIN_SECONDS.
source "$(dirname "$0")/stages.sh"
gpu_header "soak (issue 56)" memory.used
model=${MODEL:-tests/data/tiny/trained}
soak="$build/tests/soak/gannet-soak"

stage_build() { gpu_build gannet-soak; }

# Least-squares slope (MiB per minute) of "seconds MiB" lines after the first fifth of the run.
mem_slope() {
  awk 'NR == 1 { t0 = $1 } { t[NR] = ($1 - t0) / 60; m[NR] = $2; n = NR }
       END { skip = int(n / 5); c = 0;
             for (i = skip + 1; i <= n; i++) { sx += t[i]; sy += m[i]; c++ }
             if (c < 3) { print "too few samples"; exit }
             mx = sx / c; my = sy / c;
             for (i = skip + 1; i <= n; i++) { sxy += (t[i] - mx) * (m[i] - my); sxx += (t[i] - mx) ^ 2 }
             printf "device memory: %d MiB after warm-up, %d MiB at the end, slope %.3f MiB/min over %d samples\n",
                    m[skip + 1], m[n], sxy / sxx, c }' "$1"
}

stage_soak() {
  local samples="$out/device_memory.txt"
  : > "$samples"
  ( while true; do
      echo "$(date +%s) $(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)"
      sleep 10
    done ) >> "$samples" &
  local sampler=$!
  timeout 7200 "$soak" --model "$model" --backend cuda --requests "${REQUESTS:-10000}" \
    --concurrency "${CONCURRENCY:-64}" --min-seconds "${MIN_SECONDS:-1200}" --max-tokens 256 \
    --max-prompt 512 --max-model-len 2048 --interval-s 30 --max-rss-slope 1 \
    > "$out/soak.txt" 2>&1
  local rc=$?
  kill "$sampler" 2>/dev/null
  tail -25 "$out/soak.txt" | tee -a "$summary"
  mem_slope "$samples" | tee -a "$summary"
  return $rc
}

stage_memcheck() {
  timeout 3000 compute-sanitizer --tool memcheck --error-exitcode 1 --leak-check no \
    "$soak" --model "$model" --backend cuda --requests 200 --concurrency 16 --max-tokens 32 \
    --max-prompt 64 --max-model-len 512 --interval-s 60 > "$out/memcheck.txt" 2>&1
  local rc=$?
  tail -15 "$out/memcheck.txt" | tee -a "$summary"
  return $rc
}

stage_fault() {
  GANNET_FAULT_INJECT_STEP=50 timeout 600 "$soak" --model "$model" --backend cuda --requests 500 \
    --concurrency 64 --max-tokens 64 --interval-s 5 > "$out/fault.txt" 2>&1
  local rc=$?
  tail -15 "$out/fault.txt" | tee -a "$summary"
  # Expected: gannet-soak reports the DEVICE_LOST requests as failed checks (rc 1) after every
  # request ended; a hang is rc 124, a crash anything else.
  if [ $rc -eq 1 ] && grep -q "error GANNET_ERR_DEVICE_LOST" "$out/fault.txt" &&
     ! grep -q "never ended" "$out/fault.txt"; then
    note "fault: every request ended, DEVICE_LOST reported, no hang"
    return 0
  fi
  note "fault: unexpected (rc=$rc)"
  return 1
}

gpu_run_stages build soak memcheck fault -- "$@"
