#!/usr/bin/env bash
# The engine and C ABI under sanitizers (CPU backend, no CUDA):
#  - AddressSanitizer + UndefinedBehaviorSanitizer on the engine, C-ABI, scheduler and KV tests;
#  - ThreadSanitizer on the concurrency tests and the tensor-parallel ranks (threads meeting in
#    collectives, the multi-process protocol on threads).
# The engine tests run at a quarter of their request volume (GANNET_TEST_SCALE): sanitizers slow
# the engine 5-20x, and what they check needs the threads and code paths, not the volume.
# Exits non-zero on the first failing run.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

asan_tests=(capi_args_test capi_engine_test capi_concurrency_test capi_layout_test sched_test
            sampling_test kv_test speculative_test drafter_test spec_engine_small_test
            tp_runner_test tp_remote_test tp_engine_test)
cmake --preset asan > /dev/null
cmake --build build/asan -j "$jobs" --target \
  "${asan_tests[@]/spec_engine_small_test/spec_engine_test}"
export GANNET_TEST_SCALE=0.25
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build/asan && ctest --output-on-failure -j "$jobs" -R "^($(IFS='|'; echo "${asan_tests[*]}"))\$")

tsan_tests=(capi_concurrency_test tp_runner_test tp_remote_test)
cmake --preset tsan > /dev/null
cmake --build build/tsan -j "$jobs" --target "${tsan_tests[@]}"
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
(cd build/tsan && ctest --output-on-failure -R "^($(IFS='|'; echo "${tsan_tests[*]}"))\$")
