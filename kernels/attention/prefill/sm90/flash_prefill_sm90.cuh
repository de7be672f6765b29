// Pieces the Hopper (wgmma, sm_90a) prefill kernels share: the core-matrix tile layout that
// wgmma reads (kernels/common/wgmma_sm90.cuh), Q and paged K/V loads into it, a CTA's split of
// its key blocks, and the online softmax over accumulator registers. Masking, split partials
// and the epilogue are the sm80 kernels' (attention/sm80/flash_common_sm80.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/paged_attention.h"
#include "kernels/attention/sm80/flash_common_sm80.cuh"
#include "kernels/common/mma_sm80.cuh"
#include "kernels/common/wgmma_sm90.cuh"

namespace gannet::kernels::sm90 {

// Byte offset of chunk c (dims 8c .. 8c + 7) of row r in a [rows][head_dim] tile laid out in
// core matrices: core (row group r / 8, chunk c) at (c * rows / 8 + r / 8) * 128, row r % 8 at
// 16 (r % 8) inside. Read K-major (Q as A, K as B) with LBO = rows * 16 (next 8 dims) and
// SBO = 128 (next 8 rows); the same bytes of a V tile read MN-major with LBO = 128 (next 8
// keys) and SBO = rows * 16 (next 8 dims).
__device__ __forceinline__ int CoreOffset(int r, int c, int rows) {
  return (c * (rows / 8) + r / 8) * 128 + (r % 8) * 16;
}
// Element (r, d) of such a tile of bf16.
__device__ __forceinline__ int CoreElem(int r, int d, int rows) {
  return CoreOffset(r, d / 8, rows) / 2 + d % 8;
}

// The tile's query rows into sQ as blocks of 64 rows (one warpgroup's A operand each), zero past
// the sequence's rows; positions into sPos (-1 marks padding). cp.async: the caller commits.
template <int kHeadDim, int kBlockM, int kThreads>
__device__ __forceinline__ void LoadQCore(const PagedAttentionParams& p, const sm80::TileRange& t,
                                          int group, int kvh, unsigned char* sQ, int* sPos) {
  for (int r = threadIdx.x; r < kBlockM; r += kThreads) {
    sPos[r] = r < t.rows_here ? p.positions[t.q0 + (t.row0 + r) / group] : -1;
  }
  constexpr int kChunks = kHeadDim / 8;
  for (int c = threadIdx.x; c < kBlockM * kChunks; c += kThreads) {
    const int r = c / kChunks, ch = c % kChunks;
    bool ok;
    const bf16* src = sm80::QChunkSource(p, t, group, kvh, kHeadDim, r, ch, &ok);
    sm80::CpAsync16(sQ + (r / 64) * (64 * kHeadDim * 2) + CoreOffset(r % 64, ch, 64), src,
                    ok ? 16 : 0);
  }
}

// This CTA's key blocks: the tile's [lo, hi) keys cut into kBlockN blocks, shared by num_splits.
struct KeyBlocks {
  int n_tiles;
  int key_base;  // first key of the first block
  const int32_t* table;
};
template <int kBlockN>
__device__ __forceinline__ KeyBlocks SplitKeyBlocks(const PagedAttentionParams& p,
                                                    const sm80::TileRange& t, int split,
                                                    int num_splits) {
  const int total = t.hi > t.lo ? (t.hi - t.lo + kBlockN - 1) / kBlockN : 0;
  const int per_split = (total + num_splits - 1) / num_splits;
  const int begin = min(total, split * per_split);
  return {min(total, begin + per_split) - begin, t.lo + begin * kBlockN,
          p.page_table + static_cast<int64_t>(t.seq) * p.max_pages_per_seq};
}

// Keys [key0, key0 + kBlockN) of one KV head into core-layout K and V tiles (V alone when k_cache
// is null: single-store K=V). kThreads / kBlockN threads per key, its page looked up once; rows
// at or past hi, and holes, are zero-filled without reading global memory.
template <int kHeadDim, int kBlockN, int kThreads>
__device__ __forceinline__ void LoadKvCore(const PagedAttentionParams& p, const KeyBlocks& kb,
                                           int kvh, int key0, int hi, unsigned char* dk,
                                           unsigned char* dv) {
  constexpr int kPerKey = kThreads / kBlockN;
  static_assert(kThreads % kBlockN == 0 && (kHeadDim / 8) % kPerKey == 0,
                "whole chunks per thread");
  const int r = threadIdx.x / kPerKey, sub = threadIdx.x % kPerKey;
  const int key = key0 + r;
  const int page = key < hi ? kb.table[key / p.page_size] : -1;
  const bool ok = page >= 0;
  const int64_t row =
      ok ? (static_cast<int64_t>(page) * p.num_kv_heads + kvh) * p.page_size + key % p.page_size
         : 0;
  const bf16* ks =
      p.k_cache != nullptr ? static_cast<const bf16*>(p.k_cache) + row * kHeadDim : nullptr;
  const bf16* vs = static_cast<const bf16*>(p.v_cache) + row * kHeadDim;
#pragma unroll
  for (int i = 0; i < kHeadDim / 8 / kPerKey; ++i) {
    const int ch = sub + kPerKey * i;
    if (ks != nullptr)
      sm80::CpAsync16(dk + CoreOffset(r, ch, kBlockN), ks + (ok ? ch * 8 : 0), ok ? 16 : 0);
    sm80::CpAsync16(dv + CoreOffset(r, ch, kBlockN), vs + (ok ? ch * 8 : 0), ok ? 16 : 0);
  }
}

// What a CTA works on: its query tile, its key blocks, and the launch coordinates.
struct Sm90Work {
  sm80::TileRange t;
  KeyBlocks kb;
  int group, kvh, split;
};

// Key block `tile` of the CTA's split into stage `stage` of sKV (stage s: K tile at 2s, V at
// 2s + 1, kTileBytes each).
template <int kHeadDim, int kBlockN, int kThreads, int kTileBytes>
__device__ __forceinline__ void LoadKvStage(const PagedAttentionParams& p, const Sm90Work& w,
                                            unsigned char* sKV, int stage, int tile) {
  unsigned char* dk = sKV + 2 * stage * kTileBytes;
  LoadKvCore<kHeadDim, kBlockN, kThreads>(p, w.kb, w.kvh, w.kb.key_base + tile * kBlockN, w.t.hi,
                                          dk, dk + kTileBytes);
}

// The prologue of both kernels: the CTA's tile (false past the last one), Q and the first key
// block on their way (one cp.async group).
template <int kHeadDim, int kBlockM, int kBlockN, int kThreads, int kTileBytes>
__device__ __forceinline__ bool BeginSm90Tile(const PagedAttentionParams& p, int num_splits,
                                              unsigned char* sQ, int* sPos, unsigned char* sKV,
                                              Sm90Work* w) {
  w->kvh = blockIdx.y;
  w->split = blockIdx.z;
  w->group = p.num_q_heads / p.num_kv_heads;
  if (!sm80::FindTileRange(p, w->group, kBlockM, blockIdx.x, &w->t)) return false;
  LoadQCore<kHeadDim, kBlockM, kThreads>(p, w->t, w->group, w->kvh, sQ, sPos);
  w->kb = SplitKeyBlocks<kBlockN>(p, w->t, w->split, num_splits);
  if (w->kb.n_tiles > 0) LoadKvStage<kHeadDim, kBlockN, kThreads, kTileBytes>(p, *w, sKV, 0, 0);
  sm80::CpAsyncCommit();
  return true;
}

// One tile's online softmax over a warp's rows g and g + 8 (accumulator layout, kNT n-tiles of 8
// keys starting at key0): masks by position and window, scales into the log2 domain, updates the
// running max and sum, rescales nothing itself but returns alpha per row, and packs P as the A
// operand of the P.V wgmma (one 16-key step per pa entry).
template <int kNT>
__device__ __forceinline__ void OnlineSoftmax(const PagedAttentionParams& p, float (&s)[kNT * 4],
                                              int key0, int pos0, int pos1, float scale2,
                                              float (&m_run)[2], float (&l_run)[2],
                                              float (&alpha)[2], uint32_t (&pa)[kNT / 2][4]) {
  const int lane = threadIdx.x & 31;
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < kNT; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = key0 + 8 * j + 2 * (lane & 3) + (e & 1);
      const int pos = e < 2 ? pos0 : pos1;
      const bool ok = key <= pos && (p.window <= 0 || key > pos - p.window);
      s[4 * j + e] = ok ? s[4 * j + e] * scale2 : -INFINITY;
      mx[e >> 1] = fmaxf(mx[e >> 1], s[4 * j + e]);
    }
  }
  float m_use[2], sum[2] = {0.f, 0.f};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    const float m_new = fmaxf(m_run[h], mx[h]);
    m_use[h] = m_new == -INFINITY ? 0.f : m_new;  // nothing visible yet: keep exp2 finite
    alpha[h] = exp2f(m_run[h] - m_use[h]);
    m_run[h] = m_new;
  }
#pragma unroll
  for (int j = 0; j < kNT; ++j) {
    const float p0 = exp2f(s[4 * j] - m_use[0]), p1 = exp2f(s[4 * j + 1] - m_use[0]);
    const float p2 = exp2f(s[4 * j + 2] - m_use[1]), p3 = exp2f(s[4 * j + 3] - m_use[1]);
    sum[0] += p0 + p1;
    sum[1] += p2 + p3;
    pa[j / 2][(j & 1) * 2] = sm80::PackBf16x2(p0, p1);
    pa[j / 2][(j & 1) * 2 + 1] = sm80::PackBf16x2(p2, p3);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
    l_run[h] = l_run[h] * alpha[h] + sum[h];
  }
}

// acc_o rows g (entries 0, 1) and g + 8 (2, 3) times the rows' alpha.
template <int kDT>
__device__ __forceinline__ void RescaleRows(float (&acc_o)[kDT][4], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < kDT; ++j) {
    acc_o[j][0] *= alpha[0];
    acc_o[j][1] *= alpha[0];
    acc_o[j][2] *= alpha[1];
    acc_o[j][3] *= alpha[1];
  }
}

}  // namespace gannet::kernels::sm90
