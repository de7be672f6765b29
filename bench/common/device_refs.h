// The hardware references the benchmark programs report against, measured in the same process (so
// clocks, ECC and the driver are the same as for the measured work).
#pragma once

namespace gannet::bench {

// GB/s of a 1 GiB device-to-device copy counting bytes read plus bytes written (median of 10 after
// two warm-ups); 0 without a CUDA device or in a build without CUDA.
double MeasureCopyBandwidth();

// TFLOP/s of a cuBLASLt bf16 8192 x 8192 x 8192 GEMM with f32 accumulation on random data
// (cuBLASLt's first heuristic algorithm, median of 10 after two warm-ups); 0 without a device.
double MeasureGemmTflops();

}  // namespace gannet::bench
