// Shared pieces of the kernel benchmarks: one CUDA backend per process, the two hardware
// references measured in the same run (device-to-device copy bandwidth counting bytes read plus
// written, and a cuBLASLt 8192^3 bf16 GEMM), event timing of repeated launches, and the counters
// every benchmark reports as fractions of those references.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <string>

#include "benchmark/benchmark.h"
#include "lib/backend/cuda/cuda_backend.h"

namespace gannet::bench {

// The process-wide backend (created on first use; aborts the benchmark run without a GPU).
backend::CudaBackend& Gpu();

struct References {
  double copy_gbs = 0;     // GB/s, bytes read + bytes written, 2 GiB copies
  double gemm_tflops = 0;  // cuBLASLt bf16 8192 x 8192 x 8192, f32 accumulation
};
const References& Refs();  // measured once, on first use

// Mean device time of one call of `launch` in milliseconds: one eager warm-up call, then `reps`
// calls captured into a CUDA graph whose replay is timed with events (eager launches if capture
// fails). `launch(i)` gets the call index (to rotate input sets past the L2).
double TimeMs(const std::function<void(int)>& launch, int reps);

// Sets GB/s (and its fraction of the copy reference) and TFLOP/s (and its fraction of the GEMM
// reference) counters for one call that moves `bytes` and does `flops`.
void Report(benchmark::State& state, double ms, double bytes, double flops);

// Fills a device buffer with bf16 normal(0, scale) values (a kernel, so large buffers are fast).
void FillRandomBf16(void* data, size_t count, uint64_t seed, float scale);

// Aborts the run with a message when a status is not OK (benchmarks have no error path).
void CheckOk(const absl::Status& st, const char* what);

}  // namespace gannet::bench
