// Split-K GEMV for M <= 8 (see gemv.h): a CTA of 256 threads owns kRows output columns; its
// threads stride over K in 16-byte chunks, so each weight row is read once, coalesced, with
// kRows independent loads in flight per thread, and x (tiny, L1-resident) is reused across the
// kRows rows. Partial sums reduce through warp shuffles and shared memory in a fixed order.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/gemm/gemv.h"

namespace gannet::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kRows = 4;

// 16-byte chunks of a weight row as f32: bf16 or f16.
__device__ __forceinline__ void Unpack8(const int4& raw, const bf16*, float* out) {
  Unpack8(*reinterpret_cast<const Bf16x8*>(&raw), out);
}
__device__ __forceinline__ void Unpack8(const int4& raw, const f16*, float* out) {
  Load8(reinterpret_cast<const f16*>(&raw), out);
}

// One CTA's kRows outputs after the PDL wait: x from global memory, or from shared memory (the
// norm-fused form). kGated: x is a gate and the input is gelu_tanh(x) * up, rounded to XT
// (GemvParams::up). kMaxM: the bucket of m (1, 2, 4 or 8) the accumulators are sized for. At
// kMaxM = 8 a thread holds 120-128 registers, which leaves two CTAs per SM; a batch-1 step's small
// projections (1-4 waves of CTAs) then run mostly on ramp-up and tail. m = 1 needs 4
// accumulators, so its CTAs fill the SMs in one wave. The arithmetic for a given m is the same in
// every bucket.
template <typename XT, typename WT, typename OutT, bool kGated, int kMaxM>
__device__ __forceinline__ void GemvBody(const XT* x, const XT* __restrict__ up,
                                         const WT* __restrict__ w, OutT* __restrict__ out, int m,
                                         int n, int k, int64_t ldx, int64_t ldu, int64_t ldo,
                                         int n0) {
  const int chunks = k / 8;
  float acc[kMaxM][kRows];
#pragma unroll
  for (int i = 0; i < kMaxM; ++i) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[i][r] = 0.f;
  }
  const WT* wrow[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) wrow[r] = w + static_cast<int64_t>(min(n0 + r, n - 1)) * k;

#pragma unroll 2
  for (int c = threadIdx.x; c < chunks; c += kThreads) {
    int4 wv[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      // Streamed once: keep it out of L1 so x stays there.
      wv[r] = __ldcs(reinterpret_cast<const int4*>(wrow[r] + c * 8));
    }
    float wf[kRows][8];
#pragma unroll
    for (int r = 0; r < kRows; ++r) Unpack8(wv[r], wrow[r], wf[r]);
#pragma unroll
    for (int i = 0; i < kMaxM; ++i) {
      if (i < m) {
        float xv[8];
        Load8(x + i * ldx + c * 8, xv);
        if constexpr (kGated) {
          float uv[8];
          Load8(up + i * ldu + c * 8, uv);
#pragma unroll
          for (int j = 0; j < 8; ++j) xv[j] = ToFloat(FromFloat<XT>(GeluTanh(xv[j]) * uv[j]));
        }
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[i][r] += xv[j] * wf[r][j];
        }
      }
    }
  }

  __shared__ float red[kThreads / 32][kMaxM * kRows];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int i = 0; i < kMaxM; ++i) {
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

// The weights do not depend on earlier kernels: a CTA's rows (contiguous) start moving into L2
// before it waits for its predecessor, so a batch-1 step streams weights during the gaps.
template <typename WT>
__device__ __forceinline__ void PrefetchRows(const WT* w, int n0, int n, int k) {
  if (threadIdx.x == 0) {
    PrefetchL2(w + static_cast<int64_t>(n0) * k,
               static_cast<uint32_t>(min(kRows, n - n0)) * static_cast<uint32_t>(k) * sizeof(WT));
  }
}

template <typename XT, typename WT, typename OutT, bool kGated, int kMaxM>
__global__ void __launch_bounds__(kThreads)
    GemvKernel(const XT* __restrict__ x, const XT* __restrict__ up, const WT* __restrict__ w,
               OutT* __restrict__ out, int m, int n, int k, int64_t ldx, int64_t ldu, int64_t ldo) {
  const int n0 = blockIdx.x * kRows;
  PrefetchRows(w, n0, n, k);
  PdlEnter();
  GemvBody<XT, WT, OutT, kGated, kMaxM>(x, up, w, out, m, n, k, ldx, ldu, ldo, n0);
}

// The norm-fused GEMV (GemvNormIn). Its prologue is PostNormResidualRegKernel's arithmetic
// (norm/norm.cu) for a block of kPostNormRegThreads threads owning kPer elements each, run by
// this CTA's kThreads threads as kVirt "virtual" threads apiece (virtual thread t = threadIdx.x +
// kThreads * q owns elements t + kPostNormRegThreads * j), and its sums reduce in that block's
// order (VirtualBlockSum): the same bits as the standalone op, in every CTA.
constexpr int kVirt = kPostNormRegThreads / kThreads;

// BlockSum of a kPostNormRegThreads-thread block whose thread t = threadIdx.x + kThreads * q holds
// p[q]: each warp of 32 virtual threads by WarpSum (virtual warp warp + 8q), then the 32 sums.
__device__ __forceinline__ float VirtualBlockSum(const float (&p)[kVirt], float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float ws[kVirt];
#pragma unroll
  for (int q = 0; q < kVirt; ++q) ws[q] = WarpSum(p[q]);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) {
#pragma unroll
    for (int q = 0; q < kVirt; ++q) scratch[warp + (kThreads / 32) * q] = ws[q];
  }
  __syncthreads();
  return WarpSum(scratch[lane]);
}

template <typename XT, typename OutT, int kMaxM, int kPer>
__global__ void __launch_bounds__(kThreads)
    GemvNormKernel(GemvNormIn nin, const bf16* __restrict__ w, OutT* __restrict__ out, int m,
                   int n, int k, int64_t ldo) {
  static_assert(kVirt * kThreads == kPostNormRegThreads);
  extern __shared__ __align__(16) float smem[];  // residual rows [m][k] f32, then x [m][k] XT
  const int n0 = blockIdx.x * kRows;
  PrefetchRows(w, n0, n, k);
  PdlEnter();
  __shared__ float scratch[32];
  __shared__ bool last;
  const bool next = nin.next_w != nullptr;
  float* rs = smem;
  XT* xs = next ? reinterpret_cast<XT*>(smem + static_cast<int64_t>(m) * k) : reinterpret_cast<XT*>(smem);
  const bf16* y = static_cast<const bf16*>(nin.y);
  const float s = nin.scalar ? *nin.scalar : 1.0f;
  for (int i = 0; i < m; ++i) {
    float p[kVirt];
#pragma unroll
    for (int q = 0; q < kVirt; ++q) {
      float ss = 0.f;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int e = threadIdx.x + kThreads * q + kPostNormRegThreads * j;
        const float xv = e < k ? ToFloat(y[i * nin.ldy + e]) : 0.f;
        ss += xv * xv;
      }
      p[q] = ss;
    }
    const float inv = InvRms(VirtualBlockSum(p, scratch), k, nin.eps);
#pragma unroll
    for (int q = 0; q < kVirt; ++q) {
      float ss2 = 0.f;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int e = threadIdx.x + kThreads * q + kPostNormRegThreads * j;
        const bool in = e < k;
        const float xv = in ? ToFloat(y[i * nin.ldy + e]) : 0.f;
        const float rv = in ? nin.residual[i * nin.ldr + e] : 0.f;
        const float pw = in ? nin.post_w[e] : 0.f;
        float r = rv + (xv * inv) * pw;
        if (nin.scalar) r *= s;
        ss2 += r * r;
        if (in) rs[i * k + e] = r;
      }
      p[q] = ss2;
    }
    if (next) {
      const float inv2 = InvRms(VirtualBlockSum(p, scratch), k, nin.eps);
#pragma unroll
      for (int q = 0; q < kVirt; ++q) {
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          const int e = threadIdx.x + kThreads * q + kPostNormRegThreads * j;
          if (e < k) xs[i * k + e] = FromFloat<XT>(rs[i * k + e] * inv2 * nin.next_w[e]);
        }
      }
    }
  }
  __syncthreads();
  // Every CTA has read the old residual once its prologue is done: the last one to get here
  // writes the new one (after its own GEMV work).
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(nin.counter, 1u) == gridDim.x - 1;
  }
  GemvBody<XT, bf16, OutT, false, kMaxM>(xs, nullptr, w, out, m, n, k, k, 0, ldo, n0);
  __syncthreads();
  if (last) {
    __threadfence();
    for (int i = 0; i < m; ++i) {
      for (int e = threadIdx.x; e < k; e += kThreads) nin.residual[i * nin.ldr + e] = rs[i * k + e];
    }
    if (threadIdx.x == 0) *nin.counter = 0u;  // for the next call on this counter
  }
}

template <typename XT, typename OutT, int kMaxM, int kPer>
cudaError_t LaunchGemvNormAs(const GemvParams& p, cudaStream_t stream) {
  const int blocks = static_cast<int>((static_cast<int64_t>(p.n) + kRows - 1) / kRows);
  const size_t smem = static_cast<size_t>(GemvNormSmemBytes(p.m, p.k, p.norm->next_w != nullptr));
  return Launch(GemvNormKernel<XT, OutT, kMaxM, kPer>, blocks, kThreads, smem, stream, *p.norm,
                static_cast<const bf16*>(p.w), static_cast<OutT*>(p.out), p.m, p.n, p.k, p.ldo);
}

// kPer as LaunchPostNormResidual picks it for a row of k.
template <typename XT, typename OutT>
cudaError_t LaunchGemvNormFor(const GemvParams& p, cudaStream_t stream) {
  const bool two = p.k <= 2 * kPostNormRegThreads;
  if (p.m == 1) {
    return two ? LaunchGemvNormAs<XT, OutT, 1, 2>(p, stream) : LaunchGemvNormAs<XT, OutT, 1, 4>(p, stream);
  }
  return two ? LaunchGemvNormAs<XT, OutT, 2, 2>(p, stream) : LaunchGemvNormAs<XT, OutT, 2, 4>(p, stream);
}

cudaError_t LaunchGemvNorm(const GemvParams& p, cudaStream_t stream) {
  static_assert(kGemvNormMaxK <= 4 * kPostNormRegThreads, "kPer above 4 is not compiled");
  const GemvNormIn& nin = *p.norm;
  const bool next = nin.next_w != nullptr, out_f32 = p.out_type == DataType::kF32;
  if (p.w_type != DataType::kBF16 || p.up != nullptr || p.m > kGemvGatedMaxM || p.k > kGemvNormMaxK ||
      nin.y == nullptr || nin.residual == nullptr || nin.post_w == nullptr || nin.counter == nullptr ||
      p.x_type != (next ? DataType::kBF16 : DataType::kF32) ||
      (!out_f32 && p.out_type != DataType::kBF16) ||
      GemvNormSmemBytes(p.m, p.k, next) > 48 * 1024) {
    return cudaErrorInvalidValue;
  }
  if (next) {
    return out_f32 ? LaunchGemvNormFor<bf16, float>(p, stream) : LaunchGemvNormFor<bf16, bf16>(p, stream);
  }
  return out_f32 ? LaunchGemvNormFor<float, float>(p, stream) : LaunchGemvNormFor<float, bf16>(p, stream);
}

template <typename XT, typename WT, typename OutT, bool kGated, int kMaxM>
cudaError_t LaunchGemvBucket(const GemvParams& p, cudaStream_t stream) {
  const int blocks = static_cast<int>((static_cast<int64_t>(p.n) + kRows - 1) / kRows);
  return Launch(GemvKernel<XT, WT, OutT, kGated, kMaxM>, blocks, kThreads, 0, stream,
                static_cast<const XT*>(p.x), static_cast<const XT*>(p.up),
                static_cast<const WT*>(p.w), static_cast<OutT*>(p.out), p.m, p.n, p.k, p.ldx, p.ldu,
                p.ldo);
}

template <typename XT, typename WT, typename OutT, bool kGated = false>
cudaError_t LaunchGemvAs(const GemvParams& p, cudaStream_t stream) {
  static_assert(kGemvMaxM == 8, "the buckets below end at kGemvMaxM");
  if (p.m == 1) return LaunchGemvBucket<XT, WT, OutT, kGated, 1>(p, stream);
  if (p.m == 2) return LaunchGemvBucket<XT, WT, OutT, kGated, 2>(p, stream);
  static_assert(kGemvGatedMaxM <= 2, "the gated form compiles the first two buckets only");
  if constexpr (!kGated) {
    if (p.m <= 4) return LaunchGemvBucket<XT, WT, OutT, false, 4>(p, stream);
    return LaunchGemvBucket<XT, WT, OutT, false, 8>(p, stream);
  }
  return cudaErrorInvalidValue;  // gated above kGemvGatedMaxM: refused by LaunchGemv
}

// x and out are each the weight's type or f32.
template <typename WT>
cudaError_t LaunchFor(const GemvParams& p, cudaStream_t stream) {
  const bool x_f32 = p.x_type == DataType::kF32, out_f32 = p.out_type == DataType::kF32;
  if ((!x_f32 && p.x_type != p.w_type) || (!out_f32 && p.out_type != p.w_type)) {
    return cudaErrorInvalidValue;
  }
  if (p.up != nullptr) {
    if (x_f32 || p.ldu % 8 != 0) return cudaErrorInvalidValue;
    return out_f32 ? LaunchGemvAs<WT, WT, float, true>(p, stream)
                   : LaunchGemvAs<WT, WT, WT, true>(p, stream);
  }
  if (x_f32)
    return out_f32 ? LaunchGemvAs<float, WT, float>(p, stream)
                   : LaunchGemvAs<float, WT, WT>(p, stream);
  return out_f32 ? LaunchGemvAs<WT, WT, float>(p, stream) : LaunchGemvAs<WT, WT, WT>(p, stream);
}

}  // namespace

cudaError_t LaunchGemv(const GemvParams& p, cudaStream_t stream) {
  if (p.norm != nullptr) {
    return p.m < 1 || p.n < 1 || p.k % 8 != 0 ? cudaErrorInvalidValue : LaunchGemvNorm(p, stream);
  }
  if (p.m < 1 || p.m > kGemvMaxM || p.n < 1 || p.k % 8 != 0 || p.ldx % 8 != 0 ||
      (p.up != nullptr && p.m > kGemvGatedMaxM)) {
    return cudaErrorInvalidValue;
  }
  switch (p.w_type) {
    case DataType::kBF16: return LaunchFor<bf16>(p, stream);
    case DataType::kF16: return LaunchFor<f16>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace gannet::kernels
