// Paged flash attention on Volta's tensor cores (mma.sync m8n8k4, fp16 operands, f32
// accumulators; mma_sm70.cuh), for decode, verify and prefill alike, head_dim 256 and 512, bf16
// or FP8 KV, sliding windows, single-store K=V. Volta has neither ldmatrix nor cp.async nor bf16
// MMAs, so this is its own kernel; it shares with the sm80 ones everything that is not a fragment
// (flash_common_sm80.cuh): the tile and split bookkeeping, the Q and paged K/V loaders (plain
// 16-byte copies below sm_80), the K-from-V derivation and the split merge.
//
// - A CTA owns (query tile, kv head, KV split); its kBlockM rows are (token, head) pairs of one
//   sequence's GQA group, so each K/V byte it loads serves every query head of the group. Tiles of
//   kBlockN keys are loaded (synchronously: one stage) and then computed.
// - Warp (wm, wn) owns rows [16 wm, 16 wm + 16). Its quad pair q takes the 8 rows 8 (q >> 1) of
//   those and, for S = Q K^T, the 8-key half (q & 1) of each 16 keys of the warp's kBlockN /
//   kWarpsN; for O += P V, the 8-dim half (q & 1) of each 16 dims of the warp's head-dim slice.
//   Row maxima and sums meet across lanes by shuffles and across the key-split warps in shared
//   memory, as in the sm80 prefill kernel; P goes through shared memory as fp16 (rounded to bf16
//   first over a bf16 cache, as the sm75/sm80 entries round it: without that, the tiny E2B's
//   logits, which amplify any rounding difference, moved from 0.049 to 0.080 of max|logit| from
//   the f32 CPU, past the bound cuda_runner_test allows, although the op itself was as accurate).
// - Operands are fp16: Q is converted in shared memory once (after K=V's k_norm weighting); bf16
//   K/V are converted as each fragment is loaded (exact for the normalised values attention sees:
//   8 significant bits, |x| in fp16's normal range), FP8 bytes convert to fp16 exactly. A key's
//   FP8 K scale multiplies its S column, its V scale its P column (over the tile's largest, so
//   P' <= 1), as in the sm80 kernels.
// - Shared memory stays within Volta's 96 KB a block (asserted).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/paged_attention.h"
#include "kernels/attention/sm80/flash_common_sm80.cuh"
#include "kernels/common/device_utils.cuh"
#include "kernels/common/mma_sm70.cuh"
#include "kernels/common/mma_sm80.cuh"

namespace gannet::kernels::sm70 {

using sm80::Fp8Staging;

// Shared memory one block may use on sm_70 (V100).
inline constexpr int kSm70SmemBytes = 96 * 1024;

template <int kHeadDim_, int kBlockM_, int kBlockN_, int kWarpsM_, int kWarpsN_, bool kFp8_>
struct FlashTraits {
  static constexpr int kMinArch = 700;
  static constexpr bool kFp8 = kFp8_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kWarpsM = kWarpsM_;
  static constexpr int kWarpsN = kWarpsN_;
  static constexpr int kStages = 1;  // synchronous copies: nothing to overlap within a CTA
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kKeysPerWarp = kBlockN / kWarpsN;
  static constexpr int kNT = kKeysPerWarp / 16;  // 16-key blocks of a warp's S (8 per QP half)
  static constexpr int kDimsPerWarp = kHeadDim / kWarpsN;
  static constexpr int kDT = kDimsPerWarp / 16;  // 16-dim blocks of a warp's O slice
  static constexpr int kStride = kHeadDim + 8;   // halves per row of sQ (fp16) and the bf16 tiles
  static constexpr int kPStride = kBlockN + 8;
  static constexpr int kQBytes = kBlockM * kStride * 2;
  using Fp8 = Fp8Staging<kHeadDim, kBlockN, kStages>;
  static constexpr int kKvBytes = kFp8 ? Fp8::kBytes : 2 * kBlockN * kStride * 2;
  static constexpr int kPBytes = kBlockM * kPStride * 2;
  static constexpr int kRedBytes = 2 * kWarpsN * kBlockM * 4;
  static constexpr int kSmemBytes = kQBytes + kKvBytes + kPBytes + kRedBytes + kBlockM * 4;
  static_assert(kBlockM == 16 * kWarpsM, "each warp owns 16 query rows");
  static_assert(kNT >= 1 && kKeysPerWarp % 16 == 0, "each warp needs whole 16-key blocks");
  static_assert(kDT >= 1 && kDimsPerWarp % 16 == 0, "each warp needs whole 16-dim blocks");
  static_assert(kHeadDim % 32 == 0, "K=V's rotated dims come in 32-dim blocks");
  static_assert(kSmemBytes <= kSm70SmemBytes, "sm_70 allows 96 KB a block");
};

// Q (bf16, landed in sQ) to fp16 in place, a pair per step.
template <int kHeadDim, int kBlockM, int kThreads, int kStride>
__device__ __forceinline__ void QToF16(bf16* sQ) {
  constexpr int kPairs = kHeadDim / 2;
  for (int e = threadIdx.x; e < kBlockM * kPairs; e += kThreads) {
    uint32_t* w = reinterpret_cast<uint32_t*>(sQ + (e / kPairs) * kStride + (e % kPairs) * 2);
    *w = sm80::Bf16x2ToF16x2(*w);
  }
}

__device__ __forceinline__ uint32_t PackF16x2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Four bf16 (8 bytes) -> two f16x2 registers.
__device__ __forceinline__ void Bf16x4ToF16(const bf16* src, uint32_t& b0, uint32_t& b1) {
  const uint2 w = *reinterpret_cast<const uint2*>(src);
  b0 = sm80::Bf16x2ToF16x2(w.x);
  b1 = sm80::Bf16x2ToF16x2(w.y);
}

// Four E4M3 bytes -> two f16x2 registers (exact).
__device__ __forceinline__ void Fp8x4ToF16(const uint8_t* src, uint32_t& b0, uint32_t& b1) {
  const uint32_t w = *reinterpret_cast<const uint32_t*>(src);
  b0 = sm80::Fp8x2ToF16x2(w & 0xFFFFu);
  b1 = sm80::Fp8x2ToF16x2(w >> 16);
}

// The K operand of S for dims [d, d + 4) of tile row `row`: the stored K, or with kKFromV the
// derived rotated dims (bf16 at their own columns of cK; FP8: fp16 at RotIndex of the K row) or,
// off them, V's row (Q carries k_norm there).
template <typename Tr, bool kKFromV>
__device__ __forceinline__ void KOperand(const PagedAttentionParams& p,
                                         const typename Tr::Fp8::Stage& f8, const bf16* cK,
                                         const bf16* cV, int row, int d, uint32_t& b0,
                                         uint32_t& b1) {
  constexpr int kHalf = Tr::kHeadDim / 2;
  const bool derived = kKFromV && sm80::KFromVRotated(d, kHalf, p.rope_pairs);
  if constexpr (Tr::kFp8) {
    using Fp8 = typename Tr::Fp8;
    if (derived) {
      const uint2 w = *reinterpret_cast<const uint2*>(
          f8.k + row * Fp8::kKRowBytes + 2 * sm80::KFromVRotIndex(d, kHalf, p.rope_pairs));
      b0 = w.x, b1 = w.y;
    } else if (kKFromV) {
      Fp8x4ToF16(f8.v + row * Fp8::kVRowBytes + d, b0, b1);
    } else {
      Fp8x4ToF16(f8.k + row * Fp8::kKRowBytes + d, b0, b1);
    }
  } else {
    Bf16x4ToF16((kKFromV && !derived ? cV : cK) + row * Tr::kStride + d, b0, b1);
  }
}

template <typename Tr, bool kKFromV>
__device__ __forceinline__ void FlashSm70Cta(const PagedAttentionParams& p, int num_splits,
                                             void* workspace) {
  constexpr int kHeadDim = Tr::kHeadDim, kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN;
  constexpr int kStride = Tr::kStride, kPStride = Tr::kPStride;
  constexpr float kLog2e = 1.4426950408889634f;
  using Fp8 = typename Tr::Fp8;

  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(
      smem);  // as loaded (bf16, or f16 with io_f16), fp16 from the first tile on
  const __half* sQh = reinterpret_cast<const __half*>(smem);
  bf16* sK = reinterpret_cast<bf16*>(smem + Tr::kQBytes);  // bf16 only
  bf16* sV = sK + kBlockN * kStride;
  uint8_t* staging = smem + Tr::kQBytes;  // FP8 only
  __half* sP = reinterpret_cast<__half*>(smem + Tr::kQBytes + Tr::kKvBytes);
  float* sMax = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(sP) + Tr::kPBytes);
  float* sSum = sMax + Tr::kWarpsN * kBlockM;
  int* sPos = reinterpret_cast<int*>(sSum + Tr::kWarpsN * kBlockM);

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int wm = warp / Tr::kWarpsN;
  const int wn = warp % Tr::kWarpsN;
  const int qp = (lane >> 2) & 3;
  const int half8 = 8 * (qp & 1);                // the QP's 8-key (S) / 8-dim (O) half
  const int rows8 = wm * 16 + 8 * (qp >> 1);     // the QP's first row
  const int a_row = rows8 + QpOperandRow(lane);  // the row of A (Q, P) this lane supplies
  const int b_col = QpOperandRow(lane);          // the key (S) this lane supplies, within 8
  const int kvh = blockIdx.y;
  const int split = blockIdx.z;
  const int group = p.num_q_heads / p.num_kv_heads;

  sm80::TileRange t;
  if (!sm80::FindTileRange(p, group, kBlockM, blockIdx.x, &t)) return;
  const sm80::SplitWork work =
      sm80::BeginFlashTile<kHeadDim, kBlockM, kBlockN, Tr::kThreads, kStride>(
          p, t, group, kvh, split, num_splits, sPos, sQ);
  const int n_tiles = work.n_tiles;
  const auto load_tile = sm80::MakeKvLoader<Tr>(p, work, t, kvh, sK, sV, staging);
  sm80::PrimeKvStages<1>(load_tile, n_tiles);

  float acc_o[Tr::kDT][8];
#pragma unroll
  for (int i = 0; i < Tr::kDT; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) acc_o[i][j] = 0.f;
  }
  float m_run[2] = {-INFINITY, -INFINITY};  // this lane's two rows, log2 domain
  float l_run[2] = {0.f, 0.f};
  const float scale2 = p.scale * kLog2e;
  const int r_acc[2] = {rows8 + QpAccRow(lane, 0), rows8 + QpAccRow(lane, 1)};
  const bool row_writer = (lane & 6) == 0;  // one lane per row shares its max, sum and lse
  sm80::KFromVPair<kHeadDim, Tr::kThreads> kfv;
  if constexpr (kKFromV) kfv = sm80::KFromVPair<kHeadDim, Tr::kThreads>(p);

  for (int it = 0; it < n_tiles; ++it) {
    sm80::CpAsyncWait<0>();
    __syncthreads();  // Q landed (first tile); the previous tile's P and V reads are done
    if (it == 0) {
      if constexpr (kKFromV) {  // Q carries k_norm off the rotated dims (flash_common_sm80.cuh)
        sm80::WeightQForKFromV<kHeadDim, kBlockM, Tr::kThreads, kStride>(sQ, p);
        __syncthreads();
      }
      if (!p.io_f16) QToF16<kHeadDim, kBlockM, Tr::kThreads, kStride>(sQ);
    }
    sm80::AdvanceKvPipeline<1>(load_tile, it, n_tiles);  // loads tile `it`, then a barrier
    bf16* cK = sK;
    const bf16* cV = sV;
    const auto f8 = Fp8::At(staging, 0);
    const int key0 = t.lo + (work.t_begin + it) * kBlockN;
    if constexpr (kKFromV) sm80::DeriveTileRotatedK<Tr>(kfv, p, f8, cV, cK, key0);

    // ---- S = Q K^T: this QP's 8 rows x its 8-key half of each of the warp's 16-key blocks ----
    float acc_s[Tr::kNT][8];
#pragma unroll
    for (int j = 0; j < Tr::kNT; ++j) {
#pragma unroll
      for (int i = 0; i < 8; ++i) acc_s[j][i] = 0.f;
    }
#pragma unroll 4
    for (int d = 0; d < kHeadDim; d += 4) {
      const uint2 a = *reinterpret_cast<const uint2*>(sQh + a_row * kStride + d);
#pragma unroll
      for (int j = 0; j < Tr::kNT; ++j) {
        uint32_t b0, b1;
        KOperand<Tr, kKFromV>(p, f8, cK, cV, wn * Tr::kKeysPerWarp + 16 * j + half8 + b_col, d, b0,
                              b1);
        MmaM8n8k4RowCol(acc_s[j], a.x, a.y, b0, b1);
      }
    }

    // ---- mask, scale, row max across the QP halves and the key-split warps ----
    const int pos[2] = {sPos[r_acc[0]], sPos[r_acc[1]]};
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < Tr::kNT; ++j) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int h = (i >> 1) & 1;
        const int col = wn * Tr::kKeysPerWarp + 16 * j + half8 + QpAccCol(lane, i);
        if constexpr (Tr::kFp8) acc_s[j][i] *= (kKFromV ? f8.v_scale : f8.k_scale)[col];
        const int key = key0 + col;
        const bool ok = key <= pos[h] && (p.window <= 0 || key > pos[h] - p.window);
        acc_s[j][i] = ok ? acc_s[j][i] * scale2 : -INFINITY;
        mx[h] = fmaxf(mx[h], acc_s[j][i]);
      }
    }
    // Lanes holding the same rows differ in lane bit 1 (the column pair) and bit 2 (the QP's half).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 4));
    }
    if (row_writer) {
      sMax[wn * kBlockM + r_acc[0]] = mx[0];
      sMax[wn * kBlockM + r_acc[1]] = mx[1];
    }
    __syncthreads();
    float alpha[2], m_use[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int w = 0; w < Tr::kWarpsN; ++w)
        tile_max = fmaxf(tile_max, sMax[w * kBlockM + r_acc[h]]);
      const float m_new = fmaxf(m_run[h], tile_max);
      m_use[h] = m_new == -INFINITY ? 0.f : m_new;  // fully masked so far: keep exp2 finite
      alpha[h] = exp2f(m_run[h] - m_use[h]);
      m_run[h] = m_new;
    }

    // ---- P = exp2(S - m) to shared memory as fp16 (FP8: times V scale / the tile's largest) ----
    float v_max = 1.f;
    if constexpr (Tr::kFp8) {
      v_max = 0.f;
      for (int k = 0; k < kBlockN; ++k) v_max = fmaxf(v_max, f8.v_scale[k]);
      v_max = v_max > 0.f ? v_max : 1.f;
    }
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int j = 0; j < Tr::kNT; ++j) {
#pragma unroll
      for (int i = 0; i < 8; i += 2) {  // registers (i, i + 1): two adjacent keys of one row
        const int h = (i >> 1) & 1;
        const int col = wn * Tr::kKeysPerWarp + 16 * j + half8 + QpAccCol(lane, i);
        const float p0 = exp2f(acc_s[j][i] - m_use[h]);
        const float p1 = exp2f(acc_s[j][i + 1] - m_use[h]);
        sum[h] += p0 + p1;
        float x0 = p0, x1 = p1;
        if constexpr (Tr::kFp8) {
          x0 *= f8.v_scale[col] / v_max, x1 *= f8.v_scale[col + 1] / v_max;
        } else {  // bf16 P, as every other bf16 entry rounds it (exact in fp16)
          x0 = __bfloat162float(__float2bfloat16_rn(x0)),
          x1 = __bfloat162float(__float2bfloat16_rn(x1));
        }
        *reinterpret_cast<__half2*>(sP + r_acc[h] * kPStride + col) = __floats2half2_rn(x0, x1);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 4);
    }
    if (row_writer) {
      sSum[wn * kBlockM + r_acc[0]] = sum[0];
      sSum[wn * kBlockM + r_acc[1]] = sum[1];
    }
    __syncthreads();  // P and the partial sums complete
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float s = 0.f;
#pragma unroll
      for (int w = 0; w < Tr::kWarpsN; ++w) s += sSum[w * kBlockM + r_acc[h]];
      l_run[h] = l_run[h] * alpha[h] + s;
    }
    // FP8: the accumulator in units of the tile's v_max while this tile's P'.V adds in.
    const float a_h[2] = {alpha[0] / v_max, alpha[1] / v_max};
#pragma unroll
    for (int dt = 0; dt < Tr::kDT; ++dt) {
#pragma unroll
      for (int i = 0; i < 8; ++i) acc_o[dt][i] *= a_h[(i >> 1) & 1];
    }

    // ---- O[:, slice] += P V[:, slice]: 4 keys a step; the lane's V operand is 4 dims of key lo
    // ----
    const int v_key = lane & 3;
    const int v_dim = wn * Tr::kDimsPerWarp + half8 + 4 * ((lane >> 4) & 1);
#pragma unroll 2
    for (int k = 0; k < kBlockN; k += 4) {
      const uint2 a = *reinterpret_cast<const uint2*>(sP + a_row * kPStride + k);
#pragma unroll
      for (int dt = 0; dt < Tr::kDT; ++dt) {
        uint32_t b0, b1;
        if constexpr (Tr::kFp8) {
          Fp8x4ToF16(f8.v + (k + v_key) * Fp8::kVRowBytes + v_dim + 16 * dt, b0, b1);
        } else {
          Bf16x4ToF16(cV + (k + v_key) * kStride + v_dim + 16 * dt, b0, b1);
        }
        MmaM8n8k4RowRow(acc_o[dt], a.x, a.y, b0, b1);
      }
    }
    if constexpr (Tr::kFp8) {
#pragma unroll
      for (int dt = 0; dt < Tr::kDT; ++dt) {
#pragma unroll
        for (int i = 0; i < 8; ++i) acc_o[dt][i] *= v_max;
      }
    }
  }

  // ---- epilogue: normalised bf16 rows, or this split's f32 partial and log2-sum-exp ----
  const float inv_l[2] = {l_run[0] > 0.f ? 1.f / l_run[0] : 0.f,
                          l_run[1] > 0.f ? 1.f / l_run[1] : 0.f};
  const int cta = blockIdx.x * gridDim.y + kvh;
  const sm80::SplitWorkspace ws =
      sm80::SplitViews(workspace, gridDim.x * gridDim.y, num_splits, kBlockM, kHeadDim);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = r_acc[h];
    if (r >= t.rows_here) continue;  // the combine reads the tile's rows alone
#pragma unroll
    for (int dt = 0; dt < Tr::kDT; ++dt) {
#pragma unroll
      for (int i = 2 * h; i < 8; i += 4) {  // registers (i, i + 1) of row h: two adjacent dims
        const int c = wn * Tr::kDimsPerWarp + 16 * dt + half8 + QpAccCol(lane, i);
        const float x0 = acc_o[dt][i] * inv_l[h], x1 = acc_o[dt][i + 1] * inv_l[h];
        if (num_splits == 1) {
          *reinterpret_cast<uint32_t*>(sm80::OutRow(p, t, group, kvh, kHeadDim, r) + c) =
              p.io_f16 ? PackF16x2(x0, x1) : sm80::PackBf16x2(x0, x1);
        } else {
          float* o =
              ws.o + ((static_cast<size_t>(cta) * num_splits + split) * kBlockM + r) * kHeadDim + c;
          *reinterpret_cast<float2*>(o) = make_float2(x0, x1);
        }
      }
    }
    if (num_splits > 1 && wn == 0 && row_writer) {
      ws.lse[(static_cast<size_t>(cta) * num_splits + split) * kBlockM + r] =
          l_run[h] > 0.f ? m_run[h] + log2f(l_run[h]) : -INFINITY;
    }
  }
}

// kKFromV: single-store K=V, its own instantiation (head_dim 512 alone, FlashSupportsKFromV).
// Empty below sm_70.
template <typename Tr, bool kKFromV>
__global__ void __launch_bounds__(Tr::kThreads)
    FlashSm70Kernel(const PagedAttentionParams p, int num_splits, void* workspace) {
  PdlEnter();
#if GANNET_SM70_MMA_ENABLED
  FlashSm70Cta<Tr, kKFromV>(p, num_splits, workspace);
#endif
}

template <typename Tr>
cudaError_t LaunchFlashSm70(const PagedAttentionParams& p, int num_splits, void* workspace,
                            cudaStream_t stream) {
  if (p.k_from_v) {
    if constexpr (Tr::kHeadDim == 512) {
      return sm80::LaunchFlashKernel<Tr>(FlashSm70Kernel<Tr, true>, p, num_splits, workspace,
                                         stream);
    }
    return cudaErrorInvalidValue;
  }
  return sm80::LaunchFlashKernel<Tr>(FlashSm70Kernel<Tr, false>, p, num_splits, workspace, stream);
}

}  // namespace gannet::kernels::sm70

// Defines FlashConfig<name>() and LaunchFlash<name>() for one Volta configuration.
#define GANNET_DEFINE_FLASH_SM70(name, hd, bm, bn, wm, wn, fp8)                                 \
  namespace gannet::kernels {                                                                   \
  using FlashTraits##name = sm70::FlashTraits<hd, bm, bn, wm, wn, fp8>;                         \
  FlashConfig FlashConfig##name() { return sm80::MakeFlashConfig<FlashTraits##name>(); }        \
  cudaError_t LaunchFlash##name(const PagedAttentionParams& p, int num_splits, void* workspace, \
                                cudaStream_t stream) {                                          \
    return sm70::LaunchFlashSm70<FlashTraits##name>(p, num_splits, workspace, stream);          \
  }                                                                                             \
  }
