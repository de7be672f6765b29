// GEMV for M <= 8 (see gemv.h): one warp per output column (weight row), 4 independent warps per
// CTA. Each lane streams 16-byte weight chunks c = lane, lane + 32, ... of its row, kUnroll loads
// at a time, with the next kUnroll already in flight while the current ones are multiplied, so an
// SM keeps ~100 KB of weights in flight (HBM latency x per-SM bandwidth is ~35 KB on H100/H200).
// x (small, shared by every warp) is read through L1. Partial sums reduce by warp shuffles in a
// fixed order: no shared memory and no block barrier.
//
// Work granularity sets the tail: CTAs of 4 rows (64 KB of weights at K = 8192) are handed out
// dynamically, so SMs finish within one small CTA of each other. History on H200, 31B decode:
// 4 rows per CTA with 256 threads splitting K and a shared-memory reduction streamed the
// projections at 72-89% of the read bandwidth cuBLASLt reached on gate_up; 16 rows per CTA (8
// warps x 2 rows) left N = 5376 with 2.5 CTAs per SM, 40% slower there.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/launch.h"
#include "kernels/gemm/gemv.h"

namespace gannet::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = 1;
constexpr int kUnroll = 4;

// Issues the weight loads of chunks c0 + 32 u (u < kUnroll) of a warp's rows.
__device__ __forceinline__ void LoadWeights(const int4* const (&wrow)[kRowsPerWarp], int c0,
                                            int chunks, int4 (&raw)[kUnroll][kRowsPerWarp]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int c = c0 + 32 * u;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      // Streamed once: evict-first, so x keeps its L1/L2 lines.
      raw[u][r] = c < chunks ? __ldcs(wrow[r] + c) : make_int4(0, 0, 0, 0);
    }
  }
}

template <typename XT, typename OutT>
__global__ void __launch_bounds__(kThreads) GemvKernel(const XT* __restrict__ x,
                                                       const bf16* __restrict__ w,
                                                       OutT* __restrict__ out, int m, int n, int k,
                                                       int64_t ldx, int64_t ldo) {
  PdlLaunchDependents();
  const int lane = threadIdx.x & 31;
  const int n0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * kRowsPerWarp;
  if (n0 >= n) return;
  const int chunks = k / 8;
  float acc[kGemvMaxM][kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kGemvMaxM; ++i) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) acc[i][r] = 0.f;
  }
  const int4* wrow[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    wrow[r] = reinterpret_cast<const int4*>(w + static_cast<int64_t>(min(n0 + r, n - 1)) * k);
  }

  // Weights do not depend on the previous kernel: the first tiles load before PdlWait (under PDL,
  // while that kernel drains), and each later tile loads while the previous one is multiplied.
  int4 next[kUnroll][kRowsPerWarp];
  LoadWeights(wrow, lane, chunks, next);
  PdlWait();
  for (int c0 = lane; c0 < chunks; c0 += 32 * kUnroll) {
    int4 raw[kUnroll][kRowsPerWarp];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) raw[u][r] = next[u][r];
    }
    if (c0 + 32 * kUnroll < chunks) LoadWeights(wrow, c0 + 32 * kUnroll, chunks, next);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + 32 * u;
      if (c >= chunks) break;
      float wf[kRowsPerWarp][8];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        Unpack8(*reinterpret_cast<const Bf16x8*>(&raw[u][r]), wf[r]);
      }
#pragma unroll
      for (int i = 0; i < kGemvMaxM; ++i) {
        if (i < m) {
          float xv[8];
          Load8(x + i * ldx + c * 8, xv);
#pragma unroll
          for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i][r] += xv[j] * wf[r][j];
          }
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kGemvMaxM; ++i) {
    if (i < m) {
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float v = WarpSum(acc[i][r]);
        if (lane == 0 && n0 + r < n) out[i * ldo + n0 + r] = FromFloat<OutT>(v);
      }
    }
  }
}

template <typename XT, typename OutT>
cudaError_t Launch(const GemvParams& p, cudaStream_t stream) {
  const int per_block = kWarps * kRowsPerWarp;
  const int blocks = (p.n + per_block - 1) / per_block;
  return LaunchPdl(GemvKernel<XT, OutT>, blocks, kThreads, 0, stream,
                   static_cast<const XT*>(p.x), static_cast<const bf16*>(p.w),
                   static_cast<OutT*>(p.out), p.m, p.n, p.k, p.ldx, p.ldo);
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
