// The sm_70+ int4 kernels (int4_linear.h): the SIMT linear (f32 arithmetic on CUDA cores; the
// Volta path, any M in chunks of 8) and the dequantization to a dense weight. They read the same
// device layout as the MMA kernels (int4_layout.h): a lane's word of k-step s holds rows g and
// g + 8 at columns 16 s + 2 t + {0, 1, 8, 9}.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/quant/int4_device.cuh"
#include "kernels/quant/int4_launchers.h"
#include "kernels/quant/int4_linear.h"

namespace gannet::kernels::int4 {
namespace {

constexpr int kWarps = 8;
constexpr int kRowsM = 8;  // x rows a CTA takes (blockIdx.y picks the chunk)

__device__ __forceinline__ float2 LoadPair(const bf16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}
__device__ __forceinline__ float2 LoadPair(const f16* p) {
  return __half22float2(*reinterpret_cast<const __half2*>(p));
}

// One CTA: one 16-row block and up to 8 rows of x; warps take k tiles round robin; each lane
// sums its rows' products over a group, scales them, and the lanes of a row (t = 0..3) and then
// the warps (in order) add up.
template <typename T, typename ST, typename OutT, bool kZp, bool kG32>
__global__ void __launch_bounds__(kWarps * 32)
    SimtKernel(const uint8_t* __restrict__ w, const ST* __restrict__ scales,
               const uint8_t* __restrict__ zps, const T* __restrict__ x, OutT* __restrict__ out,
               int m, int n, int k_tiles, int groups, int grp_shift, int64_t ldx, int64_t ldo) {
  PdlEnter();
  const int rb = blockIdx.x, m0 = blockIdx.y * kRowsM, mc = min(kRowsM, m - m0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const uint4* wt =
      reinterpret_cast<const uint4*>(w + static_cast<int64_t>(rb) * k_tiles * kInt4TileBytes) +
      lane;
  const T* xr = x + m0 * ldx + 2 * t;
  // kG32: two groups a tile (k-steps 0-1, 2-3), else one: group kt >> grp_shift
  // (Int4GroupShift), compile-time shapes without a division.
  constexpr int kSegSteps = kG32 ? 2 : 4;
  float acc[kRowsM][2];
#pragma unroll
  for (int i = 0; i < kRowsM; ++i) acc[i][0] = acc[i][1] = 0.f;
  for (int kt = warp; kt < k_tiles; kt += kWarps) {
    const uint4 wv = __ldcs(wt + static_cast<int64_t>(kt) * 32);
    float tmp[kRowsM][2] = {};
    float2 sc = make_float2(0.f, 0.f);
    int2 z = make_int2(0, 0);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      if (s % kSegSteps == 0) {
        const int64_t grp = kG32 ? 2 * static_cast<int64_t>(kt) + s / 2 : kt >> grp_shift;
        const int64_t pair = PairIndex(rb, groups, grp, g);
        sc = ScalePair(scales, pair);
        z = ZeroPair<kZp>(zps, pair);
#pragma unroll
        for (int i = 0; i < kRowsM; ++i) tmp[i][0] = tmp[i][1] = 0.f;
      }
      const uint32_t word = Word(wv, s);
      // Nibble j: row g + 8 (j & 1), column 2t + 8 ((j >> 1) & 1) + (j >> 2). 2^23 + u as an f32
      // bit pattern (one LOP3 after the shift) minus 2^23 + zero point is u - zp exactly, without
      // an int-to-float conversion (a quarter-rate instruction on Volta).
      const float bias_lo = 8388608.f + static_cast<float>(z.x);
      const float bias_hi = 8388608.f + static_cast<float>(z.y);
      float v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        v[j] = __uint_as_float(((word >> (4 * j)) & 0xFu) | 0x4B000000u) -
               ((j & 1) ? bias_hi : bias_lo);
      }
#pragma unroll
      for (int i = 0; i < kRowsM; ++i) {
        if (i < mc) {
          const T* xp = xr + i * ldx + static_cast<int64_t>(kt) * kInt4TileK + s * 16;
          const float2 lo = LoadPair(xp), hi = LoadPair(xp + 8);
          tmp[i][0] += v[0] * lo.x + v[4] * lo.y + v[2] * hi.x + v[6] * hi.y;
          tmp[i][1] += v[1] * lo.x + v[5] * lo.y + v[3] * hi.x + v[7] * hi.y;
        }
      }
      if ((s + 1) % kSegSteps == 0) {
#pragma unroll
        for (int i = 0; i < kRowsM; ++i) {
          acc[i][0] += sc.x * tmp[i][0];
          acc[i][1] += sc.y * tmp[i][1];
        }
      }
    }
  }
  __shared__ float red[kWarps][8][kRowsM][2];
#pragma unroll
  for (int i = 0; i < kRowsM; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v = acc[i][h];
      v += __shfl_xor_sync(0xffffffffu, v, 1);
      v += __shfl_xor_sync(0xffffffffu, v, 2);
      if (t == 0) red[warp][g][i][h] = v;
    }
  }
  __syncthreads();
  if (threadIdx.x < 8 * kRowsM * 2) {
    const int gg = threadIdx.x / (kRowsM * 2), i = (threadIdx.x / 2) % kRowsM, h = threadIdx.x % 2;
    float s = 0.f;
#pragma unroll
    for (int wi = 0; wi < kWarps; ++wi) s += red[wi][gg][i][h];
    const int row = rb * kInt4RowBlock + gg + 8 * h;
    if (i < mc && row < n) out[(m0 + i) * ldo + row] = FromFloat<OutT>(s);
  }
}

// One warp per tile (16 rows x 64 k), a lane per 16-byte slice of it: the lane's 32 elements go
// to the warp's tile in shared memory, then the warp writes the tile's rows as 16-byte stores,
// eight lanes to a 128-byte row. Each lane storing its elements straight to the dense weight
// (2-byte stores at its fragment's scattered rows and columns) ran at 0.5 TB/s on an H100
// (14.7% of DRAM bandwidth, the load/store unit saturated; ncu, 2026-12-07).
template <typename ST, typename OutT, bool kZp>
__global__ void __launch_bounds__(256)
    DequantKernel(const uint8_t* __restrict__ w, const ST* __restrict__ scales,
                  const uint8_t* __restrict__ zps, OutT* __restrict__ dense, int n, int64_t k,
                  int64_t tiles, int k_tiles, int groups, int group) {
  static_assert(sizeof(OutT) == 2, "16-byte row chunks of 8 elements");
  PdlEnter();
  __shared__ __align__(16) OutT stage[8][kInt4RowBlock][kInt4TileK];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t tile = static_cast<int64_t>(blockIdx.x) * 8 + warp;
  if (tile >= tiles) return;  // the whole warp: its tile is past the end
  const int g = lane >> 2, t = lane & 3;
  const int64_t rb = tile / k_tiles, kt = tile % k_tiles;
  const uint4 wv = reinterpret_cast<const uint4*>(w)[tile * 32 + lane];
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const int c0 = s * 16 + 2 * t;
    const int64_t pair = PairIndex(rb, groups, (kt * kInt4TileK + c0) / group, g);
    const float2 sc = ScalePair(scales, pair);
    const int2 z = ZeroPair<kZp>(zps, pair);
    const uint32_t word = Word(wv, s);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int hi = j & 1;
      const float v =
          static_cast<float>(static_cast<int>((word >> (4 * j)) & 0xF) - (hi ? z.y : z.x)) *
          (hi ? sc.y : sc.x);
      stage[warp][g + 8 * hi][c0 + 8 * ((j >> 1) & 1) + (j >> 2)] = FromFloat<OutT>(v);
    }
  }
  __syncwarp();
#pragma unroll
  for (int c = lane; c < kInt4RowBlock * kInt4TileK / 8; c += 32) {
    const int r = c / 8, q = c % 8;
    const int64_t row = rb * kInt4RowBlock + r;
    if (row < n) {
      *reinterpret_cast<uint4*>(dense + row * k + kt * kInt4TileK + q * 8) =
          *reinterpret_cast<const uint4*>(&stage[warp][r][q * 8]);
    }
  }
}

template <typename T, typename ST, typename OutT, bool kZp, bool kG32>
cudaError_t SimtLaunchAs(const Int4LinearParams& p, cudaStream_t stream) {
  const Int4Layout& l = p.layout;
  const dim3 grid(static_cast<unsigned>(l.row_blocks()),
                  static_cast<unsigned>((p.m + kRowsM - 1) / kRowsM));
  return Launch(SimtKernel<T, ST, OutT, kZp, kG32>, grid, kWarps * 32, 0, stream, p.w,
                static_cast<const ST*>(p.scales), p.zero_points, static_cast<const T*>(p.x),
                static_cast<OutT*>(p.out), p.m, static_cast<int>(l.n),
                static_cast<int>(l.k_tiles()), static_cast<int>(l.groups()),
                Int4GroupShift(l.group, l.k), p.ldx, p.ldo);
}
template <typename T, typename ST, typename OutT, bool kZp>
cudaError_t SimtAs(const Int4LinearParams& p, cudaStream_t stream) {
  return p.layout.group == 32 ? SimtLaunchAs<T, ST, OutT, kZp, true>(p, stream)
                              : SimtLaunchAs<T, ST, OutT, kZp, false>(p, stream);
}

template <typename T, typename ST>
cudaError_t SimtByOut(const Int4LinearParams& p, cudaStream_t s) {
  if (p.out_type == DType::kF32) {
    return p.layout.zero_point ? SimtAs<T, ST, float, true>(p, s)
                               : SimtAs<T, ST, float, false>(p, s);
  }
  return p.layout.zero_point ? SimtAs<T, ST, T, true>(p, s) : SimtAs<T, ST, T, false>(p, s);
}
template <typename T>
cudaError_t SimtByScale(const Int4LinearParams& p, cudaStream_t s) {
  switch (p.layout.scale) {
    case DType::kBF16:
      return SimtByOut<T, bf16>(p, s);
    case DType::kF16:
      return SimtByOut<T, f16>(p, s);
    case DType::kF32:
      return SimtByOut<T, float>(p, s);
    default:
      return cudaErrorInvalidValue;
  }
}

template <typename ST, typename OutT>
cudaError_t DequantAs(const Int4Layout& l, const uint8_t* w, const void* scales, const uint8_t* zps,
                      void* dense, cudaStream_t stream) {
  const int64_t tiles = l.row_blocks() * l.k_tiles();
  const unsigned blocks = static_cast<unsigned>((tiles * 32 + 255) / 256);
  if (l.zero_point) {
    return Launch(DequantKernel<ST, OutT, true>, blocks, 256, 0, stream, w,
                  static_cast<const ST*>(scales), zps, static_cast<OutT*>(dense),
                  static_cast<int>(l.n), l.k, tiles, static_cast<int>(l.k_tiles()),
                  static_cast<int>(l.groups()), l.group);
  }
  return Launch(DequantKernel<ST, OutT, false>, blocks, 256, 0, stream, w,
                static_cast<const ST*>(scales), zps, static_cast<OutT*>(dense),
                static_cast<int>(l.n), l.k, tiles, static_cast<int>(l.k_tiles()),
                static_cast<int>(l.groups()), l.group);
}
template <typename OutT>
cudaError_t DequantByScale(const Int4Layout& l, const uint8_t* w, const void* scales,
                           const uint8_t* zps, void* dense, cudaStream_t stream) {
  switch (l.scale) {
    case DType::kBF16:
      return DequantAs<bf16, OutT>(l, w, scales, zps, dense, stream);
    case DType::kF16:
      return DequantAs<f16, OutT>(l, w, scales, zps, dense, stream);
    case DType::kF32:
      return DequantAs<float, OutT>(l, w, scales, zps, dense, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t LaunchSimt(const Int4LinearParams& p, cudaStream_t stream) {
  return p.x_type == DType::kF16 ? SimtByScale<f16>(p, stream) : SimtByScale<bf16>(p, stream);
}

}  // namespace gannet::kernels::int4

namespace gannet::kernels {

cudaError_t LaunchInt4Dequantize(const Int4Layout& l, const uint8_t* w, const void* scales,
                                 const uint8_t* zero_points, DType out_type, void* w_dense,
                                 cudaStream_t stream) {
  if (w == nullptr || scales == nullptr || w_dense == nullptr ||
      (l.zero_point && zero_points == nullptr) || l.k <= 0 || l.k % kInt4TileK != 0 ||
      l.group <= 0 || l.k % l.group != 0 || (l.group < 64 && l.group != 32) || l.n < 1 ||
      l.n_pad != (l.n + 15) / 16 * 16) {
    return cudaErrorInvalidValue;
  }
  switch (out_type) {
    case DType::kBF16:
      return int4::DequantByScale<bf16>(l, w, scales, zero_points, w_dense, stream);
    case DType::kF16:
      return int4::DequantByScale<f16>(l, w, scales, zero_points, w_dense, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace gannet::kernels
