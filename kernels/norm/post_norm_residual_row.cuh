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

// A row's elements and reductions are laid out for a CTA of kPostNormRowThreads threads. A
// smaller CTA of kPostNormRowThreads / kRep threads (the GEMV whose last CTA does the update,
// gemv.cu) plays kRep of those threads each: thread t holds, at j = q * kPer + k, the element
// i = t + q * (kPostNormRowThreads / kRep) + k * kPostNormRowThreads, and its sums run as the
// played threads' own would (RepBlockSum), so either CTA gives the row the same bits.
template <int kRep>
__device__ __forceinline__ int RowElem(int j, int kPer) {
  return threadIdx.x + (j / kPer) * (kPostNormRowThreads / kRep) + (j % kPer) * kPostNormRowThreads;
}

// BlockSum over the kPostNormRowThreads played threads whose partial sums this thread holds in
// p[q] (q < kRep): each played warp's shuffle tree, then the 32 warps' sums in warp order, as
// BlockSum adds them in a full-size CTA. Every thread gets the result.
template <int kRep>
__device__ __forceinline__ float RepBlockSum(float (&p)[kRep], float* red) {
  if constexpr (kRep == 1) {
    return BlockSum(p[0], red);
  } else {
    constexpr int kWarps = kPostNormRowThreads / 32 / kRep;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int q = 0; q < kRep; ++q) p[q] = WarpSum(p[q]);
    __syncthreads();  // red may still be read by a previous call
    if (lane == 0) {
#pragma unroll
      for (int q = 0; q < kRep; ++q) red[warp + q * kWarps] = p[q];
    }
    __syncthreads();
    return WarpSum(red[lane]);
  }
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

// The sum of squares of a row, x(j) being this thread's element j (0 past n): each played
// thread's in element order, then RepBlockSum.
template <int kPer, int kRep, typename X>
__device__ __forceinline__ float RowSumSq(X x, float* red) {
  float ss[kRep];
#pragma unroll
  for (int q = 0; q < kRep; ++q) {
    ss[q] = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const float v = x(q * kPer + k);
      ss[q] += v * v;
    }
  }
  return RepBlockSum<kRep>(ss, red);
}

// 1 / RMS of a row whose elements this thread holds in v (0 past n). Block-wide, a fixed order.
template <int kPer>
__device__ __forceinline__ float RowInvRms(const float (&v)[kPer], int n, float eps, float* red) {
  return InvRms(RowSumSq<kPer, 1>([&](int j) { return v[j]; }, red), n, eps);
}

// residual = (row.res(j) + RmsNorm(x) * row.pw(j)) * (*scalar if not null) for this thread's
// elements j (x: row.x(j), 0 past n), stored to res_row and kept (row.keep); then, if next_row is
// not null, next_row = RmsNorm(residual) (* next_w if not null). `row` says where the elements
// are: registers (RegRow), or shared memory and loads where a CTA cannot spare the registers (the
// GEMV's update, gemv.cu). A block-wide call (every thread of the CTA, reductions in a fixed
// order); `red` is 32 floats of shared memory.
template <int kPer, int kRep, typename OT, typename Row>
__device__ __forceinline__ void PostNormResidualRowOf(Row& row, float* res_row, const float* scalar,
                                                      const float* next_w, OT* next_row, float eps,
                                                      int n, float* red) {
  const float inv = InvRms(RowSumSq<kPer, kRep>([&](int j) { return row.x(j); }, red), n, eps);
  const float s = scalar ? *scalar : 1.0f;
  float ss2[kRep];
#pragma unroll
  for (int q = 0; q < kRep; ++q) {
    ss2[q] = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int j = q * kPer + k;
      float r = row.res(j) + (row.x(j) * inv) * row.pw(j);
      if (scalar) r *= s;
      row.keep(j, r);
      ss2[q] += r * r;
      const int i = RowElem<kRep>(j, kPer);
      if (i < n) res_row[i] = r;
    }
  }
  if (next_row == nullptr) return;
  const float inv2 = InvRms(RepBlockSum<kRep>(ss2, red), n, eps);
#pragma unroll
  for (int j = 0; j < kPer * kRep; ++j) {
    const int i = RowElem<kRep>(j, kPer);
    if (i < n) {
      const float v = row.kept(j) * inv2;
      next_row[i] = FromFloat<OT>(next_w ? v * next_w[i] : v);
    }
  }
}

// A row held in registers: x, residual (which becomes the updated residual) and post weight.
template <int kPer>
struct RegRow {
  const float (&xv)[kPer];
  float (&rv)[kPer];
  const float (&pw_)[kPer];
  __device__ float x(int j) const { return xv[j]; }
  __device__ float res(int j) const { return rv[j]; }
  __device__ float pw(int j) const { return pw_[j]; }
  __device__ void keep(int j, float r) { rv[j] = r; }
  __device__ float kept(int j) const { return rv[j]; }
};

// PostNormResidualRowOf with the row's x, residual and post weight in registers (xv, rv, pw);
// rv holds the updated residual afterwards.
template <int kPer, typename OT>
__device__ __forceinline__ void PostNormResidualRow(const float (&xv)[kPer], float (&rv)[kPer],
                                                    const float (&pw)[kPer], float* res_row,
                                                    const float* scalar, const float* next_w,
                                                    OT* next_row, float eps, int n, float* red) {
  RegRow<kPer> row{xv, rv, pw};
  PostNormResidualRowOf<kPer, 1>(row, res_row, scalar, next_w, next_row, eps, n, red);
}

}  // namespace gannet::kernels
