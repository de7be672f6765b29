// The arithmetic of one row of PostNormResidual (norm.h) with the row in registers: the decode
// path's kernel in norm.cu and the all-reduce fused with it (kernels/comm/custom_allreduce.cu)
// both call it, so the fused op gives the bits of the two ops run one after the other.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/common/device_utils.cuh"

namespace gannet::kernels {

// Threads of a row-in-registers CTA: thread t owns elements t + k * kPostNormRowThreads.
inline constexpr int kPostNormRowThreads = 1024;

// Host: returns f(std::integral_constant<int, kPer>{}) for the smallest kPer of 2, 4 and 8 whose
// kPer * kPostNormRowThreads elements hold a row of n (<= 8 * kPostNormRowThreads): the launch of
// a row-in-registers kernel instantiated for that kPer.
template <typename F>
auto WithRowPer(int64_t n, F&& f) {
  if (n <= 2 * kPostNormRowThreads) return f(std::integral_constant<int, 2>{});
  if (n <= 4 * kPostNormRowThreads) return f(std::integral_constant<int, 4>{});
  return f(std::integral_constant<int, 8>{});
}

__device__ __forceinline__ float InvRms(float sum_sq, int n, float eps) {
  return 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps);
}

// This thread's elements of row `row` of p ([rows, ld]; a weight vector: row 0), as f32, 0 past n.
template <int kPer, typename T>
__device__ __forceinline__ void LoadRowElems(const T* p, int64_t ld, int64_t row, int n,
                                             float (&v)[kPer]) {
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = threadIdx.x + k * kPostNormRowThreads;
    v[k] = i < n ? ToFloat(p[row * ld + i]) : 0.f;
  }
}

// A norm weight's elements of this thread; 1 where there is no weight (RmsNorm without a weight
// multiplies by 1: the same bits as not multiplying).
template <int kPer>
__device__ __forceinline__ void LoadNormWeight(const float* w, int n, float (&v)[kPer]) {
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = threadIdx.x + k * kPostNormRowThreads;
    v[k] = w == nullptr ? 1.f : (i < n ? w[i] : 0.f);
  }
}

// 1 / RMS of a row whose elements this thread holds in v (0 past n). Block-wide, a fixed order.
template <int kPer>
__device__ __forceinline__ float RowInvRms(const float (&v)[kPer], int n, float eps, float* red) {
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) ss += v[k] * v[k];
  return InvRms(BlockSum(ss, red), n, eps);
}

// residual = (rv + RmsNorm(xv) * pw) * (*scalar if not null), stored to res_row; then, if next_row
// is not null, next_row = RmsNorm(residual) (* next_w if not null). xv, rv, pw: this thread's
// elements of the row's x, residual and post weight (0 past n). A block-wide call (every thread
// of the kPostNormRowThreads, reductions in a fixed order); `red` is 32 floats of shared memory.
template <int kPer, typename OT>
__device__ __forceinline__ void PostNormResidualRow(const float (&xv)[kPer], float (&rv)[kPer],
                                                    const float (&pw)[kPer], float* res_row,
                                                    const float* scalar, const float* next_w,
                                                    OT* next_row, float eps, int n, float* red) {
  const float inv = RowInvRms(xv, n, eps, red);
  const float s = scalar ? *scalar : 1.0f;
  float ss2 = 0.f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    float r = rv[k] + (xv[k] * inv) * pw[k];
    if (scalar) r *= s;
    rv[k] = r;
    ss2 += r * r;
    const int i = threadIdx.x + k * kPostNormRowThreads;
    if (i < n) res_row[i] = r;
  }
  if (next_row == nullptr) return;
  const float inv2 = InvRms(BlockSum(ss2, red), n, eps);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = threadIdx.x + k * kPostNormRowThreads;
    if (i < n) {
      const float v = rv[k] * inv2;
      next_row[i] = FromFloat<OT>(next_w ? v * next_w[i] : v);
    }
  }
}

}  // namespace gannet::kernels
