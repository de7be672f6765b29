// Small-M linear layers: out[M, N] = x[M, K] w[N, K]^T for M <= 8, streaming the bf16 weight
// once with 16-byte loads (the decode-time shape where cuBLASLt's tensor-core tiles, padded to
// M = 64, leave most of the GPU idle). Host-callable declarations only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace gannet::kernels {

inline constexpr int kGemvMaxM = 8;

struct GemvParams {
  const void* x = nullptr;  // [m, k] bf16 or f32 (x_is_f32), row stride ldx elements
  const void* w = nullptr;  // [n, k] bf16, contiguous
  void* out = nullptr;      // [m, n] bf16 or f32 (out_is_f32), row stride ldo elements
  int m = 0;
  int n = 0;
  int k = 0;
  int64_t ldx = 0;
  int64_t ldo = 0;
  bool x_is_f32 = false;
  bool out_is_f32 = false;
};

// Requires m in [1, 8], k % 8 == 0, ldx % 8 == 0 and 16-byte aligned x and w.
cudaError_t LaunchGemv(const GemvParams& p, cudaStream_t stream);

}  // namespace gannet::kernels
