// Paged split-KV decode attention on sm_80-class tensor cores (mma.sync m16n8k16 bf16), built to
// stream K/V at HBM speed: one CTA per (sequence, kv head, KV split) holds the 16 query rows of a
// GQA group (group x query tokens, padded to 16) so every K/V byte is read once for all of them.
//
// Work split: each of the kWarps warps owns one head-dim slice of kHeadDim / kWarps dims for
// BOTH products. It keeps its slice of Q in registers for the whole kernel, computes a partial
// S = Q K^T over its slice for all kBlockN keys, the partials are summed through shared memory,
// and every warp then holds the full S of the tile: it does the (redundant, cheap) softmax itself,
// turns P into MMA operands in registers (no shared-memory round trip) and accumulates O for its
// slice. That is two barriers per tile, short independent MMA chains, and 64 (hd512) accumulator
// registers per thread.
//
// K/V tiles stream through a kStages-deep cp.async pipeline (flash_common_sm80.cuh); splits write
// partials that FlashCombineKernel merges. Grid (num_seqs, kv heads, splits): graph-stable.
//
// FP8 KV (kFp8): the stages hold the FP8 rows and their scales, and the MMAs read them straight
// from there in fp16 (E4M3 converts to fp16 exactly, one cvt per pair on sm_89+). Reduction and
// output dims may be permuted freely as long as both operands agree, which makes every lane's
// bytes contiguous: in S = Q K^T, lane (g, t) takes dims 8t .. 8t + 7 of each 32-dim block for
// its k slots (one 8-byte load of key g; Q is permuted to match once, PermuteQForFp8), and in
// O = P V it owns output dims g kDT .. g kDT + kDT - 1 of the warp's slice (one 8/16-byte load per
// key row, bytes paired across rows with byte_perm), which the epilogue maps back (kDimMajor).
// The row scales are folded in where they are constant: a key's K scale multiplies its S column,
// its V scale its P column (P' = P * s_v / max(s_v of the tile) keeps P' <= 1 in fp16; the max
// multiplies the accumulator back). No bf16 copy of the tile, no extra barrier.
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
template <int kHeadDim_, int kBlockN_, int kWarps_, int kStages_, bool kFp8_ = false,
          int kMinArch_ = 800>
struct DecodeTraits {
  static constexpr int kMinArch = kMinArch_;
  static constexpr bool kFp8 = kFp8_;  // FP8 KV cache (Fp8KvTileLoader)
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = 16;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kWarps = kWarps_;
  static constexpr int kStages = kStages_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kDimsPerWarp = kHeadDim / kWarps;
  static constexpr int kKSteps = kDimsPerWarp / 16;  // Q fragments per warp
  static constexpr int kNT = kBlockN / 8;            // S n-tiles (all keys of the tile)
  static constexpr int kDT = kDimsPerWarp / 8;       // O n-tiles of the warp's slice
  static constexpr int kStride = kHeadDim + 8;       // padded bf16 rows: conflict-free ldmatrix
  static constexpr int kSStride = kBlockN + 8;       // padded f32 rows: conflict-free float2 I/O
  static constexpr int kQBytes = kBlockM * kStride * 2;
  using Fp8 = Fp8Staging<kHeadDim, kBlockN, kStages>;
  // bf16: kStages K and V tiles (single-store K=V: one derived K tile, 2 kStages - 1 V stages);
  // FP8: the staging stages alone (read in place).
  static constexpr int kKvBytes = kFp8 ? Fp8::kBytes : 2 * kStages * kBlockN * kStride * 2;
  static constexpr int kSBytes = kWarps * kBlockM * kSStride * 4;
  static constexpr int kSmemBytes = kQBytes + kKvBytes + kSBytes + kBlockM * 4;
  static_assert(kKSteps % 2 == 0 && kNT % 2 == 0 && kDT % 2 == 0, "fragment pairing");
  static_assert(kStages >= 1, "pipeline");
  static_assert(kMinArch >= 800 || kSmemBytes <= kSm75SmemBytes, "sm_75 allows 64 KB a block");
};

// One CTA's work (the kernel below).
template <typename Tr, bool kKFromV>
__device__ __forceinline__ void FlashDecodeCta(const PagedAttentionParams& p, int num_splits,
                                               void* workspace) {
  constexpr int kHeadDim = Tr::kHeadDim, kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN;
  constexpr int kStride = Tr::kStride, kStages = Tr::kStages, kSStride = Tr::kSStride;
  constexpr float kLog2e = 1.4426950408889634f;

  // Single-store K=V in bf16 loads no K: its stages' space holds one tile of derived rotated K
  // dims and more V stages, 2 kStages - 1 in all, so twice the tiles are in flight at 2 stages
  // (a CTA streamed V at half the rate of a stored-K kernel: 31B's full layers at 80 sequences,
  // two CTAs an SM, ran at ~1.7 TB/s on an H200).
  constexpr bool kVOnly = kKFromV && !Tr::kFp8;
  constexpr int kPipe = kVOnly ? 2 * kStages - 1 : kStages;

  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);
  bf16* sK = reinterpret_cast<bf16*>(smem + Tr::kQBytes);
  bf16* sV = sK + (kVOnly ? 1 : kStages) * kBlockN * kStride;  // bf16 only
  uint8_t* staging = smem + Tr::kQBytes;                       // FP8 only
  float* sS =
      reinterpret_cast<float*>(smem + Tr::kQBytes + Tr::kKvBytes);  // [kWarps][16][kSStride]
  int* sPos = reinterpret_cast<int*>(sS + Tr::kWarps * kBlockM * kSStride);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int kvh = blockIdx.y, split = blockIdx.z;
  const int group = p.num_q_heads / p.num_kv_heads;
  // The step's metadata (the tile's sequence and positions, the split's key blocks, the pages of
  // its first blocks) before the PDL wait: the host copies it in before the step's first kernel
  // and no kernel writes it, so at batch 1 its three dependent round trips (query_start, then
  // positions and seq_lens, then the page table) leave the chain that waits for QKV prep.
  TileRange t{};
  const bool has_tile = FindTileRange(p, group, kBlockM, blockIdx.x, &t);
  SplitWork work{};
  if (has_tile)
    work = BeginFlashSplit<kBlockM, kBlockN, Tr::kThreads>(p, t, group, split, num_splits, sPos);
  const int n_tiles = work.n_tiles;
  const auto load_tile = MakeKvLoader<Tr>(p, work, t, kvh, sK, sV, staging);
  const PrimedPages<kPipe> pages(load_tile, n_tiles);
  PdlEnter();  // Q and the newest keys are QKV prep's output
  if (!has_tile) return;
  LoadFlashQ<kHeadDim, kBlockM, Tr::kThreads, kStride>(p, t, group, kvh, sQ);
  using Fp8 = typename Tr::Fp8;
  PrimeKvStages<kPipe>(load_tile, n_tiles, pages);

  // This warp's slice of Q, in registers for the whole kernel.
  const int d0 = warp * Tr::kDimsPerWarp;
  uint32_t aq[Tr::kKSteps][4];
  CpAsyncWait<KvWaitDepth(kPipe)>();
  __syncthreads();
  if (kKFromV) {  // Q carries k_norm off the rotated dims (flash_common_sm80.cuh)
    WeightQForKFromV<kHeadDim, kBlockM, Tr::kThreads, kStride>(sQ, p);
    __syncthreads();
  }
  if constexpr (Tr::kFp8) {
    PermuteQForFp8<kHeadDim, kBlockM, Tr::kThreads, kStride>(sQ);  // fp16, K's dim order
    __syncthreads();
  }
#pragma unroll
  for (int ks = 0; ks < Tr::kKSteps; ++ks) {
    LdMatrixX4(aq[ks][0], aq[ks][1], aq[ks][2], aq[ks][3],
               sQ + (lane & 15) * kStride + d0 + ks * 16 + (lane >> 4) * 8);
  }

  float acc_o[Tr::kDT][4];
#pragma unroll
  for (int i = 0; i < Tr::kDT; ++i) acc_o[i][0] = acc_o[i][1] = acc_o[i][2] = acc_o[i][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};  // rows lane/4 and lane/4 + 8, log2 domain
  float l_run[2] = {0.f, 0.f};
  const float scale2 = p.scale * kLog2e;
  const int r_lo = lane >> 2;
  const int pos0 = sPos[r_lo], pos1 = sPos[r_lo + 8];
  KFromVPair<kHeadDim, Tr::kThreads> kfv;
  if constexpr (kKFromV) kfv = KFromVPair<kHeadDim, Tr::kThreads>(p);
  constexpr int kHalf = kHeadDim / 2;

  for (int it = 0; it < n_tiles; ++it) {
    CpAsyncWait<KvWaitDepth(kPipe)>();
    __syncthreads();  // tile `it` landed; stage (it - 1) % kPipe and sS are free again
    AdvanceKvPipeline<kPipe>(load_tile, it, n_tiles);
    // k_from_v: its rotated dims derived here (one tile for every stage in bf16: the loop-top
    // barrier orders the derivation after the last tile's reads)
    bf16* cK = sK + (kVOnly ? 0 : it % kStages) * kBlockN * kStride;
    const bf16* cV = sV + (it % kPipe) * kBlockN * kStride;
    const auto f8 = Fp8::At(staging, it % kPipe);  // FP8 only: this stage's rows and scales
    const int key0 = t.lo + (work.t_begin + it) * kBlockN;
    if constexpr (kKFromV) DeriveTileRotatedK<Tr>(kfv, p, f8, cV, cK, key0);  // its rotated K dims

    // ---- partial S over this warp's dims, all keys; kNT independent accumulator chains ----
    float s[Tr::kNT][4];
#pragma unroll
    for (int nt = 0; nt < Tr::kNT; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < Tr::kKSteps; ks += 2) {
#pragma unroll
      for (int nt = 0; nt < Tr::kNT; ++nt) {
        uint32_t b[4];
        if constexpr (Tr::kFp8) {
          Fp8KBlock<Fp8, kKFromV>(p, f8, nt * 8 + (lane >> 2), d0 + ks * 16, kHalf, b);
          MmaF16(s[nt], aq[ks], b);
          MmaF16(s[nt], aq[ks + 1], b + 2);
        } else {
          // Single-store K=V: off the rotated dims, K's operand is V's (Q carries k_norm).
          const bf16* kt = kKFromV && !KFromVRotated(d0 + ks * 16, kHalf, p.rope_pairs) ? cV : cK;
          LdMatrixX4(b[0], b[1], b[2], b[3],
                     kt + (nt * 8 + (lane & 7)) * kStride + d0 + ks * 16 + (lane >> 3) * 8);
          MmaBf16(s[nt], aq[ks], b);
          MmaBf16(s[nt], aq[ks + 1], b + 2);
        }
      }
    }
    float* my_s = sS + warp * kBlockM * kSStride;
#pragma unroll
    for (int nt = 0; nt < Tr::kNT; ++nt) {
      const int col = nt * 8 + (lane & 3) * 2;
      *reinterpret_cast<float2*>(my_s + r_lo * kSStride + col) = make_float2(s[nt][0], s[nt][1]);
      *reinterpret_cast<float2*>(my_s + (r_lo + 8) * kSStride + col) =
          make_float2(s[nt][2], s[nt][3]);
    }
    __syncthreads();

    // ---- full S (sum of the warps' partials), mask, online softmax, P in registers ----
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < Tr::kNT; ++nt) {
      const int col = nt * 8 + (lane & 3) * 2;
      float2 lo = make_float2(0.f, 0.f), hi = make_float2(0.f, 0.f);
#pragma unroll
      for (int w = 0; w < Tr::kWarps; ++w) {
        const float2 a =
            *reinterpret_cast<const float2*>(sS + (w * kBlockM + r_lo) * kSStride + col);
        const float2 b =
            *reinterpret_cast<const float2*>(sS + (w * kBlockM + r_lo + 8) * kSStride + col);
        lo.x += a.x, lo.y += a.y, hi.x += b.x, hi.y += b.y;
      }
      s[nt][0] = lo.x, s[nt][1] = lo.y, s[nt][2] = hi.x, s[nt][3] = hi.y;
      if constexpr (Tr::kFp8) {  // each key's K scale (V's, when K is derived from V)
        const float2 ks2 =
            *reinterpret_cast<const float2*>((kKFromV ? f8.v_scale : f8.k_scale) + col);
        s[nt][0] *= ks2.x, s[nt][1] *= ks2.y, s[nt][2] *= ks2.x, s[nt][3] *= ks2.y;
      }
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
    uint32_t pa[Tr::kNT / 2][4];  // P as the A operand of P.V, one 16-key step per entry
    // FP8: P's columns carry their keys' V scales over the tile's largest (so P' <= 1 in fp16).
    float v_max = 1.f;
    float2 vsc[Tr::kNT];  // the V scales of this lane's P columns
    if constexpr (Tr::kFp8) {
      v_max = 0.f;
#pragma unroll
      for (int nt = 0; nt < Tr::kNT; ++nt) {
        vsc[nt] = *reinterpret_cast<const float2*>(f8.v_scale + nt * 8 + (lane & 3) * 2);
        v_max = fmaxf(v_max, fmaxf(vsc[nt].x, vsc[nt].y));
      }
      v_max = fmaxf(v_max, __shfl_xor_sync(0xffffffffu, v_max, 1));
      v_max = fmaxf(v_max, __shfl_xor_sync(0xffffffffu, v_max, 2));
      v_max = v_max > 0.f ? v_max : 1.f;
    }
#pragma unroll
    for (int nt = 0; nt < Tr::kNT; ++nt) {
      const float p0 = exp2f(s[nt][0] - m_use[0]), p1 = exp2f(s[nt][1] - m_use[0]);
      const float p2 = exp2f(s[nt][2] - m_use[1]), p3 = exp2f(s[nt][3] - m_use[1]);
      sum[0] += p0 + p1;
      sum[1] += p2 + p3;
      if constexpr (Tr::kFp8) {
        const float w0 = vsc[nt].x / v_max, w1 = vsc[nt].y / v_max;
        pa[nt / 2][(nt & 1) * 2] = PackF16x2(p0 * w0, p1 * w1);
        pa[nt / 2][(nt & 1) * 2 + 1] = PackF16x2(p2 * w0, p3 * w1);
      } else {
        pa[nt / 2][(nt & 1) * 2] = PackBf16x2(p0, p1);
        pa[nt / 2][(nt & 1) * 2 + 1] = PackBf16x2(p2, p3);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
      l_run[h] = l_run[h] * alpha[h] + sum[h];
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
    for (int kk = 0; kk < Tr::kNT / 2; ++kk) {
      if constexpr (Tr::kFp8) {
        // B[k][n] = V[key k][dim]: lane (g, t) takes keys 2t, 2t + 1, 2t + 8, 2t + 9 and owns dims
        // d0 + g kDT + dt, one contiguous load per key row; byte dt of two rows makes a pair.
        uint32_t rows[4][Tr::kDT / 4];
        LoadFp8VRows<Tr::kDT>(
            f8.v + (kk * 16 + (lane & 3) * 2) * Fp8::kVRowBytes + d0 + (lane >> 2) * Tr::kDT,
            Fp8::kVRowBytes, rows);
#pragma unroll
        for (int dt = 0; dt < Tr::kDT; ++dt) {
          uint32_t b[2];
          Fp8VFragment(rows, dt, b);
          MmaF16(acc_o[dt], pa[kk], b);
        }
      } else {
#pragma unroll
        for (int dt = 0; dt < Tr::kDT; dt += 2) {
          uint32_t b[4];
          LdMatrixX4Trans(b[0], b[1], b[2], b[3],
                          cV + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kStride + d0 +
                              dt * 8 + (lane >> 4) * 8);
          MmaBf16(acc_o[dt], pa[kk], b);
          MmaBf16(acc_o[dt + 1], pa[kk], b + 2);
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

  StoreFlashResult<kHeadDim, kBlockM, Tr::kDT, Tr::kFp8>(
      p, t, group, kvh, split, num_splits, workspace, acc_o, m_run, l_run, r_lo, d0, warp == 0);
}

// kKFromV: single-store K=V (PagedAttentionParams::k_from_v), a separate instantiation so the
// plain kernel carries none of its code or registers. Empty below the traits' kMinArch.
template <typename Tr, bool kKFromV>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    FlashDecodeSm80Kernel(const PagedAttentionParams p, int num_splits, void* workspace) {
#if GANNET_MMA_ENABLED
  if constexpr (__CUDA_ARCH__ >= Tr::kMinArch) {
    FlashDecodeCta<Tr, kKFromV>(p, num_splits, workspace);  // waits (PdlEnter) after its metadata
    return;
  }
#endif
  PdlEnter();
}

template <typename Tr>
cudaError_t LaunchFlashDecode(const PagedAttentionParams& p, int num_splits, void* workspace,
                              cudaStream_t stream) {
  if (p.k_from_v) {
    // Instantiated for head_dim 512 alone: Gemma-4's K=V layers (FlashSupportsKFromV).
    if constexpr (Tr::kHeadDim == 512) {
      return LaunchFlashKernel<Tr>(FlashDecodeSm80Kernel<Tr, true>, p, num_splits, workspace,
                                   stream);
    }
    return cudaErrorInvalidValue;
  }
  return LaunchFlashKernel<Tr>(FlashDecodeSm80Kernel<Tr, false>, p, num_splits, workspace, stream);
}

}  // namespace gannet::kernels::sm80

// Defines FlashConfig<name>() and LaunchFlash<name>() for one decode configuration.
// Extra arguments go to DecodeTraits: kFp8, then kMinArch.
#define GANNET_DEFINE_FLASH_DECODE(name, hd, bn, warps, st, ...)                                \
  namespace gannet::kernels {                                                                   \
  using FlashTraits##name = sm80::DecodeTraits<hd, bn, warps, st __VA_OPT__(, ) __VA_ARGS__>;   \
  FlashConfig FlashConfig##name() { return sm80::MakeFlashConfig<FlashTraits##name>(); }        \
  cudaError_t LaunchFlash##name(const PagedAttentionParams& p, int num_splits, void* workspace, \
                                cudaStream_t stream) {                                          \
    return sm80::LaunchFlashDecode<FlashTraits##name>(p, num_splits, workspace, stream);        \
  }                                                                                             \
  }
