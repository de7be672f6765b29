// Paged split-KV decode attention over an FP8 KV cache for small query groups (<= 8 rows a CTA:
// the GQA group x query tokens), with the KEYS on the MMA's M dimension ("key-major").
//
// Why: the row-major decode kernels (flash_decode_sm80.cuh) put a CTA's query rows on M, which
// the m16n8k16 MMA makes 16 however few there are. 31B's sliding layers have 2 query heads per KV
// head, so 14 of the 16 rows are padding, and every warp still runs the softmax of all 16 rows;
// the warps split the head dim, so each key's S is also summed across warps through shared
// memory. Over an FP8 cache that per-key work, not the bytes, set the pace: 271 us for 31B's
// sliding layer at 64 sequences, the bf16 kernel's time for twice the bytes (47% of copy).
//
// Here S^T = K Q^T and O^T = V^T P^T: M is 16 keys (S) or 16 output dims (O), N the 8 query rows,
// so a warp owns whole keys over the whole head dim: Q^T (32 registers at hd256) and O^T (64)
// fit, no partial S crosses warps, and the softmax runs once per (key, row) for 8 rows. Each of
// the kWarps warps takes 16 keys of every kBlockN = 16 kWarps-key tile, with its own running max
// and sum; the warps' partial O are merged once, at the end, through the idle staging memory.
//
// Fragments (m16n8k16, lane = 4 g + t):
// - Reduction dims of S are permuted as in the row-major FP8 kernel (PermuteQForFp8's order), so
//   lane t's A operand for a 32-dim block is one 8-byte load of K rows g and g + 8, and its B
//   operand (Q^T) one 16-byte load of Q row g, taken from global memory once.
// - P^T leaves S^T's accumulator as (key g, rows 2t, 2t + 1) and enters P.V as (keys 2t, 2t + 1,
//   row g): one movmatrix.trans per 8 keys.
// - O^T's dims are permuted too: lane g owns the two 16-byte chunks at bytes 16 g and
//   128 + 16 g of every V row (KDimOfSlot), so its A operand (V^T) comes from four 16-byte loads
//   a 16-key step, conflict-free at the staging's row stride, bytes paired across key rows with
//   byte_perm.
// - FP8 scales: a key's K scale multiplies its S column; its V scale its P column, over the
//   tile's largest (P' <= 1 in fp16), with O^T kept in units of that largest (one rescale a tile).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/paged_attention.h"
#include "kernels/attention/sm80/flash_common_sm80.cuh"
#include "kernels/common/device_utils.cuh"
#include "kernels/common/mma_sm80.cuh"

namespace gannet::kernels::sm80 {

template <int kHeadDim_, int kWarps_, int kStages_, int kMinBlocks_>
struct KeyMajorDecodeTraits {
  static constexpr int kMinBlocks = kMinBlocks_;  // __launch_bounds__'s CTAs per SM
  static constexpr int kMinArch = 800;
  static constexpr bool kFp8 = true;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = 8;  // query rows: the MMA's N
  static constexpr int kWarps = kWarps_;
  static constexpr int kBlockN = 16 * kWarps;  // 16 keys a warp
  static constexpr int kStages = kStages_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kBlocks = kHeadDim / 32;  // 32-dim blocks of S's reduction
  static constexpr int kMT = kHeadDim / 16;      // O^T m-tiles
  using Fp8 = Fp8Staging<kHeadDim, kBlockN, kStages>;
  static constexpr int kKvBytes = Fp8::kBytes;
  // After the loop: each warp's O^T rows [kWarps][8][kHeadDim] f32 in the staging memory.
  static constexpr int kMergeBytes = kWarps * kBlockM * kHeadDim * 4;
  static constexpr int kStatBytes = 2 * kWarps * kBlockM * 4;  // per-warp max and sum of each row
  static constexpr int kSmemBytes = kKvBytes + kStatBytes + kBlockM * 4;
  static_assert(kHeadDim == 256, "lane g's two 16-byte chunks of a V row cover 256 dims");
  static_assert(kMergeBytes <= kKvBytes, "the merge reuses the staging memory");
};

// Output dim of slot j (0 .. 31) of lane g's O^T: the two 16-byte chunks at 16 g and 128 + 16 g.
// m-tile mt holds slots 2 mt (its A row g) and 2 mt + 1 (row g + 8).
__device__ __forceinline__ int KDimOfSlot(int g, int j) { return (j < 16 ? 16 * g : 128 + 16 * g) + (j & 15); }

// Transposes an 8x8 b16 matrix across the warp: lane (g, t) gives [g][2t, 2t + 1] and gets
// [2t][g], [2t + 1][g].
__device__ __forceinline__ uint32_t MovMatrixTrans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

template <typename Tr>
__device__ __forceinline__ void FlashDecodeKeyMajorCta(const PagedAttentionParams& p, int num_splits,
                                                       void* workspace) {
  constexpr int kHeadDim = Tr::kHeadDim, kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN;
  constexpr int kStages = Tr::kStages, kWarps = Tr::kWarps, kMT = Tr::kMT;
  constexpr float kLog2e = 1.4426950408889634f;
  using Fp8 = typename Tr::Fp8;

  extern __shared__ __align__(128) unsigned char smem[];
  uint8_t* staging = smem;
  float* sMax = reinterpret_cast<float*>(smem + Tr::kKvBytes);  // [kWarps][8]
  float* sSum = sMax + kWarps * kBlockM;                         // [kWarps][8]
  int* sPos = reinterpret_cast<int*>(sSum + kWarps * kBlockM);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int kvh = blockIdx.y, split = blockIdx.z;
  const int group = p.num_q_heads / p.num_kv_heads;
  TileRange t;
  if (!FindTileRange(p, group, kBlockM, blockIdx.x, &t)) return;
  const SplitWork work = PlanFlashTile<kBlockM, kBlockN, Tr::kThreads>(p, t, group, split, num_splits, sPos);
  const int n_tiles = work.n_tiles;
  const auto load_tile = MakeKvLoader<Tr>(p, work, t, kvh, nullptr, nullptr, staging);
  PrimeKvStages<kStages>(load_tile, n_tiles);

  // Q^T's B fragments, straight from global memory: block b of row g, dims 32 b + 8 t .. + 7,
  // as fp16 pairs in PermuteQForFp8's order (steps 2b and 2b + 1, halves h = 0, 1).
  uint32_t bq[Tr::kBlocks][4];
#pragma unroll
  for (int b = 0; b < Tr::kBlocks; ++b) {
    bool ok;
    const bf16* src = QChunkSource(p, t, group, kvh, kHeadDim, g, 4 * b + tq, &ok);
    uint4 raw = make_uint4(0, 0, 0, 0);
    if (ok) raw = *reinterpret_cast<const uint4*>(src);
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]));
      bq[b][i] = PackF16x2(f.x, f.y);
    }
  }
  __syncthreads();  // sPos
  const int pos[2] = {sPos[2 * tq], sPos[2 * tq + 1]};

  float acc[kMT][4];  // O^T: [mt][slot 2mt row 2t, slot 2mt row 2t+1, slot 2mt+1 row 2t, ... row 2t+1]
#pragma unroll
  for (int i = 0; i < kMT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};  // rows 2t and 2t + 1, log2 domain
  float l_part[2] = {0.f, 0.f};             // this lane's keys' share of each row's sum
  float unit = 1.f;                         // acc holds O^T / unit
  const float scale2 = p.scale * kLog2e;
  const int kb = warp * 16;  // this warp's keys within a tile

  for (int it = 0; it < n_tiles; ++it) {
    CpAsyncWait<KvWaitDepth(kStages)>();
    __syncthreads();  // tile `it` landed; stage (it - 1) % kStages is free again
    AdvanceKvPipeline<kStages>(load_tile, it, n_tiles);
    const auto f8 = Fp8::At(staging, it % kStages);
    const int key0 = t.lo + (work.t_begin + it) * kBlockN + kb;

    // ---- S^T (keys g, g + 8 x rows 2t, 2t + 1), two accumulator chains ----
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    const uint8_t* k_lo = f8.k + (kb + g) * Fp8::kKRowBytes + 8 * tq;
    const uint8_t* k_hi = k_lo + 8 * Fp8::kKRowBytes;
#pragma unroll
    for (int b = 0; b < Tr::kBlocks; ++b) {
      const uint2 lo = *reinterpret_cast<const uint2*>(k_lo + 32 * b);
      const uint2 hi = *reinterpret_cast<const uint2*>(k_hi + 32 * b);
      const uint32_t a0[4] = {Fp8x2ToF16x2(lo.x & 0xFFFFu), Fp8x2ToF16x2(hi.x & 0xFFFFu),
                              Fp8x2ToF16x2(lo.x >> 16), Fp8x2ToF16x2(hi.x >> 16)};
      const uint32_t a1[4] = {Fp8x2ToF16x2(lo.y & 0xFFFFu), Fp8x2ToF16x2(hi.y & 0xFFFFu),
                              Fp8x2ToF16x2(lo.y >> 16), Fp8x2ToF16x2(hi.y >> 16)};
      MmaF16(s[b & 1], a0, bq[b]);
      MmaF16(s[b & 1], a1, bq[b] + 2);
    }
    // ---- K scales, mask, online softmax per row over the warp's 16 keys ----
    const float ksc[2] = {f8.k_scale[kb + g], f8.k_scale[kb + g + 8]};
    const float vsc[2] = {f8.v_scale[kb + g], f8.v_scale[kb + g + 8]};
    float sv[4];
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // j: key g + 8 (j >> 1), row 2t + (j & 1)
      const int key = key0 + g + 8 * (j >> 1), ps = pos[j & 1];
      const bool ok = key <= ps && (p.window <= 0 || key > ps - p.window);
      sv[j] = ok ? (s[0][j] + s[1][j]) * ksc[j >> 1] * scale2 : -INFINITY;
      mx[j & 1] = fmaxf(mx[j & 1], sv[j]);
    }
    float v_max = fmaxf(vsc[0], vsc[1]);
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) {
      mx[0] = fmaxf(mx[0], __shfl_xor_sync(0xffffffffu, mx[0], off));
      mx[1] = fmaxf(mx[1], __shfl_xor_sync(0xffffffffu, mx[1], off));
      v_max = fmaxf(v_max, __shfl_xor_sync(0xffffffffu, v_max, off));
    }
    v_max = v_max > 0.f ? v_max : 1.f;
    float alpha[2], m_use[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float m_new = fmaxf(m_run[e], mx[e]);
      m_use[e] = m_new == -INFINITY ? 0.f : m_new;  // nothing visible yet: keep exp2 finite
      alpha[e] = exp2f(m_run[e] - m_use[e]);
      m_run[e] = m_new;
    }
    float pr[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) pr[j] = exp2f(sv[j] - m_use[j & 1]);
    l_part[0] = l_part[0] * alpha[0] + pr[0] + pr[2];
    l_part[1] = l_part[1] * alpha[1] + pr[1] + pr[3];
    const float w0 = vsc[0] / v_max, w1 = vsc[1] / v_max;
    uint32_t bp[2] = {MovMatrixTrans(PackF16x2(pr[0] * w0, pr[1] * w0)),
                      MovMatrixTrans(PackF16x2(pr[2] * w1, pr[3] * w1))};
    // O^T to this tile's unit, then += V^T P'^T.
    const float r0 = alpha[0] * unit / v_max, r1 = alpha[1] * unit / v_max;
    unit = v_max;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      acc[mt][0] *= r0;
      acc[mt][1] *= r1;
      acc[mt][2] *= r0;
      acc[mt][3] *= r1;
    }
    const uint8_t* v0 = f8.v + (kb + 2 * tq) * Fp8::kVRowBytes + 16 * g;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      uint4 rows[4];  // keys 2t, 2t + 1, 2t + 8, 2t + 9: bytes 128 half + 16 g .. + 15
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        rows[i] = *reinterpret_cast<const uint4*>(v0 + ((i & 1) + (i >> 1) * 8) * Fp8::kVRowBytes + 128 * half);
      }
#pragma unroll
      for (int m = 0; m < 8; ++m) {
        const int word = m >> 1, byte = (m & 1) * 2;
        const uint32_t sel = byte | ((4 + byte) << 4) | ((byte + 1) << 8) | ((5 + byte) << 12);
        const uint32_t* r0w = reinterpret_cast<const uint32_t*>(&rows[0]);
        const uint32_t* r1w = reinterpret_cast<const uint32_t*>(&rows[1]);
        const uint32_t* r2w = reinterpret_cast<const uint32_t*>(&rows[2]);
        const uint32_t* r3w = reinterpret_cast<const uint32_t*>(&rows[3]);
        const uint32_t x01 = __byte_perm(r0w[word], r1w[word], sel);  // dim pair of keys 2t, 2t+1
        const uint32_t x23 = __byte_perm(r2w[word], r3w[word], sel);  // of keys 2t+8, 2t+9
        const uint32_t a[4] = {Fp8x2ToF16x2(x01 & 0xFFFFu), Fp8x2ToF16x2(x01 >> 16),
                               Fp8x2ToF16x2(x23 & 0xFFFFu), Fp8x2ToF16x2(x23 >> 16)};
        MmaF16(acc[8 * half + m], a, bp);
      }
    }
  }
  CpAsyncWait<0>();

  // ---- merge the warps: each row's max and sum, then the rescaled O^T summed in warp order ----
#pragma unroll
  for (int e = 0; e < 2; ++e) {
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) l_part[e] += __shfl_xor_sync(0xffffffffu, l_part[e], off);
  }
  if (g == 0) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      sMax[warp * kBlockM + 2 * tq + e] = m_run[e];
      sSum[warp * kBlockM + 2 * tq + e] = l_part[e];
    }
  }
  __syncthreads();  // the stats are in, and every stage is consumed
  // A row's max over the warps, and its sum rescaled to it.
  auto row_stats = [&](int r, float* m_all, float* l_all) {
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, sMax[w * kBlockM + r]);
    float l = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float mw = sMax[w * kBlockM + r];
      l += mw == -INFINITY ? 0.f : sSum[w * kBlockM + r] * exp2f(mw - m);
    }
    *m_all = m, *l_all = l;
  };
  float* sO = reinterpret_cast<float*>(staging);  // [kWarps][8][kHeadDim]
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int r = 2 * tq + e;
    float m_all, l_all;
    row_stats(r, &m_all, &l_all);
    const float f = m_run[e] == -INFINITY ? 0.f : exp2f(m_run[e] - m_all) * unit;
    float* orow = sO + (warp * kBlockM + r) * kHeadDim;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      *reinterpret_cast<float2*>(orow + KDimOfSlot(g, 2 * mt)) = make_float2(acc[mt][e] * f, acc[mt][2 + e] * f);
    }
  }
  __syncthreads();
  // Thread i: row i / (kThreads / 8), a run of kHeadDim / (kThreads / 8) dims.
  constexpr int kThreadsPerRow = Tr::kThreads / kBlockM;
  constexpr int kRun = kHeadDim / kThreadsPerRow;
  static_assert(kRun % 8 == 0, "16-byte bf16 stores");
  const int r = threadIdx.x / kThreadsPerRow, d0 = (threadIdx.x % kThreadsPerRow) * kRun;
  if (r >= t.rows_here) return;
  float m_all, l_all;
  row_stats(r, &m_all, &l_all);
  const float inv_l = l_all > 0.f ? 1.f / l_all : 0.f;
  float o[kRun];
#pragma unroll
  for (int i = 0; i < kRun; ++i) {
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v += sO[(w * kBlockM + r) * kHeadDim + d0 + i];
    o[i] = v * inv_l;
  }
  if (num_splits == 1) {
    bf16* out = OutRow(p, t, group, kvh, kHeadDim, r) + d0;
#pragma unroll
    for (int i = 0; i < kRun; i += 8) *reinterpret_cast<Bf16x8*>(out + i) = Pack8(o + i);
    return;
  }
  const int cta = blockIdx.x * gridDim.y + kvh;
  const SplitWorkspace ws = SplitViews(workspace, gridDim.x * gridDim.y, num_splits, kBlockM, kHeadDim);
  const size_t slot = (static_cast<size_t>(cta) * num_splits + split) * kBlockM + r;
  float* dst = ws.o + slot * kHeadDim + d0;
#pragma unroll
  for (int i = 0; i < kRun; i += 4) *reinterpret_cast<float4*>(dst + i) = make_float4(o[i], o[i + 1], o[i + 2], o[i + 3]);
  if (d0 == 0) ws.lse[slot] = l_all > 0.f ? m_all + log2f(l_all) : -INFINITY;
}

template <typename Tr>
__global__ void __launch_bounds__(Tr::kThreads, Tr::kMinBlocks)
    FlashDecodeKeyMajorKernel(const PagedAttentionParams p, int num_splits, void* workspace) {
  PdlEnter();
#if GANNET_MMA_ENABLED
  if constexpr (__CUDA_ARCH__ >= Tr::kMinArch) FlashDecodeKeyMajorCta<Tr>(p, num_splits, workspace);
#endif
}

template <typename Tr>
cudaError_t LaunchFlashDecodeKeyMajor(const PagedAttentionParams& p, int num_splits, void* workspace,
                                      cudaStream_t stream) {
  // FP8 K and V both stored (single-store K=V layers are head_dim 512's), at most 8 rows a tile.
  if (!p.kv_fp8 || p.k_from_v) return cudaErrorInvalidValue;
  return LaunchFlashKernel<Tr>(FlashDecodeKeyMajorKernel<Tr>, p, num_splits, workspace, stream);
}

}  // namespace gannet::kernels::sm80

// Defines FlashConfig<name>() and LaunchFlash<name>() for one key-major FP8 decode configuration.
#define GANNET_DEFINE_FLASH_DECODE_KMAJOR(name, hd, warps, st, min_blocks)                        \
  namespace gannet::kernels {                                                                  \
  using FlashTraits##name = sm80::KeyMajorDecodeTraits<hd, warps, st, min_blocks>;             \
  FlashConfig FlashConfig##name() { return sm80::MakeFlashConfig<FlashTraits##name>(); }      \
  cudaError_t LaunchFlash##name(const PagedAttentionParams& p, int num_splits, void* workspace, \
                                cudaStream_t stream) {                                         \
    return sm80::LaunchFlashDecodeKeyMajor<FlashTraits##name>(p, num_splits, workspace, stream); \
  }                                                                                            \
  }
