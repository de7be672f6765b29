// Paged split-KV decode attention over an FP8 KV cache whose warps split the KEYS of a tile as
// well as the head dim (flash_decode_sm80.cuh splits the head dim alone).
//
// Why: in the head-dim-split kernel every warp computes a partial S over its dims for all keys of
// the tile, and every warp then reads all warps' partials back from shared memory to get the full
// S: with 4 warps that is ~1 KB of shared-memory traffic per key, twice the key's 512 B of FP8 K
// and V at head_dim 256, and it kept FP8 decode at 67% of its bytes' bandwidth at 31B batch 64
// where bf16 (which moves twice the bytes per key for the same traffic) reaches 90%.
//
// Here the kWarps warps form kKeyGroups groups of kDimWarps; group g owns keys
// [g kGroupKeys, (g + 1) kGroupKeys) of every tile, and warp d of a group owns dims
// [d kDimsPerWarp, (d + 1) kDimsPerWarp) for both products, as in the head-dim-split kernel.
// A warp exchanges partial S with the kDimWarps - 1 other warps of its group only (a named
// barrier of the group, kGroupKeys keys each): 1/kKeyGroups of the keys and 1/(kWarps/kDimWarps)
// of the readers, so at hd256 with 2 x 2 warps the traffic per key falls 4x. Each group keeps its
// own running max and sum; the groups' partial O are merged once, at the end, through the idle
// staging memory. The FP8 operand layouts (permuted Q, 8-byte K loads, dim-major V) and the scale
// folding are the head-dim-split kernel's (flash_decode_sm80.cuh, flash_common_sm80.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/paged_attention.h"
#include "kernels/attention/sm80/flash_common_sm80.cuh"
#include "kernels/common/device_utils.cuh"
#include "kernels/common/mma_sm80.cuh"

namespace gannet::kernels::sm80 {

template <int kHeadDim_, int kBlockN_, int kWarps_, int kStages_, int kKeyGroups_, int kMinBlocks_ = 1>
struct KeySplitDecodeTraits {
  static constexpr int kMinBlocks = kMinBlocks_;  // __launch_bounds__'s CTAs per SM
  static constexpr int kMinArch = 800;
  static constexpr bool kFp8 = true;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = 16;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kWarps = kWarps_;
  static constexpr int kStages = kStages_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kKeyGroups = kKeyGroups_;
  static constexpr int kDimWarps = kWarps / kKeyGroups;
  static constexpr int kGroupKeys = kBlockN / kKeyGroups;
  static constexpr int kDimsPerWarp = kHeadDim / kDimWarps;
  static constexpr int kKSteps = kDimsPerWarp / 16;  // Q fragments per warp
  static constexpr int kNT = kGroupKeys / 8;         // S n-tiles (the group's keys)
  static constexpr int kDT = kDimsPerWarp / 8;       // O n-tiles of the warp's slice
  static constexpr int kStride = kHeadDim + 8;       // padded Q rows: conflict-free ldmatrix
  static constexpr int kSStride = kGroupKeys + 8;    // padded f32 rows: conflict-free float2 I/O
  static constexpr int kQBytes = kBlockM * kStride * 2;
  using Fp8 = Fp8Staging<kHeadDim, kBlockN, kStages>;
  static constexpr int kKvBytes = Fp8::kBytes;
  static constexpr int kSBytes = kDimWarps > 1 ? kWarps * kBlockM * kSStride * 4 : 0;
  static constexpr int kSmemBytes = kQBytes + kKvBytes + kSBytes + kBlockM * 4;
  // The end-of-kernel merge: every warp of groups 1.. parks its O fragment, max and sum per lane.
  static constexpr int kParkFloats = kDT * 4 + 4;
  static constexpr int kMergeBytes = (kKeyGroups - 1) * kDimWarps * kParkFloats * 32 * 4;
  static_assert(kWarps % kKeyGroups == 0 && kBlockN % kKeyGroups == 0, "whole groups");
  static_assert(kGroupKeys % 16 == 0, "P.V takes 16 keys a step");
  static_assert(kKSteps % 2 == 0 && kDT % 16 == 0, "8-byte K loads; 16-byte V loads");
  static_assert(kMergeBytes <= kKvBytes, "the merge parks in the staging memory");
};

// Barrier of the kDimWarps warps of key group g: id 1 + g (0 is __syncthreads), an immediate per
// group so that ptxas reserves kKeyGroups + 1 barriers, not all 16.
template <int kKeyGroups, int kDimWarps>
__device__ __forceinline__ void GroupBarrier(int g) {
  static_assert(kKeyGroups <= 4, "ids 1..4 below");
  if constexpr (kDimWarps > 1) {
    constexpr int kCount = kDimWarps * 32;
    if (g == 0) asm volatile("bar.sync 1, %0;" ::"n"(kCount) : "memory");
    if (kKeyGroups > 1 && g == 1) asm volatile("bar.sync 2, %0;" ::"n"(kCount) : "memory");
    if (kKeyGroups > 2 && g == 2) asm volatile("bar.sync 3, %0;" ::"n"(kCount) : "memory");
    if (kKeyGroups > 3 && g == 3) asm volatile("bar.sync 4, %0;" ::"n"(kCount) : "memory");
  }
}

template <typename Tr>
__device__ __forceinline__ void FlashDecodeKeySplitCta(const PagedAttentionParams& p, int num_splits,
                                                       void* workspace) {
  constexpr int kHeadDim = Tr::kHeadDim, kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN;
  constexpr int kStride = Tr::kStride, kStages = Tr::kStages, kSStride = Tr::kSStride;
  constexpr int kNT = Tr::kNT, kDT = Tr::kDT, kGroupKeys = Tr::kGroupKeys;
  constexpr float kLog2e = 1.4426950408889634f;
  using Fp8 = typename Tr::Fp8;

  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);
  uint8_t* staging = smem + Tr::kQBytes;
  float* sS = reinterpret_cast<float*>(smem + Tr::kQBytes + Tr::kKvBytes);  // [kWarps][16][kSStride]
  int* sPos = reinterpret_cast<int*>(smem + Tr::kQBytes + Tr::kKvBytes + Tr::kSBytes);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int kg = warp / Tr::kDimWarps, dw = warp % Tr::kDimWarps;
  const int kvh = blockIdx.y, split = blockIdx.z;
  const int group = p.num_q_heads / p.num_kv_heads;
  TileRange t;
  if (!FindTileRange(p, group, kBlockM, blockIdx.x, &t)) return;
  const SplitWork work = BeginFlashTile<kHeadDim, kBlockM, kBlockN, Tr::kThreads, kStride>(
      p, t, group, kvh, split, num_splits, sPos, sQ);
  const int n_tiles = work.n_tiles;
  const auto load_tile = MakeKvLoader<Tr>(p, work, t, kvh, nullptr, nullptr, staging);
  PrimeKvStages<kStages>(load_tile, n_tiles);

  const int d0 = dw * Tr::kDimsPerWarp;
  const int g0 = kg * kGroupKeys;  // this group's first key row within a tile
  uint32_t aq[Tr::kKSteps][4];
  CpAsyncWait<KvWaitDepth(kStages)>();
  __syncthreads();
  PermuteQForFp8<kHeadDim, kBlockM, Tr::kThreads, kStride>(sQ);  // fp16, K's dim order
  __syncthreads();
#pragma unroll
  for (int ks = 0; ks < Tr::kKSteps; ++ks) {
    LdMatrixX4(aq[ks][0], aq[ks][1], aq[ks][2], aq[ks][3],
               sQ + (lane & 15) * kStride + d0 + ks * 16 + (lane >> 4) * 8);
  }

  float acc_o[kDT][4];
#pragma unroll
  for (int i = 0; i < kDT; ++i) acc_o[i][0] = acc_o[i][1] = acc_o[i][2] = acc_o[i][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};  // rows lane/4 and lane/4 + 8, log2 domain
  float l_run[2] = {0.f, 0.f};
  const float scale2 = p.scale * kLog2e;
  const int r_lo = lane >> 2;
  const int pos0 = sPos[r_lo], pos1 = sPos[r_lo + 8];
  constexpr int kHalf = kHeadDim / 2;

  for (int it = 0; it < n_tiles; ++it) {
    CpAsyncWait<KvWaitDepth(kStages)>();
    __syncthreads();  // tile `it` landed; stage (it - 1) % kStages and sS are free again
    AdvanceKvPipeline<kStages>(load_tile, it, n_tiles);
    const auto f8 = Fp8::At(staging, it % kStages);
    const int key0 = t.lo + (work.t_begin + it) * kBlockN + g0;  // this group's first key

    // ---- partial S over this warp's dims, the group's keys ----
    float s[kNT][4];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < Tr::kKSteps; ks += 2) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        uint32_t b[4];
        Fp8KBlock<Fp8, false>(p, f8, g0 + nt * 8 + (lane >> 2), d0 + ks * 16, kHalf, b);
        MmaF16(s[nt], aq[ks], b);
        MmaF16(s[nt], aq[ks + 1], b + 2);
      }
    }
    if constexpr (Tr::kDimWarps > 1) {
      float* my_s = sS + warp * kBlockM * kSStride;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const int col = nt * 8 + (lane & 3) * 2;
        *reinterpret_cast<float2*>(my_s + r_lo * kSStride + col) = make_float2(s[nt][0], s[nt][1]);
        *reinterpret_cast<float2*>(my_s + (r_lo + 8) * kSStride + col) = make_float2(s[nt][2], s[nt][3]);
      }
      GroupBarrier<Tr::kKeyGroups, Tr::kDimWarps>(kg);
      // The group's full S, summed in warp order (this warp's own term from registers, the
      // same value), so every warp of the group gets the same bits and the same P.
      const float* grp_s = sS + kg * Tr::kDimWarps * kBlockM * kSStride;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const int col = nt * 8 + (lane & 3) * 2;
        float2 lo = make_float2(0.f, 0.f), hi = make_float2(0.f, 0.f);
#pragma unroll
        for (int w = 0; w < Tr::kDimWarps; ++w) {
          float2 a, b;
          if (w == dw) {
            a = make_float2(s[nt][0], s[nt][1]), b = make_float2(s[nt][2], s[nt][3]);
          } else {
            a = *reinterpret_cast<const float2*>(grp_s + (w * kBlockM + r_lo) * kSStride + col);
            b = *reinterpret_cast<const float2*>(grp_s + (w * kBlockM + r_lo + 8) * kSStride + col);
          }
          lo.x += a.x, lo.y += a.y, hi.x += b.x, hi.y += b.y;
        }
        s[nt][0] = lo.x, s[nt][1] = lo.y, s[nt][2] = hi.x, s[nt][3] = hi.y;
      }
    }

    // ---- K scales, mask, online softmax of the group's keys, P in registers ----
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const int col = nt * 8 + (lane & 3) * 2;
      const float2 ks2 = *reinterpret_cast<const float2*>(f8.k_scale + g0 + col);
      s[nt][0] *= ks2.x, s[nt][1] *= ks2.y, s[nt][2] *= ks2.x, s[nt][3] *= ks2.y;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int key = key0 + col + (j & 1);
        const int pos = j < 2 ? pos0 : pos1;
        const bool ok = key <= pos && (p.window <= 0 || key > pos - p.window);
        s[nt][j] = ok ? s[nt][j] * scale2 : -INFINITY;
        mx[j >> 1] = fmaxf(mx[j >> 1], s[nt][j]);
      }
    }
    float alpha[2], m_use[2], sum[2] = {0.f, 0.f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      const float m_new = fmaxf(m_run[h], mx[h]);
      m_use[h] = m_new == -INFINITY ? 0.f : m_new;  // nothing visible yet: keep exp2 finite
      alpha[h] = exp2f(m_run[h] - m_use[h]);
      m_run[h] = m_new;
    }
    // P's columns carry their keys' V scales over the group's largest (so P' <= 1 in fp16).
    float v_max = 0.f;
    float2 vsc[kNT];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      vsc[nt] = *reinterpret_cast<const float2*>(f8.v_scale + g0 + nt * 8 + (lane & 3) * 2);
      v_max = fmaxf(v_max, fmaxf(vsc[nt].x, vsc[nt].y));
    }
    v_max = fmaxf(v_max, __shfl_xor_sync(0xffffffffu, v_max, 1));
    v_max = fmaxf(v_max, __shfl_xor_sync(0xffffffffu, v_max, 2));
    v_max = v_max > 0.f ? v_max : 1.f;
    uint32_t pa[kNT / 2][4];  // P as the A operand of P.V, one 16-key step per entry
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const float p0 = exp2f(s[nt][0] - m_use[0]), p1 = exp2f(s[nt][1] - m_use[0]);
      const float p2 = exp2f(s[nt][2] - m_use[1]), p3 = exp2f(s[nt][3] - m_use[1]);
      sum[0] += p0 + p1;
      sum[1] += p2 + p3;
      const float w0 = vsc[nt].x / v_max, w1 = vsc[nt].y / v_max;
      pa[nt / 2][(nt & 1) * 2] = PackF16x2(p0 * w0, p1 * w1);
      pa[nt / 2][(nt & 1) * 2 + 1] = PackF16x2(p2 * w0, p3 * w1);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
      l_run[h] = l_run[h] * alpha[h] + sum[h];
    }
    // The accumulator in units of v_max while this tile's P'.V adds in.
    const float a0 = alpha[0] / v_max, a1 = alpha[1] / v_max;
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt) {
      acc_o[dt][0] *= a0;
      acc_o[dt][1] *= a0;
      acc_o[dt][2] *= a1;
      acc_o[dt][3] *= a1;
    }
    // ---- O[:, slice] += P V[group's keys, slice] ----
#pragma unroll
    for (int kk = 0; kk < kNT / 2; ++kk) {
      uint32_t rows[4][kDT / 4];
      LoadFp8VRows<kDT>(f8.v + (g0 + kk * 16 + (lane & 3) * 2) * Fp8::kVRowBytes + d0 + (lane >> 2) * kDT,
                        Fp8::kVRowBytes, rows);
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt) {
        uint32_t b[2];
        Fp8VFragment(rows, dt, b);
        MmaF16(acc_o[dt], pa[kk], b);
      }
    }
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) acc_o[dt][j] *= v_max;
    }
  }
  CpAsyncWait<0>();
  __syncthreads();  // every stage consumed: the staging memory takes the groups' partial O

  // ---- merge the key groups: groups 1.. park (O, max, sum) per lane, group 0 folds them in ----
  float* park = reinterpret_cast<float*>(staging);  // [kKeyGroups - 1][kDimWarps][kParkFloats][32]
  constexpr int kPark = Tr::kParkFloats;
  if (kg > 0) {
    float* dst = park + ((kg - 1) * Tr::kDimWarps + dw) * kPark * 32 + lane;
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) dst[(dt * 4 + j) * 32] = acc_o[dt][j];
    }
    dst[(kDT * 4) * 32] = m_run[0];
    dst[(kDT * 4 + 1) * 32] = m_run[1];
    dst[(kDT * 4 + 2) * 32] = l_run[0];
    dst[(kDT * 4 + 3) * 32] = l_run[1];
  }
  __syncthreads();
  if (kg > 0) return;  // no barrier below
#pragma unroll
  for (int g = 1; g < Tr::kKeyGroups; ++g) {
    const float* src = park + ((g - 1) * Tr::kDimWarps + dw) * kPark * 32 + lane;
    float w_own[2], w_other[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float m_o = src[(kDT * 4 + h) * 32], l_o = src[(kDT * 4 + 2 + h) * 32];
      const float m_new = fmaxf(m_run[h], m_o);
      // A group that saw no key of the row has max -inf and sum 0: weight 0, never exp2(nan).
      w_own[h] = m_run[h] == -INFINITY ? 0.f : exp2f(m_run[h] - m_new);
      w_other[h] = m_o == -INFINITY ? 0.f : exp2f(m_o - m_new);
      l_run[h] = l_run[h] * w_own[h] + l_o * w_other[h];
      m_run[h] = m_new;
    }
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        acc_o[dt][j] = acc_o[dt][j] * w_own[j >> 1] + src[(dt * 4 + j) * 32] * w_other[j >> 1];
      }
    }
  }
  StoreFlashResult<kHeadDim, kBlockM, kDT, true>(p, t, group, kvh, split, num_splits, workspace, acc_o,
                                                 m_run, l_run, r_lo, d0, dw == 0);
}

template <typename Tr>
__global__ void __launch_bounds__(Tr::kThreads, Tr::kMinBlocks)
    FlashDecodeKeySplitKernel(const PagedAttentionParams p, int num_splits, void* workspace) {
  PdlEnter();
#if GANNET_MMA_ENABLED
  if constexpr (__CUDA_ARCH__ >= Tr::kMinArch) FlashDecodeKeySplitCta<Tr>(p, num_splits, workspace);
#endif
}

template <typename Tr>
cudaError_t LaunchFlashDecodeKeySplit(const PagedAttentionParams& p, int num_splits, void* workspace,
                                      cudaStream_t stream) {
  // FP8 K and V both stored: no single-store K=V (its layers are head_dim 512's).
  if (!p.kv_fp8 || p.k_from_v) return cudaErrorInvalidValue;
  return LaunchFlashKernel<Tr>(FlashDecodeKeySplitKernel<Tr>, p, num_splits, workspace, stream);
}

}  // namespace gannet::kernels::sm80

// Defines FlashConfig<name>() and LaunchFlash<name>() for one key-split FP8 decode configuration.
#define GANNET_DEFINE_FLASH_DECODE_KEYS(name, hd, bn, warps, st, groups, min_blocks)              \
  namespace gannet::kernels {                                                                  \
  using FlashTraits##name = sm80::KeySplitDecodeTraits<hd, bn, warps, st, groups, min_blocks>; \
  FlashConfig FlashConfig##name() { return sm80::MakeFlashConfig<FlashTraits##name>(); }      \
  cudaError_t LaunchFlash##name(const PagedAttentionParams& p, int num_splits, void* workspace, \
                                cudaStream_t stream) {                                         \
    return sm80::LaunchFlashDecodeKeySplit<FlashTraits##name>(p, num_splits, workspace, stream); \
  }                                                                                            \
  }
