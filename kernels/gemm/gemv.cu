// Split-K GEMV for M <= 8 (see gemv.h): a CTA of 256 threads owns kRows output columns (4, 2 or 1:
// the GemvTile); its threads stride over K in 16-byte chunks, so each weight row is read once,
// coalesced, with kRows independent loads in flight per thread (kRows x kDepth in a deep tile),
// and x (tiny, L1-resident) is reused across the kRows rows. Partial sums reduce through warp
// shuffles and shared memory in a fixed order.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/gemm/gemv.h"

namespace gannet::kernels {
namespace {

constexpr int kThreads = 256;

// 16-byte chunks of a weight row as f32: bf16 or f16.
__device__ __forceinline__ void Unpack8(const int4& raw, const bf16*, float* out) {
  Unpack8(*reinterpret_cast<const Bf16x8*>(&raw), out);
}
__device__ __forceinline__ void Unpack8(const int4& raw, const f16*, float* out) {
  Load8(reinterpret_cast<const f16*>(&raw), out);
}

// kGated: x is a gate and the input is gelu_tanh(x) * up, rounded to XT (GemvParams::up).
// kMaxM: the bucket of m (1, 2, 4 or 8) the accumulators are sized for. At kMaxM = 8 a thread
// holds 120-128 registers, which leaves two CTAs per SM; a batch-1 step's small projections
// (1-4 waves of CTAs) then run mostly on ramp-up and tail. m = 1 needs 4 accumulators, so its
// CTAs fill the SMs in one wave. The arithmetic for a given m is the same in every bucket.
// The CTA shape of a GemvTile (gemv.h): output rows per CTA, and for the deep tiles how many of a
// thread's K chunks it loads before it multiplies any (kDepth x kRows 16-byte loads in flight).
// Every tile sums each output in the same order (a thread's chunks in K order, then the warps in
// order), so all give the same bits.
constexpr int TileRows(GemvTile t) {
  return t == GemvTile::k4Rows || t == GemvTile::k4RowsDeep ? 4 : t == GemvTile::k2RowsDeep ? 2 : 1;
}
constexpr int TileDepth(GemvTile t) { return t == GemvTile::k4RowsDeep ? 2 : 4; }

// acc[i][r] += x_i . chunk c of row r, for the chunk's weights wv already loaded.
template <typename XT, typename WT, bool kGated, int kMaxM, int kRows>
__device__ __forceinline__ void AccumulateChunk(const int4 (&wv)[kRows], const WT* w_type,
                                                const XT* __restrict__ x, const XT* __restrict__ up,
                                                int m, int c, int64_t ldx, int64_t ldu,
                                                float (&acc)[kMaxM][kRows]) {
  float wf[kRows][8];
#pragma unroll
  for (int r = 0; r < kRows; ++r) Unpack8(wv[r], w_type, wf[r]);
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

// kGlu (GemvParams::glu): the CTA's first kRows / 2 rows are gate rows j0 + r and the others the
// matching up rows glu + j0 + r, where j0 = blockIdx.x * kRows / 2; n is then glu.
template <typename XT, typename WT, typename OutT, bool kGated, int kMaxM, GemvTile kTile,
          bool kGlu = false>
__global__ void __launch_bounds__(kThreads)
    GemvKernel(const XT* __restrict__ x, const XT* __restrict__ up, const WT* __restrict__ w,
               OutT* __restrict__ out, int m, int n, int k, int64_t ldx, int64_t ldu, int64_t ldo,
               uint32_t prefetch_cap) {
  constexpr int kRows = TileRows(kTile);
  constexpr int kHalf = kRows / 2;
  static_assert(!kGlu || (kHalf > 0 && !kGated), "the GeLU-mul epilogue pairs rows");
  const int n0 = blockIdx.x * (kGlu ? kHalf : kRows);  // first output
  // Weight row of the CTA's row r (clamped into its half: a ragged last CTA repeats a row).
  auto row_of = [&](int r) {
    if constexpr (kGlu) return r < kHalf ? min(n0 + r, n - 1) : n + min(n0 + r - kHalf, n - 1);
    return min(n0 + r, n - 1);
  };
  // The weights do not depend on earlier kernels: the start of this CTA's rows (contiguous, up to
  // prefetch_cap bytes: gemv.h, kGemvPrefetchBytes; half from each half with kGlu) moves into L2
  // before it waits for its predecessor, so its first loads hit L2 when the wait ends.
  if (threadIdx.x == 0 && prefetch_cap > 0) {
    const int rows = kGlu ? min(kHalf, n - n0) : min(kRows, n - n0);
    const uint32_t rows_bytes = static_cast<uint32_t>(rows) * static_cast<uint32_t>(k) * sizeof(WT);
    if constexpr (kGlu) {
      const uint32_t cap = (prefetch_cap / 2) & ~15u;
      PrefetchL2(w + static_cast<int64_t>(row_of(0)) * k, min(rows_bytes, cap));
      PrefetchL2(w + static_cast<int64_t>(row_of(kHalf)) * k, min(rows_bytes, cap));
    } else {
      PrefetchL2(w + static_cast<int64_t>(n0) * k, min(rows_bytes, prefetch_cap));
    }
  }
  PdlEnter();
  const int chunks = k / 8;
  float acc[kMaxM][kRows];
#pragma unroll
  for (int i = 0; i < kMaxM; ++i) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[i][r] = 0.f;
  }
  const WT* wrow[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) wrow[r] = w + static_cast<int64_t>(row_of(r)) * k;

  // Weights are streamed once: __ldcs keeps them out of L1, so x stays there.
  if constexpr (kTile == GemvTile::k4Rows) {
#pragma unroll 2
    for (int c = threadIdx.x; c < chunks; c += kThreads) {
      int4 wv[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        wv[r] = __ldcs(reinterpret_cast<const int4*>(wrow[r] + c * 8));
      AccumulateChunk<XT, WT, kGated, kMaxM, kRows>(wv, w, x, up, m, c, ldx, ldu, acc);
    }
  } else {
    // Every load of kDepth chunks is issued before the first of them is multiplied (the compiler
    // does not hoist them out of an unrolled loop whose trip count it cannot see).
    constexpr int kDepth = TileDepth(kTile);
    for (int c0 = threadIdx.x; c0 < chunks; c0 += kDepth * kThreads) {
      int4 wv[kDepth][kRows];
#pragma unroll
      for (int d = 0; d < kDepth; ++d) {
        const int c = c0 + d * kThreads;
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          wv[d][r] = c < chunks ? __ldcs(reinterpret_cast<const int4*>(wrow[r] + c * 8)) : int4{};
        }
      }
#pragma unroll
      for (int d = 0; d < kDepth; ++d) {
        const int c = c0 + d * kThreads;
        if (c < chunks)
          AccumulateChunk<XT, WT, kGated, kMaxM, kRows>(wv[d], w, x, up, m, c, ldx, ldu, acc);
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
  if constexpr (kGlu) {
    // Gate and up of output j, each summed as the plain GEMV sums its rows and rounded as it
    // stores them, then GeluTanhMul's arithmetic (elementwise.cu).
    if (t < m * kHalf) {
      const int i = t / kHalf, j = t % kHalf;
      if (n0 + j < n) {
        float g = 0.f, u = 0.f;
#pragma unroll
        for (int wi = 0; wi < kThreads / 32; ++wi) {
          g += red[wi][i * kRows + j];
          u += red[wi][i * kRows + kHalf + j];
        }
        const float gr = ToFloat(FromFloat<OutT>(g)), ur = ToFloat(FromFloat<OutT>(u));
        out[i * ldo + n0 + j] = FromFloat<OutT>(GeluTanh(gr) * ur);
      }
    }
    return;
  }
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

template <typename XT, typename WT, typename OutT, bool kGated, int kMaxM, GemvTile kTile,
          bool kGlu = false>
cudaError_t LaunchGemvTile(const GemvParams& p, cudaStream_t stream) {
  // With kGlu a CTA makes kRows / 2 outputs of the glu the kernel takes as n.
  constexpr int kOuts = kGlu ? TileRows(kTile) / 2 : TileRows(kTile);
  const int n = kGlu ? p.glu : p.n;
  const int blocks = static_cast<int>((static_cast<int64_t>(n) + kOuts - 1) / kOuts);
  return Launch(GemvKernel<XT, WT, OutT, kGated, kMaxM, kTile, kGlu>, blocks, kThreads, 0, stream,
                static_cast<const XT*>(p.x), static_cast<const XT*>(p.up),
                static_cast<const WT*>(p.w), static_cast<OutT*>(p.out), p.m, n, p.k, p.ldx, p.ldu,
                p.ldo, p.prefetch_cap & ~15u);
}

// M > 1 runs the four-row tile only (LaunchGemv refuses another): the deeper tiles' extra loads in
// flight pay off at M = 1, where a thread's accumulators leave registers for them.
template <typename XT, typename WT, typename OutT, bool kGated, int kMaxM, bool kGlu = false>
cudaError_t LaunchGemvBucket(const GemvParams& p, cudaStream_t stream) {
  if constexpr (kMaxM == 1) {
    switch (p.tile) {
      case GemvTile::k4RowsDeep:
        return LaunchGemvTile<XT, WT, OutT, kGated, 1, GemvTile::k4RowsDeep, kGlu>(p, stream);
      case GemvTile::k2RowsDeep:
        return LaunchGemvTile<XT, WT, OutT, kGated, 1, GemvTile::k2RowsDeep, kGlu>(p, stream);
      case GemvTile::k1RowDeep:
        if constexpr (!kGlu) {
          return LaunchGemvTile<XT, WT, OutT, kGated, 1, GemvTile::k1RowDeep>(p, stream);
        }
        return cudaErrorInvalidValue;  // a row has no partner (refused by LaunchGemv)
      default:
        break;
    }
  }
  return LaunchGemvTile<XT, WT, OutT, kGated, kMaxM, GemvTile::k4Rows, kGlu>(p, stream);
}

// The GeLU-mul epilogue (GemvParams::glu): x, w and out of one type, every M bucket.
template <typename WT>
cudaError_t LaunchGemvGlu(const GemvParams& p, cudaStream_t stream) {
  if (p.m == 1) return LaunchGemvBucket<WT, WT, WT, false, 1, true>(p, stream);
  if (p.m == 2) return LaunchGemvBucket<WT, WT, WT, false, 2, true>(p, stream);
  if (p.m <= 4) return LaunchGemvBucket<WT, WT, WT, false, 4, true>(p, stream);
  return LaunchGemvBucket<WT, WT, WT, false, 8, true>(p, stream);
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
  const bool x_f32 = p.x_type == DType::kF32, out_f32 = p.out_type == DType::kF32;
  if ((!x_f32 && p.x_type != p.w_type) || (!out_f32 && p.out_type != p.w_type)) {
    return cudaErrorInvalidValue;
  }
  if (p.glu > 0) {
    if (x_f32 || out_f32 || p.up != nullptr || static_cast<int64_t>(p.glu) * 2 != p.n) {
      return cudaErrorInvalidValue;
    }
    return LaunchGemvGlu<WT>(p, stream);
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

bool GemvLaunchesWithPdl() {
  return PdlAllowed(
      reinterpret_cast<const void*>(GemvKernel<bf16, bf16, bf16, false, 1, GemvTile::k4Rows>));
}

cudaError_t LaunchGemv(const GemvParams& p, cudaStream_t stream) {
  if (p.m < 1 || p.m > kGemvMaxM || p.n < 1 || p.k % 8 != 0 || p.ldx % 8 != 0 ||
      (p.up != nullptr && p.m > kGemvGatedMaxM) || !GemvTileRuns(p.tile, p.m) || p.glu < 0 ||
      (p.glu > 0 && p.tile == GemvTile::k1RowDeep)) {
    return cudaErrorInvalidValue;
  }
  switch (p.w_type) {
    case DType::kBF16:
      return LaunchFor<bf16>(p, stream);
    case DType::kF16:
      return LaunchFor<f16>(p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace gannet::kernels
