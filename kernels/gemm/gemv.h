// Small-M linear layers: out[M, N] = x[M, K] w[N, K]^T for M <= 8, streaming the bf16 (or, on the
// fp16 compute path, f16) weight once with 16-byte loads (the decode-time shape where cuBLASLt's
// tensor-core tiles, padded to M = 64, leave most of the GPU idle). Host-callable declarations only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/mat.h"

namespace gannet::kernels {

inline constexpr int kGemvMaxM = 8;

// The residual update after a block's last projection (PostNormResidual, norm.h), done by the
// GEMV's last CTA to finish: residual = (residual + RmsNorm(out) * post_w) * (*scalar if set),
// then next_out = RmsNorm(residual) (* next_w if set) when next_out is set, for each of the m rows,
// with the bits of the separate kernel (post_norm_residual_row.cuh). counter: one int, zero
// before the call and left zero after it; calls that use one counter must not overlap (one
// stream's calls never do: each waits for the one before).
struct GemvResidualUpdate {
  const float* post_w = nullptr;  // [n]
  float* residual = nullptr;      // [m, n], row stride ldr
  int64_t ldr = 0;
  const float* scalar = nullptr;  // [1] or null
  const float* next_w = nullptr;  // [n] or null
  void* next_out = nullptr;       // [m, n] of out_type, row stride ldn, or null
  int64_t ldn = 0;
  float eps = 0.f;
  int* counter = nullptr;
};

struct GemvParams {
  const void* x = nullptr;  // [m, k] of x_type: w_type or f32, row stride ldx elements
  const void* w = nullptr;  // [n, k] of w_type: bf16 or f16, contiguous
  void* out = nullptr;      // [m, n] of out_type: w_type or f32, row stride ldo elements
  int m = 0;
  int n = 0;
  int k = 0;
  int64_t ldx = 0;
  int64_t ldo = 0;
  DataType x_type = DataType::kBF16;
  DataType w_type = DataType::kBF16;
  DataType out_type = DataType::kBF16;
  // When set, x is a gate and the GEMV's input is gelu_tanh(x) * up, rounded to x_type as
  // GeluTanhMul stores it (so the result equals GeluTanhMul then the GEMV, bit for bit): up [m, k]
  // of x_type, row stride ldu, 16-byte aligned; x_type must be w_type.
  const void* up = nullptr;
  int64_t ldu = 0;
  // When set, the update above follows in the same kernel (see GemvUpdateFuses).
  const GemvResidualUpdate* update = nullptr;
};

// Whether a GEMV can do the residual update itself: m <= kGemvUpdateMaxM rows (its last CTA
// updates the rows one after the other), out and the weight bf16, n <= kGemvUpdateMaxN (the row
// is staged in the CTA's shared memory, 16 KB at 4096; past that the stage and the registers its
// loads take would cost the product's CTAs their occupancy: 31B's 5376 stays unfused).
inline constexpr int kGemvUpdateMaxM = 2;
inline constexpr int kGemvUpdateMaxN = 4096;
bool GemvUpdateFuses(int m, int n, DataType w_type, DataType out_type);

// The largest M the gated GEMV is worth it for: every CTA recomputes the product for its rows,
// M tanh per 8 weight bytes, which stays well under the SFU rate only for small M.
inline constexpr int kGemvGatedMaxM = 2;

// Requires m in [1, 8] (in [1, kGemvGatedMaxM] with up set; GemvUpdateFuses with update set), k % 8 == 0, ldx % 8 == 0, 16-byte
// aligned x and w, and x and out each of w_type or f32.
cudaError_t LaunchGemv(const GemvParams& p, cudaStream_t stream);

}  // namespace gannet::kernels
