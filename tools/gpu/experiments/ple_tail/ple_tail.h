// Scratch experiment (session 34; see ple_tail.cu): the end of an E2B/E4B decoder layer -- the
// update after the feed-forward block, the per-layer embedding (PLE) block and the update after
// it -- as one kernel on a thread-block cluster, for decode rows on sm_90+. Host-callable
// declarations.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace gannet::kernels {

// The PLE width the kernel is built for (hidden_size_per_layer_input of E2B and E4B).
inline constexpr int kPleTailWidth = 256;
inline constexpr int kPleTailMaxRows = 2;

// Per row r (bf16 pointers as void*):
//   if ff_out:  x[r] += RmsNorm(ff_out[r]) * ff_post_w
//   gate      = bf16(x[r] . gate_w^T)                                   [p]
//   gated     = bf16(gelu_tanh(gate) * ple_in[r])                       [p]
//   proj      = bf16(gated . proj_w^T)                                  [hidden]
//   x[r]      = (x[r] + RmsNorm(proj) * post_w) * (*scalar if any)
//   if next_out: next_out[r] = bf16(RmsNorm(x[r]) * (next_w if any))
// each rounding where the separate ops (PostNormResidual, Linear, GeluMulLinear, PostNormResidual)
// round; sums run in another order, so the result agrees with theirs to f32 rounding, not bit
// for bit.
struct PleTailParams {
  float* x = nullptr;  // [rows, hidden] f32 residual, row stride ldx
  int64_t ldx = 0;
  const void* ff_out = nullptr;  // [rows, hidden] bf16, row stride ldf; null: no first update
  int64_t ldf = 0;
  const float* ff_post_w = nullptr;  // [hidden] (with ff_out)
  const void* gate_w = nullptr;      // [p, hidden] bf16, contiguous, 16-byte aligned
  const void* ple_in = nullptr;      // [rows, p] bf16, row stride ldp
  int64_t ldp = 0;
  const void* proj_w = nullptr;  // [hidden, p] bf16, contiguous, 16-byte aligned
  const float* post_w = nullptr;  // [hidden]
  const float* scalar = nullptr;  // [1] or null
  const float* next_w = nullptr;  // [hidden] or null
  void* next_out = nullptr;       // [rows, hidden] bf16, row stride ldo; or null
  int64_t ldo = 0;
  float eps = 1e-6f;
  int rows = 0;
  int hidden = 0;
  int p = 0;
};

// Whether LaunchPleTail runs this shape on the current device: an sm_90+ GPU whose loaded code
// has the kernel, p == kPleTailWidth, 1 <= rows <= kPleTailMaxRows, hidden a multiple of 512 up
// to 4096, the shared memory fits and a cluster of 16 such CTAs can be resident. The answer for
// a (device, rows, hidden) is cached after its first query. GANNET_PLE_TAIL=0 (for measuring):
// never.
bool PleTailRuns(int rows, int hidden, int p);
// cudaErrorInvalidValue where !PleTailRuns or a pointer is misaligned.
cudaError_t LaunchPleTail(const PleTailParams& params, cudaStream_t stream);

}  // namespace gannet::kernels
