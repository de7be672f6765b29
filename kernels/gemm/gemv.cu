// Split-K GEMV for M <= 8 (see gemv.h): a CTA of 256 threads owns kRows output columns; its
// threads stride over K in 16-byte chunks, so each weight row is read once, coalesced, with
// kRows independent loads in flight per thread, and x (tiny, L1-resident) is reused across the
// kRows rows. Partial sums reduce through warp shuffles and shared memory in a fixed order.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/common/device_utils.cuh"
#include "kernels/gemm/gemv.h"

namespace gannet::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kRows = 4;

template <typename XT, typename OutT>
__global__ void __launch_bounds__(kThreads) GemvKernel(const XT* __restrict__ x,
                                                       const bf16* __restrict__ w,
                                                       OutT* __restrict__ out, int m, int n, int k,
                                                       int64_t ldx, int64_t ldo) {
  const int n0 = blockIdx.x * kRows;
  const int chunks = k / 8;
  float acc[kGemvMaxM][kRows];
#pragma unroll
  for (int i = 0; i < kGemvMaxM; ++i) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[i][r] = 0.f;
  }
  const bf16* wrow[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) wrow[r] = w + static_cast<int64_t>(min(n0 + r, n - 1)) * k;

#pragma unroll 2
  for (int c = threadIdx.x; c < chunks; c += kThreads) {
    Bf16x8 wv[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      // Streamed once: keep it out of L1 so x stays there.
      const int4 raw = __ldcs(reinterpret_cast<const int4*>(wrow[r] + c * 8));
      wv[r] = *reinterpret_cast<const Bf16x8*>(&raw);
    }
    float wf[kRows][8];
#pragma unroll
    for (int r = 0; r < kRows; ++r) Unpack8(wv[r], wf[r]);
#pragma unroll
    for (int i = 0; i < kGemvMaxM; ++i) {
      if (i < m) {
        float xv[8];
        Load8(x + i * ldx + c * 8, xv);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[i][r] += xv[j] * wf[r][j];
        }
      }
    }
  }

  __shared__ float red[kThreads / 32][kGemvMaxM * kRows];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int i = 0; i < kGemvMaxM; ++i) {
    if (i < m) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float v = WarpSum(acc[i][r]);
        if (lane == 0) red[warp][i * kRows + r] = v;
      }
    }
  }
  __syncthreads();
  const int t = threadIdx.x;
  if (t < m * kRows) {
    const int i = t / kRows, r = t % kRows;
    if (n0 + r < n) {
      float s = 0.f;
#pragma unroll
      for (int wi = 0; wi < kThreads / 32; ++wi) s += red[wi][t];
      out[i * ldo + n0 + r] = FromFloat<OutT>(s);
    }
  }
}

template <typename XT, typename OutT>
cudaError_t Launch(const GemvParams& p, cudaStream_t stream) {
  const int blocks = static_cast<int>((static_cast<int64_t>(p.n) + kRows - 1) / kRows);
  GemvKernel<XT, OutT><<<blocks, kThreads, 0, stream>>>(
      static_cast<const XT*>(p.x), static_cast<const bf16*>(p.w), static_cast<OutT*>(p.out), p.m,
      p.n, p.k, p.ldx, p.ldo);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchGemv(const GemvParams& p, cudaStream_t stream) {
  if (p.m < 1 || p.m > kGemvMaxM || p.n < 1 || p.k % 8 != 0 || p.ldx % 8 != 0) {
    return cudaErrorInvalidValue;
  }
  if (p.x_is_f32) {
    return p.out_is_f32 ? Launch<float, float>(p, stream) : Launch<float, bf16>(p, stream);
  }
  return p.out_is_f32 ? Launch<bf16, float>(p, stream) : Launch<bf16, bf16>(p, stream);
}

}  // namespace gannet::kernels
