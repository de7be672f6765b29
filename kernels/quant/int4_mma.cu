// The sm_80+ int4 kernels (int4_linear.h): the MMA GEMV (M <= 8) and the MMA GEMM (any M). Both
// take a lane's 16-byte weight load as its A fragments of four k16 steps (int4_layout.h), turn
// them into exact integers (u - zero point) in f16/bf16 registers, and multiply them with x on
// the tensor cores; per group the f32 partial sums are multiplied by the rows' scales and added
// to the accumulators, so the only rounding besides f32 sums is the output's.
//
// kG32 (group 32) is a template parameter: a tile then holds two groups (two scales a lane),
// else one (group 64, 128 or per-channel: the tile's group is kt >> grp_shift, Int4GroupShift),
// so the segment loop and the group index are compile-time shapes with no division.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/common/mma_sm80.cuh"
#include "kernels/quant/int4_device.cuh"
#include "kernels/quant/int4_launchers.h"

namespace gannet::kernels::int4 {
namespace {

constexpr int kGemvWarps = 8;
// Tiles a warp loads (weights, scales, x fragments) before it multiplies any: 4 x 512 bytes of
// weights in flight per warp.
[[maybe_unused]] constexpr int kGemvUnroll = 4;
// Bytes of its weights a GEMV CTA asks the L2 for before its PDL wait: 8 KB, the bf16 GEMV's
// measured default (kGemvPrefetchBytes); a multiple of 16, so every prefetch is whole tiles.
constexpr uint32_t kInt4PrefetchBytes = 8192;

template <typename T>
__device__ __forceinline__ void Mma(float* d, const uint32_t* a, const uint32_t* b) {
  if constexpr (std::is_same_v<T, bf16>) {
    sm80::MmaBf16(d, a, b);
  } else {
    sm80::MmaF16(d, a, b);
  }
}

[[maybe_unused]] __device__ __forceinline__ uint32_t LdgU32(const void* p) {
  return __ldg(reinterpret_cast<const unsigned int*>(p));
}

// The group of segment `seg` of k tile kt.
template <bool kG32>
__device__ __forceinline__ int64_t GroupOf(int kt, int seg, int grp_shift) {
  if constexpr (kG32) return 2 * static_cast<int64_t>(kt) + seg;
  return kt >> grp_shift;
}

// One CTA: one 16-row block (blockIdx.x) and one K slice (blockIdx.y of gridDim.y); its warps take
// the slice's tiles round robin. out (or, split, partial[split][m][n_pad] in f32) gets the sums.
// kNT: MMA column tiles of 8 rows of x (M <= 8 kNT): each dequantized A fragment multiplies kNT
// B fragments, so up to 32 rows of x read the weights once. Fewer tiles in flight with more
// columns (kGemvUnroll / kNT), which keeps the registers of x's fragments bounded.
template <typename T, typename ST, typename OutT, bool kZp, bool kG32, int kNT>
__global__ void __launch_bounds__(kGemvWarps * 32)
    GemvKernel(const uint8_t* __restrict__ w, const ST* __restrict__ scales,
               const uint8_t* __restrict__ zps, const T* __restrict__ x, OutT* __restrict__ out,
               float* __restrict__ partial, int m, int n, int64_t n_pad, int k_tiles, int groups,
               int grp_shift, int64_t ldx, int64_t ldo, uint32_t prefetch_cap) {
#if GANNET_SM80_ENABLED
  constexpr int kSegs = kG32 ? 2 : 1;  // scales per tile
  constexpr int kSegSteps = 4 / kSegs;
  using SL = ScaleLoad<ST>;
  const int rb = blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int per_split = (k_tiles + gridDim.y - 1) / gridDim.y;
  const int kt0 = blockIdx.y * per_split, kt1 = min(k_tiles, kt0 + per_split);
  // The weights do not depend on earlier kernels: the start of this CTA's slice (contiguous in
  // the tile order) moves into L2 before the PDL wait, as the bf16 GEMV does (gemv.h,
  // kGemvPrefetchBytes).
  if (threadIdx.x == 0 && prefetch_cap > 0 && kt1 > kt0) {
    const uint32_t bytes = static_cast<uint32_t>(kt1 - kt0) * kInt4TileBytes;
    PrefetchL2(w + (static_cast<int64_t>(rb) * k_tiles + kt0) * kInt4TileBytes,
               min(bytes, prefetch_cap));
  }
#endif
  PdlEnter();
#if GANNET_SM80_ENABLED
  // Lanes of a row past m read row m - 1 (their MMA columns are never stored): no predicates.
  const T* xr[kNT];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) xr[nt] = x + min(nt * 8 + g, m - 1) * ldx + 2 * t;
  const uint4* wt =
      reinterpret_cast<const uint4*>(w + static_cast<int64_t>(rb) * k_tiles * kInt4TileBytes) +
      lane;
  const typename SL::Raw* sr = nullptr;  // this lane's scale pairs of the row block
  const uint16_t* zr = nullptr;
  {
    const int64_t pair0 = PairIndex(rb, groups, 0, g);
    sr = reinterpret_cast<const typename SL::Raw*>(scales) + pair0;
    if constexpr (kZp) zr = reinterpret_cast<const uint16_t*>(zps) + pair0;
  }
  // One tile's registers: the weights, its scales (and zero points) and x's B fragments.
  struct Tile {
    uint4 w;
    typename SL::Raw s[kSegs];
    uint32_t z[kSegs];
    uint32_t b[kNT][4][2];
  };
  auto load = [&](int kt, Tile& r) {
    r.w = __ldcs(wt + static_cast<int64_t>(kt) * 32);
#pragma unroll
    for (int seg = 0; seg < kSegs; ++seg) {
      const int64_t off = GroupOf<kG32>(kt, seg, grp_shift) * 8;
      r.s[seg] = SL::LoadAt(sr + off);
      if constexpr (kZp) {
        r.z[seg] = __ldg(reinterpret_cast<const unsigned short*>(zr + off));
      } else {
        r.z[seg] = kInt4SignedZero | (kInt4SignedZero << 8);
      }
    }
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const T* xs = xr[nt] + static_cast<int64_t>(kt) * kInt4TileK;
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        r.b[nt][s][0] = LdgU32(xs + s * 16);
        r.b[nt][s][1] = LdgU32(xs + s * 16 + 8);
      }
    }
  };
  float acc[kNT][4] = {};
  auto compute = [&](const Tile& r) {
#pragma unroll
    for (int seg = 0; seg < kSegs; ++seg) {
      const float2 sc = SL::Get(r.s[seg]);
      const uint32_t bias_lo = Magic<T>::Bias(r.z[seg] & 0xFF);
      const uint32_t bias_hi = Magic<T>::Bias((r.z[seg] >> 8) & 0xFF);
      float tmp[kNT][4] = {};
#pragma unroll
      for (int i = 0; i < kSegSteps; ++i) {
        const int s = seg * kSegSteps + i;
        uint32_t a[4];
        DequantA<T>(Word(r.w, s), bias_lo, bias_hi, a);
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) Mma<T>(tmp[nt], a, r.b[nt][s]);
      }
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        acc[nt][0] += sc.x * tmp[nt][0];
        acc[nt][1] += sc.x * tmp[nt][1];
        acc[nt][2] += sc.y * tmp[nt][2];
        acc[nt][3] += sc.y * tmp[nt][3];
      }
    }
  };
  // The body: kUnroll whole tiles a warp, every load issued before any math; then the tail one
  // tile at a time.
  constexpr int kUnroll = kGemvUnroll / kNT > 0 ? kGemvUnroll / kNT : 1;
  int kt = kt0 + warp;
  for (; kt + (kUnroll - 1) * kGemvWarps < kt1; kt += kUnroll * kGemvWarps) {
    Tile r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) load(kt + u * kGemvWarps, r[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) compute(r[u]);
  }
  for (; kt < kt1; kt += kGemvWarps) {
    Tile r;
    load(kt, r);
    compute(r);
  }
  __shared__ float red[kGemvWarps][32][4 * kNT];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
    for (int c = 0; c < 4; ++c) red[warp][lane][nt * 4 + c] = acc[nt][c];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < 128 * kNT; idx += kGemvWarps * 32) {
    const int l = (idx >> 2) & 31, c = idx & 3, nt = idx >> 7;
    float sum = 0.f;
#pragma unroll
    for (int wi = 0; wi < kGemvWarps; ++wi) sum += red[wi][l][nt * 4 + c];
    const int row = rb * kInt4RowBlock + (l >> 2) + 8 * (c >> 1);
    const int mm = nt * 8 + 2 * (l & 3) + (c & 1);
    if (mm < m) {
      if (partial != nullptr) {
        partial[(static_cast<int64_t>(blockIdx.y) * m + mm) * n_pad + row] = sum;
      } else if (row < n) {
        out[mm * ldo + row] = FromFloat<OutT>(sum);
      }
    }
  }
#endif
}

// out[i][row] = the splits' partials summed in split order.
template <typename OutT>
__global__ void __launch_bounds__(256)
    SplitReduceKernel(const float* __restrict__ partial, OutT* __restrict__ out, int m, int n,
                      int64_t n_pad, int splits, int64_t ldo) {
  PdlEnter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(m) * n) return;
  const int mm = static_cast<int>(i / n), row = static_cast<int>(i % n);
  float s = 0.f;
  for (int sp = 0; sp < splits; ++sp)
    s += partial[(static_cast<int64_t>(sp) * m + mm) * n_pad + row];
  out[mm * ldo + row] = FromFloat<OutT>(s);
}

constexpr int kGemmWarps = 4;  // 4 row blocks = 64 output rows of the weight per CTA
constexpr int kGemmM = 64;     // x rows per CTA (8 MMA columns of 8)
// Halves per staged x row: 72 (36 words) puts the 32 lanes' B-fragment reads (row g, word t) in
// 32 different banks.
[[maybe_unused]] constexpr int kXStride = kInt4TileK + 8;

// One CTA: 64 weight rows (4 row blocks, one a warp) x 64 rows of x; x's k tile staged in shared
// memory (double buffered through registers), the weights read straight into A fragments.
template <typename T, typename ST, typename OutT, bool kZp, bool kG32>
__global__ void __launch_bounds__(kGemmWarps * 32)
    GemmKernel(const uint8_t* __restrict__ w, const ST* __restrict__ scales,
               const uint8_t* __restrict__ zps, const T* __restrict__ x, OutT* __restrict__ out,
               int m, int n, int row_blocks, int k_tiles, int groups, int grp_shift, int64_t ldx,
               int64_t ldo) {
  PdlEnter();
#if GANNET_SM80_ENABLED
  constexpr int kSegs = kG32 ? 2 : 1;
  constexpr int kSegSteps = 4 / kSegs;
  using SL = ScaleLoad<ST>;
  __shared__ __align__(16) T xs[2][kGemmM][kXStride];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int rb = blockIdx.x * kGemmWarps + warp;
  const bool has_rows = rb < row_blocks;
  const int rbc = has_rows ? rb : 0;  // a warp past the rows reads row block 0 and stores nothing
  const int m0 = blockIdx.y * kGemmM;
  const uint4* wt =
      reinterpret_cast<const uint4*>(w + static_cast<int64_t>(rbc) * k_tiles * kInt4TileBytes) +
      lane;

  // x's 64 x 64 tile: 512 16-byte chunks, 4 a thread.
  uint4 xv[4];
  auto load_x = [&](int kt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int idx = threadIdx.x + i * kGemmWarps * 32, r = idx >> 3, c = idx & 7;
      xv[i] = m0 + r < m ? __ldg(reinterpret_cast<const uint4*>(
                               x + (m0 + r) * ldx + static_cast<int64_t>(kt) * kInt4TileK + c * 8))
                         : make_uint4(0, 0, 0, 0);
    }
  };
  auto store_x = [&](int buf) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int idx = threadIdx.x + i * kGemmWarps * 32, r = idx >> 3, c = idx & 7;
      *reinterpret_cast<uint4*>(&xs[buf][r][c * 8]) = xv[i];
    }
  };

  float acc[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
  load_x(0);
  store_x(0);
  __syncthreads();
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int buf = kt & 1;
    if (kt + 1 < k_tiles) load_x(kt + 1);
    const uint4 wv = __ldcs(wt + static_cast<int64_t>(kt) * 32);
    typename SL::Raw sraw[kSegs];
    uint32_t zraw[kSegs];
#pragma unroll
    for (int seg = 0; seg < kSegs; ++seg) {
      const int64_t pair = PairIndex(rbc, groups, GroupOf<kG32>(kt, seg, grp_shift), g);
      sraw[seg] = SL::Load(scales, pair);
      zraw[seg] = ZeroLoad<kZp>(zps, pair);
    }
#pragma unroll
    for (int seg = 0; seg < kSegs; ++seg) {
      const float2 sc = SL::Get(sraw[seg]);
      const uint32_t bias_lo = Magic<T>::Bias(zraw[seg] & 0xFF);
      const uint32_t bias_hi = Magic<T>::Bias((zraw[seg] >> 8) & 0xFF);
      float tmp[8][4];
#pragma unroll
      for (int j = 0; j < 8; ++j) tmp[j][0] = tmp[j][1] = tmp[j][2] = tmp[j][3] = 0.f;
#pragma unroll
      for (int i = 0; i < kSegSteps; ++i) {
        const int s = seg * kSegSteps + i;
        uint32_t a[4];
        DequantA<T>(Word(wv, s), bias_lo, bias_hi, a);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const T* xp = &xs[buf][j * 8 + g][s * 16 + 2 * t];
          const uint32_t b[2] = {*reinterpret_cast<const uint32_t*>(xp),
                                 *reinterpret_cast<const uint32_t*>(xp + 8)};
          Mma<T>(tmp[j], a, b);
        }
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        acc[j][0] += sc.x * tmp[j][0];
        acc[j][1] += sc.x * tmp[j][1];
        acc[j][2] += sc.y * tmp[j][2];
        acc[j][3] += sc.y * tmp[j][3];
      }
    }
    if (kt + 1 < k_tiles) store_x(buf ^ 1);
    __syncthreads();
  }
  if (!has_rows) return;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int row = rb * kInt4RowBlock + g + 8 * (c >> 1);
      const int mm = m0 + j * 8 + 2 * t + (c & 1);
      if (mm < m && row < n) out[mm * ldo + row] = FromFloat<OutT>(acc[j][c]);
    }
  }
#endif
}

template <typename T, typename ST, typename OutT, bool kZp, bool kG32>
cudaError_t GemvAs(const Int4LinearParams& p, cudaStream_t stream) {
  const Int4Layout& l = p.layout;
  const int splits = p.splits;
  float* partial = splits > 1 ? static_cast<float*>(p.workspace) : nullptr;
  const dim3 grid(static_cast<unsigned>(l.row_blocks()), static_cast<unsigned>(splits));
  auto kernel = p.m <= 8    ? GemvKernel<T, ST, OutT, kZp, kG32, 1>
                : p.m <= 16 ? GemvKernel<T, ST, OutT, kZp, kG32, 2>
                            : GemvKernel<T, ST, OutT, kZp, kG32, 4>;
  cudaError_t err = Launch(
      kernel, grid, kGemvWarps * 32, 0, stream, p.w, static_cast<const ST*>(p.scales),
      p.zero_points, static_cast<const T*>(p.x), static_cast<OutT*>(p.out), partial, p.m,
      static_cast<int>(l.n), l.n_pad, static_cast<int>(l.k_tiles()), static_cast<int>(l.groups()),
      Int4GroupShift(l.group, l.k), p.ldx, p.ldo, kInt4PrefetchBytes);
  if (err != cudaSuccess || splits <= 1) return err;
  const int64_t total = static_cast<int64_t>(p.m) * l.n;
  return Launch(SplitReduceKernel<OutT>, static_cast<unsigned>((total + 255) / 256), 256, 0, stream,
                static_cast<const float*>(partial), static_cast<OutT*>(p.out), p.m,
                static_cast<int>(l.n), l.n_pad, splits, p.ldo);
}

template <typename T, typename ST, typename OutT, bool kZp, bool kG32>
cudaError_t GemmAs(const Int4LinearParams& p, cudaStream_t stream) {
  const Int4Layout& l = p.layout;
  const int row_blocks = static_cast<int>(l.row_blocks());
  const dim3 grid(static_cast<unsigned>((row_blocks + kGemmWarps - 1) / kGemmWarps),
                  static_cast<unsigned>((p.m + kGemmM - 1) / kGemmM));
  return Launch(GemmKernel<T, ST, OutT, kZp, kG32>, grid, kGemmWarps * 32, 0, stream, p.w,
                static_cast<const ST*>(p.scales), p.zero_points, static_cast<const T*>(p.x),
                static_cast<OutT*>(p.out), p.m, static_cast<int>(l.n), row_blocks,
                static_cast<int>(l.k_tiles()), static_cast<int>(l.groups()),
                Int4GroupShift(l.group, l.k), p.ldx, p.ldo);
}

// Type dispatch: x (bf16 / f16), out (x's type / f32), scales (bf16 / f16 / f32), zero points,
// group 32 or not.
template <typename T, typename ST, typename OutT, bool kZp>
cudaError_t ByGroup(bool gemm, const Int4LinearParams& p, cudaStream_t s) {
  if (p.layout.group == 32) {
    return gemm ? GemmAs<T, ST, OutT, kZp, true>(p, s) : GemvAs<T, ST, OutT, kZp, true>(p, s);
  }
  return gemm ? GemmAs<T, ST, OutT, kZp, false>(p, s) : GemvAs<T, ST, OutT, kZp, false>(p, s);
}
template <typename T, typename ST, typename OutT>
cudaError_t ByZp(bool gemm, const Int4LinearParams& p, cudaStream_t s) {
  return p.layout.zero_point ? ByGroup<T, ST, OutT, true>(gemm, p, s)
                             : ByGroup<T, ST, OutT, false>(gemm, p, s);
}
template <typename T, typename ST>
cudaError_t ByOut(bool gemm, const Int4LinearParams& p, cudaStream_t s) {
  return p.out_type == DType::kF32 ? ByZp<T, ST, float>(gemm, p, s) : ByZp<T, ST, T>(gemm, p, s);
}
template <typename T>
cudaError_t ByScale(bool gemm, const Int4LinearParams& p, cudaStream_t s) {
  switch (p.layout.scale) {
    case DType::kBF16:
      return ByOut<T, bf16>(gemm, p, s);
    case DType::kF16:
      return ByOut<T, f16>(gemm, p, s);
    case DType::kF32:
      return ByOut<T, float>(gemm, p, s);
    default:
      return cudaErrorInvalidValue;
  }
}
cudaError_t ByX(bool gemm, const Int4LinearParams& p, cudaStream_t s) {
  return p.x_type == DType::kF16 ? ByScale<f16>(gemm, p, s) : ByScale<bf16>(gemm, p, s);
}

}  // namespace

cudaError_t LaunchMmaGemv(const Int4LinearParams& p, cudaStream_t stream) {
  return ByX(false, p, stream);
}
cudaError_t LaunchMmaGemm(const Int4LinearParams& p, cudaStream_t stream) {
  return ByX(true, p, stream);
}

}  // namespace gannet::kernels::int4
