// Paged flash attention for prefill / extend / mixed steps on sm_80-class tensor cores (mma.sync
// m16n8k16 bf16, ldmatrix, cp.async); the same code runs on sm_86/89/90/100.
//
// - A CTA owns (query tile, kv head, KV split). Its kBlockM rows are (token, head) pairs of ONE
//   sequence and ONE GQA group (GQA packing): every K/V byte a CTA loads serves all the group's
//   query heads.
// - K/V tiles of kBlockN keys stream through a kStages-deep cp.async pipeline, gathered row by
//   row through the page table (flash_common_sm80.cuh).
// - Warp (wm, wn) computes S for rows [16 wm, 16 wm + 16) and keys [wn * kBlockN / kWarpsN, ...)
//   (the keys are split across warps), the row max / sum are exchanged through shared memory,
//   P goes to shared memory as bf16, and the same warp then accumulates O for the rows' head-dim
//   slice [wn * kHeadDim / kWarpsN, ...) (the head dim is split across warps): hd512 needs 128
//   accumulator registers per thread, not 256.
// - With num_splits > 1 each split writes a partial and FlashCombineKernel merges them. The grid
//   depends only on (num_tokens, num_seqs, kv heads, num_splits); ranges come from device metadata.
// - FP8 KV (kFp8): as in the decode kernel, the MMAs read the FP8 stages in place in fp16 with
//   permuted reduction and output dims; Q is permuted (and made fp16) in shared memory once, so
//   its ldmatrix fragments match K's 8-byte loads; P is stored as fp16 with the keys' V scales
//   folded in (over the tile's largest, so P' <= 1), and the K scales multiply S's columns.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/paged_attention.h"
#include "kernels/attention/sm80/flash_common_sm80.cuh"
#include "kernels/common/device_utils.cuh"
#include "kernels/common/mma_sm80.cuh"

namespace gannet::kernels::sm80 {

// kMinArch_: the oldest arch the instantiation is built for (mma_sm80.cuh): 800 for the sm80
// entries, 750 for the sm75 ones (which fit Turing's 64 KB of shared memory).
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kWarpsM_, int kWarpsN_, int kStages_,
          bool kFp8_ = false, int kMinArch_ = 800>
struct PrefillTraits {
  static constexpr int kMinArch = kMinArch_;
  static constexpr bool kFp8 = kFp8_;  // FP8 KV cache (Fp8KvTileLoader)
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kWarpsM = kWarpsM_;
  static constexpr int kWarpsN = kWarpsN_;
  static constexpr int kStages = kStages_;
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kKeysPerWarp = kBlockN / kWarpsN;
  static constexpr int kNT = kKeysPerWarp / 8;  // S n-tiles per warp
  static constexpr int kDimsPerWarp = kHeadDim / kWarpsN;
  static constexpr int kDT = kDimsPerWarp / 8;  // O n-tiles per warp
  // Rows padded by 16 B so ldmatrix's eight row addresses fall in distinct bank groups.
  static constexpr int kStride = kHeadDim + 8;
  static constexpr int kPStride = kBlockN + 8;
  static constexpr int kQBytes = kBlockM * kStride * 2;
  using Fp8 = Fp8Staging<kHeadDim, kBlockN, kStages>;
  // bf16: kStages K and V tiles; FP8: the staging stages alone (read in place).
  static constexpr int kKvBytes = kFp8 ? Fp8::kBytes : 2 * kStages * kBlockN * kStride * 2;
  static constexpr int kPBytes = kBlockM * kPStride * 2;
  static constexpr int kRedBytes = 2 * kWarpsN * kBlockM * 4;
  static constexpr int kSmemBytes = kQBytes + kKvBytes + kPBytes + kRedBytes + kBlockM * 4;
  static_assert(kBlockM == 16 * kWarpsM, "each warp owns 16 query rows");
  static_assert(kNT >= 1 && kKeysPerWarp % 8 == 0, "each warp needs whole 8-key n-tiles");
  static_assert(kDT % 2 == 0, "P.V loads two 8-dim n-tiles per ldmatrix.x4.trans");
  static_assert(kHeadDim % 32 == 0 && kBlockN % 16 == 0 && kStages >= 1, "tile shape");
  static_assert(kMinArch >= 800 || kSmemBytes <= kSm75SmemBytes, "sm_75 allows 64 KB a block");
};

// One CTA's work (the kernel below).
template <typename Tr, bool kKFromV>
__device__ __forceinline__ void FlashPrefillCta(const PagedAttentionParams& p, int num_splits,
                                                void* workspace) {
  constexpr int kHeadDim = Tr::kHeadDim, kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN;
  constexpr int kStride = Tr::kStride, kPStride = Tr::kPStride, kStages = Tr::kStages;
  constexpr float kLog2e = 1.4426950408889634f;

  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);
  bf16* sK = reinterpret_cast<bf16*>(smem + Tr::kQBytes);  // bf16 only
  bf16* sV = sK + kStages * kBlockN * kStride;
  uint8_t* staging = smem + Tr::kQBytes;  // FP8 only
  bf16* sP = reinterpret_cast<bf16*>(smem + Tr::kQBytes + Tr::kKvBytes);
  float* sMax = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(sP) + Tr::kPBytes);
  float* sSum = sMax + Tr::kWarpsN * kBlockM;
  int* sPos = reinterpret_cast<int*>(sSum + Tr::kWarpsN * kBlockM);

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int wm = warp / Tr::kWarpsN;
  const int wn = warp % Tr::kWarpsN;
  const int kvh = blockIdx.y;
  const int split = blockIdx.z;
  const int group = p.num_q_heads / p.num_kv_heads;

  TileRange t;
  if (!FindTileRange(p, group, kBlockM, blockIdx.x, &t)) return;
  const SplitWork work = BeginFlashTile<kHeadDim, kBlockM, kBlockN, Tr::kThreads, kStride>(
      p, t, group, kvh, split, num_splits, sPos, sQ);
  const int n_tiles = work.n_tiles;
  const auto load_tile = MakeKvLoader<Tr>(p, work, t, kvh, sK, sV, staging);
  PrimeKvStages<kStages>(load_tile, n_tiles);
  using Fp8 = typename Tr::Fp8;

  float acc_o[Tr::kDT][4];
#pragma unroll
  for (int i = 0; i < Tr::kDT; ++i) acc_o[i][0] = acc_o[i][1] = acc_o[i][2] = acc_o[i][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};  // rows lane/4 and lane/4 + 8, log2 domain
  float l_run[2] = {0.f, 0.f};
  const float scale2 = p.scale * kLog2e;
  const int r_lo = wm * 16 + (lane >> 2);
  KFromVPair<kHeadDim, Tr::kThreads> kfv;
  if constexpr (kKFromV) kfv = KFromVPair<kHeadDim, Tr::kThreads>(p);
  constexpr int kHalf = kHeadDim / 2;
  // Image-block mask: the token and block id of this thread's two rows (-1: text or padding); a
  // key after a row's position is visible when it is a later token of the row's block.
  const int32_t* const image_block = p.image_block;
  int row_tok[2] = {0, 0}, row_blk[2] = {-1, -1};
  const int chunk_end = image_block != nullptr ? p.query_start[t.seq + 1] : 0;
  if (image_block != nullptr) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r_lo + 8 * h;
      row_tok[h] = t.q0 + (t.row0 + r) / group;
      row_blk[h] = r < t.rows_here ? image_block[row_tok[h]] : -1;
    }
  }

  for (int it = 0; it < n_tiles; ++it) {
    CpAsyncWait<KvWaitDepth(kStages)>();
    __syncthreads();           // tile `it` visible to all; stage (it - 1) % kStages free again
    if (kKFromV && it == 0) {  // Q carries k_norm off the rotated dims (flash_common_sm80.cuh)
      WeightQForKFromV<kHeadDim, kBlockM, Tr::kThreads, kStride>(sQ, p);
      __syncthreads();
    }
    if constexpr (Tr::kFp8) {
      if (it == 0) {  // Q has landed: make it fp16 in K's permuted dim order, once
        PermuteQForFp8<kHeadDim, kBlockM, Tr::kThreads, kStride>(sQ);
        __syncthreads();
      }
    }
    AdvanceKvPipeline<kStages>(load_tile, it, n_tiles);
    bf16* cK = sK + (it % kStages) * kBlockN * kStride;  // k_from_v: its rotated dims derived here
    const bf16* cV = sV + (it % kStages) * kBlockN * kStride;
    const auto f8 = Fp8::At(staging, it % kStages);  // FP8 only: this stage's rows and scales
    const int key0 = t.lo + (work.t_begin + it) * kBlockN;
    if constexpr (kKFromV) DeriveTileRotatedK<Tr>(kfv, p, f8, cV, cK, key0);  // its rotated K dims

    // ---- S = Q K^T for this warp's 16 rows x kKeysPerWarp keys ----
    float acc_s[Tr::kNT][4];
#pragma unroll
    for (int i = 0; i < Tr::kNT; ++i) acc_s[i][0] = acc_s[i][1] = acc_s[i][2] = acc_s[i][3] = 0.f;
#pragma unroll 4
    for (int kk = 0; kk < kHeadDim / 16; kk += 2) {
      uint32_t a0[4], a1[4];
      const bf16* qa = sQ + (wm * 16 + (lane & 15)) * kStride + kk * 16 + (lane >> 4) * 8;
      LdMatrixX4(a0[0], a0[1], a0[2], a0[3], qa);
      LdMatrixX4(a1[0], a1[1], a1[2], a1[3], qa + 16);
#pragma unroll
      for (int nt = 0; nt < Tr::kNT; ++nt) {
        uint32_t b[4];
        if constexpr (Tr::kFp8) {
          Fp8KBlock<Fp8, kKFromV>(p, f8, wn * Tr::kKeysPerWarp + nt * 8 + (lane >> 2), kk * 16,
                                  kHalf, b);
          MmaF16(acc_s[nt], a0, b);
          MmaF16(acc_s[nt], a1, b + 2);
        } else {
          // Single-store K=V: off the rotated dims, K's operand is V's (Q carries k_norm).
          const bf16* kt = kKFromV && !KFromVRotated(kk * 16, kHalf, p.rope_pairs) ? cV : cK;
          const bf16* kb = kt + (wn * Tr::kKeysPerWarp + nt * 8 + (lane & 7)) * kStride + kk * 16 +
                           (lane >> 3) * 8;
          LdMatrixX4(b[0], b[1], b[2], b[3], kb);
          MmaBf16(acc_s[nt], a0, b);
          MmaBf16(acc_s[nt], a1, b + 2);
        }
      }
    }

    // ---- mask, scale, row max across the key-split warps ----
    const int pos0 = sPos[r_lo], pos1 = sPos[r_lo + 8];
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < Tr::kNT; ++nt) {
      if constexpr (Tr::kFp8) {  // each key's K scale (V's, when K is derived from V)
        const float2 ks2 = *reinterpret_cast<const float2*>(
            (kKFromV ? f8.v_scale : f8.k_scale) + wn * Tr::kKeysPerWarp + nt * 8 + (lane & 3) * 2);
        acc_s[nt][0] *= ks2.x, acc_s[nt][1] *= ks2.y, acc_s[nt][2] *= ks2.x, acc_s[nt][3] *= ks2.y;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int key = key0 + wn * Tr::kKeysPerWarp + nt * 8 + (lane & 3) * 2 + (j & 1);
        const int pos = j < 2 ? pos0 : pos1;
        bool ok = key <= pos && (p.window <= 0 || key > pos - p.window);
        if (image_block != nullptr && !ok && key > pos && pos >= 0) {
          const int h = j >> 1, u = row_tok[h] + (key - pos);  // positions run with tokens
          ok = row_blk[h] >= 0 && u < chunk_end && image_block[u] == row_blk[h];
        }
        acc_s[nt][j] = ok ? acc_s[nt][j] * scale2 : -INFINITY;
        mx[j >> 1] = fmaxf(mx[j >> 1], acc_s[nt][j]);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    }
    if ((lane & 3) == 0) {
      sMax[wn * kBlockM + r_lo] = mx[0];
      sMax[wn * kBlockM + r_lo + 8] = mx[1];
    }
    __syncthreads();
    float alpha[2], m_use[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int w = 0; w < Tr::kWarpsN; ++w)
        tile_max = fmaxf(tile_max, sMax[w * kBlockM + r_lo + 8 * h]);
      const float m_new = fmaxf(m_run[h], tile_max);
      m_use[h] = m_new == -INFINITY ? 0.f : m_new;  // fully masked so far: keep exp2 finite
      alpha[h] = exp2f(m_run[h] - m_use[h]);
      m_run[h] = m_new;
    }

    // ---- P = exp2(S - m) to shared memory (bf16; FP8: fp16 with V scales), partial row sums ----
    float v_max = 1.f;  // FP8: the tile's largest V scale
    if constexpr (Tr::kFp8) {
      v_max = 0.f;
#pragma unroll
      for (int k = 0; k < kBlockN; k += 4) {
        const float4 v = *reinterpret_cast<const float4*>(f8.v_scale + k);
        v_max = fmaxf(v_max, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
      }
      v_max = v_max > 0.f ? v_max : 1.f;
    }
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int nt = 0; nt < Tr::kNT; ++nt) {
      const float p0 = exp2f(acc_s[nt][0] - m_use[0]);
      const float p1 = exp2f(acc_s[nt][1] - m_use[0]);
      const float p2 = exp2f(acc_s[nt][2] - m_use[1]);
      const float p3 = exp2f(acc_s[nt][3] - m_use[1]);
      sum[0] += p0 + p1;
      sum[1] += p2 + p3;
      const int col = wn * Tr::kKeysPerWarp + nt * 8 + (lane & 3) * 2;
      if constexpr (Tr::kFp8) {
        const float2 vs = *reinterpret_cast<const float2*>(f8.v_scale + col);
        const float w0 = vs.x / v_max, w1 = vs.y / v_max;
        *reinterpret_cast<uint32_t*>(sP + r_lo * kPStride + col) = PackF16x2(p0 * w0, p1 * w1);
        *reinterpret_cast<uint32_t*>(sP + (r_lo + 8) * kPStride + col) =
            PackF16x2(p2 * w0, p3 * w1);
      } else {
        *reinterpret_cast<uint32_t*>(sP + r_lo * kPStride + col) = PackBf16x2(p0, p1);
        *reinterpret_cast<uint32_t*>(sP + (r_lo + 8) * kPStride + col) = PackBf16x2(p2, p3);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
    }
    if ((lane & 3) == 0) {
      sSum[wn * kBlockM + r_lo] = sum[0];
      sSum[wn * kBlockM + r_lo + 8] = sum[1];
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float s = 0.f;
#pragma unroll
      for (int w = 0; w < Tr::kWarpsN; ++w) s += sSum[w * kBlockM + r_lo + 8 * h];
      l_run[h] = l_run[h] * alpha[h] + s;
    }
    // FP8: the accumulator in units of the tile's v_max while this tile's P'.V adds in.
    const float a0 = alpha[0] / v_max, a1 = alpha[1] / v_max;
#pragma unroll
    for (int dt = 0; dt < Tr::kDT; ++dt) {
      acc_o[dt][0] *= a0;
      acc_o[dt][1] *= a0;
      acc_o[dt][2] *= a1;
      acc_o[dt][3] *= a1;
    }

    // ---- O[:, slice] += P V[:, slice] ----
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      uint32_t a[4];
      LdMatrixX4(a[0], a[1], a[2], a[3],
                 sP + (wm * 16 + (lane & 15)) * kPStride + kk * 16 + (lane >> 4) * 8);
      if constexpr (Tr::kFp8) {
        uint32_t rows[4][Tr::kDT / 4];
        LoadFp8VRows<Tr::kDT>(f8.v + (kk * 16 + (lane & 3) * 2) * Fp8::kVRowBytes +
                                  wn * Tr::kDimsPerWarp + (lane >> 2) * Tr::kDT,
                              Fp8::kVRowBytes, rows);
#pragma unroll
        for (int dt = 0; dt < Tr::kDT; ++dt) {
          uint32_t b[2];
          Fp8VFragment(rows, dt, b);
          MmaF16(acc_o[dt], a, b);
        }
      } else {
#pragma unroll
        for (int dt = 0; dt < Tr::kDT; dt += 2) {
          uint32_t b[4];
          const bf16* vb = cV + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kStride +
                           wn * Tr::kDimsPerWarp + dt * 8 + (lane >> 4) * 8;
          LdMatrixX4Trans(b[0], b[1], b[2], b[3], vb);
          MmaBf16(acc_o[dt], a, b);
          MmaBf16(acc_o[dt + 1], a, b + 2);
        }
      }
    }
    if constexpr (Tr::kFp8) {
#pragma unroll
      for (int dt = 0; dt < Tr::kDT; ++dt) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc_o[dt][j] *= v_max;
      }
    }
  }
  CpAsyncWait<0>();

  StoreFlashResult<kHeadDim, kBlockM, Tr::kDT, Tr::kFp8>(p, t, group, kvh, split, num_splits,
                                                         workspace, acc_o, m_run, l_run, r_lo,
                                                         wn * Tr::kDimsPerWarp, wn == 0);
}

// kKFromV: single-store K=V (PagedAttentionParams::k_from_v), a separate instantiation so the
// plain kernel carries none of its code or registers. Empty below the traits' kMinArch.
template <typename Tr, bool kKFromV>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    FlashPrefillSm80Kernel(const PagedAttentionParams p, int num_splits, void* workspace) {
  PdlEnter();
#if GANNET_MMA_ENABLED
  if constexpr (__CUDA_ARCH__ >= Tr::kMinArch)
    FlashPrefillCta<Tr, kKFromV>(p, num_splits, workspace);
#endif
}

template <typename Tr>
cudaError_t LaunchFlashPrefill(const PagedAttentionParams& p, int num_splits, void* workspace,
                               cudaStream_t stream) {
  if (p.k_from_v) {
    // Instantiated for head_dim 512 alone: Gemma-4's K=V layers (FlashSupportsKFromV).
    if constexpr (Tr::kHeadDim == 512) {
      return LaunchFlashKernel<Tr>(FlashPrefillSm80Kernel<Tr, true>, p, num_splits, workspace,
                                   stream);
    }
    return cudaErrorInvalidValue;
  }
  return LaunchFlashKernel<Tr>(FlashPrefillSm80Kernel<Tr, false>, p, num_splits, workspace, stream);
}

}  // namespace gannet::kernels::sm80

// Defines FlashConfig<name>() and LaunchFlash<name>() for one prefill configuration. Extra
// arguments go to PrefillTraits: kFp8, then kMinArch.
#define GANNET_DEFINE_FLASH_PREFILL(name, hd, bm, bn, wm, wn, st, ...)                          \
  namespace gannet::kernels {                                                                   \
  using FlashTraits##name =                                                                     \
      sm80::PrefillTraits<hd, bm, bn, wm, wn, st __VA_OPT__(, ) __VA_ARGS__>;                   \
  FlashConfig FlashConfig##name() { return sm80::MakeFlashConfig<FlashTraits##name>(); }        \
  cudaError_t LaunchFlash##name(const PagedAttentionParams& p, int num_splits, void* workspace, \
                                cudaStream_t stream) {                                          \
    return sm80::LaunchFlashPrefill<FlashTraits##name>(p, num_splits, workspace, stream);       \
  }                                                                                             \
  }
