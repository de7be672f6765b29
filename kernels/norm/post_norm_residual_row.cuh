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

// The constants of a PostNormResidual row (weights and the layer scalar): read before PdlEnter,
// while the previous kernel drains, so that none of the row's dependent steps waits on a load of
// them (the scalar and the next norm's weights were two more L2 round trips inside the update).
template <int kPer>
struct PostNormConsts {
  float pw[kPer];  // post weight (0 past n)
  float nw[kPer];  // next norm's weight (0 past n; unused without one)
  float s;         // the scalar (1 without one)
  bool scaled, next_weighted;
};
template <int kPer>
__device__ __forceinline__ PostNormConsts<kPer> LoadPostNormConsts(const float* post_w,
                                                                   const float* scalar,
                                                                   const float* next_w, int n) {
  PostNormConsts<kPer> c;
  LoadRowElems(post_w, 0, 0, n, c.pw);
  c.next_weighted = next_w != nullptr;
  if (c.next_weighted) LoadRowElems(next_w, 0, 0, n, c.nw);
  c.scaled = scalar != nullptr;
  c.s = c.scaled ? *scalar : 1.0f;
  return c;
}

// residual = (rv + RmsNorm(xv) * pw) * (scalar if any), stored to res_row; then, if next_row is
// not null, next_row = RmsNorm(residual) (* next norm weight if any). xv, rv: this thread's
// elements of the row's x and residual (0 past n); c: the constants. A block-wide call (every
// thread of the kPostNormRowThreads, reductions in a fixed order); `red` is 32 floats of shared
// memory.
template <int kPer, typename OT>
__device__ __forceinline__ void PostNormResidualRow(const float (&xv)[kPer], float (&rv)[kPer],
                                                    const PostNormConsts<kPer>& c, float* res_row,
                                                    OT* next_row, float eps, int n, float* red) {
  const float inv = RowInvRms(xv, n, eps, red);
  float ss2 = 0.f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    float r = rv[k] + (xv[k] * inv) * c.pw[k];
    if (c.scaled) r *= c.s;
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
      next_row[i] = FromFloat<OT>(c.next_weighted ? v * c.nw[k] : v);
    }
  }
}

}  // namespace gannet::kernels
