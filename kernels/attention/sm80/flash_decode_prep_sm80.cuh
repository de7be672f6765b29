// QKV prep fused into the sm80 decode kernel (AttentionPrep, paged_attention.h). After the PDL wait
// the kernel's query rows land raw in sQ and the step's new keys raw in their K/V stages (the tile
// loader reads them from the projection: FreshKeys); each such row is then prepped in place by one
// warp with QkvPrep's per-row code (qkv_prep_row.cuh), and the CTA that owns a new key also
// writes it to the cache. A batch-1 layer's chain thus loses the prep kernel: its launch, its
// wait, its load and store round trips, and the attention's load of what it stored.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/attention/paged_attention.h"
#include "kernels/attention/sm80/flash_common_sm80.cuh"
#include "kernels/rope/qkv_prep_row.cuh"

namespace gannet::kernels::sm80 {

// The prep's constants for this lane's pairs, read before the PDL wait (weights and step
// metadata): the q and k norms' weights and the rotation at `pos`, the position of the tile's
// first row -- every row's and the new key's at batch-1 decode. Other positions rotate with
// angles computed where they are used.
template <int kHeadDim>
struct DecodePrep {
  static constexpr int kPairs = PrepPairsFor(kHeadDim);
  NormWeights<kPairs> qw, kw;
  RopeAngles<kPairs> rope;
  int pos = -1;
  __device__ __forceinline__ void Load(const PagedAttentionParams& p, int at) {
    qw = LoadNormWeights<kPairs>(p.prep.q_norm, kHeadDim);
    kw = LoadNormWeights<kPairs>(p.prep.k_norm, kHeadDim);
    rope = RopeAt<kPairs>(p.inv_freq, kHeadDim, at);
    pos = at;
  }
  __device__ __forceinline__ RopeAngles<kPairs> RopeFor(const PagedAttentionParams& p, int at) const {
    return at == pos ? rope : RopeAt<kPairs>(p.inv_freq, kHeadDim, at);
  }
};

// Where the new keys of the CTA's sequence come from (FreshKeys): token q0 + j's K and V rows of
// the projection at KV head kvh, for key fresh + j. Inactive without a fused prep that stores KV.
__device__ __forceinline__ FreshKeys FreshKeysOf(const PagedAttentionParams& p, const TileRange& t,
                                                 int kvh, int fresh) {
  FreshKeys fk;
  if (!p.prep.on || !p.prep.has_kv) return fk;
  const bf16* row = static_cast<const bf16*>(p.q) + static_cast<int64_t>(t.q0) * p.q_stride +
                    static_cast<int64_t>(kvh) * p.head_dim;
  fk.fresh = fresh;
  fk.k = row + p.prep.k_offset;
  fk.v = row + p.prep.v_offset;
  fk.ld = p.q_stride;
  return fk;
}

// One row prepped by the calling warp (QkvPrep's NormRope: `w`, then `rope` unless null) from its
// raw values at `src` (the row itself, or the projection's) into shared-memory `row`, and into
// `global` as well unless null.
template <int kHeadDim, int kPairs>
__device__ __forceinline__ void PrepRow(const bf16* src, bf16* row, const NormWeights<kPairs>& w,
                                        const RopeAngles<kPairs>* rope, float eps, bf16* global) {
  const HeadRegs<kPairs> h = NormRope<kPairs>(LoadHead<kPairs>(src, kHeadDim), w, eps, rope, kHeadDim);
  StoreHead(h, kHeadDim, row);
  if (global != nullptr) StoreHead(h, kHeadDim, global);
}

// The keys of tiles [tile_lo, tile_hi) of the CTA's split that are new this step (at or past
// `fresh`, below the tile's hi).
struct FreshRange {
  int first = 0, count = 0;
};
template <int kBlockN>
__device__ __forceinline__ FreshRange FreshIn(const TileRange& t, int split_key0, int tile_lo,
                                              int tile_hi, int fresh) {
  const int lo = max(fresh, split_key0 + tile_lo * kBlockN);
  const int hi = min(t.hi, split_key0 + tile_hi * kBlockN);
  return {lo, max(0, hi - lo)};
}

// The prep's rows, one warp each: the tile's query rows in sQ when with_q (with `c`: the
// prologue's call; a call in the kernel's loop passes none and reads K's constants per row), and the new keys of
// `keys` (V, then K when a K cache is stored) in their stages (`stage_k(tile)` / `stage_v(tile)`:
// the tile's K and V rows), from their raw values there, or from the projection (`raw`) when the
// stage holds the cache's stale rows (a tile loaded in the loop). A new key's owner -- the CTA
// whose row tile holds the key's token (the key is in this split) -- writes it to the cache row
// its page gives. The caller's barrier follows.
template <typename Tr, typename StageK, typename StageV>
__device__ __forceinline__ void PrepDecodeRows(const PagedAttentionParams& p, const TileRange& t,
                                               const SplitWork& work, const DecodePrep<Tr::kHeadDim>* c,
                                               int group, int kvh, int split_key0, int fresh,
                                               bool with_q, FreshRange keys, bf16* sQ, const int* sPos,
                                               StageK stage_k, StageV stage_v, const FreshKeys* raw) {
  constexpr int kHeadDim = Tr::kHeadDim, kPairs = DecodePrep<kHeadDim>::kPairs;
  const int warp = threadIdx.x >> 5;
  const int nq = with_q ? t.rows_here : 0;
  const bool store_k = p.k_cache != nullptr;  // null: single-store K=V, V alone
  const int parts = store_k ? 2 : 1;
  const int items = nq + keys.count * parts;
  for (int i = warp; i < items; i += Tr::kWarps) {
    if (i < nq) {  // with_q: the prologue's call, which has the constants
      const RopeAngles<kPairs> rope = c->RopeFor(p, sPos[i]);
      bf16* row = sQ + i * Tr::kStride;
      PrepRow<kHeadDim>(row, row, c->qw, &rope, p.prep.eps, nullptr);
      continue;
    }
    const int key = keys.first + (i - nq) / parts;
    const bool is_k = (i - nq) % parts == 1;
    const int tile = (key - split_key0) / Tr::kBlockN, r = (key - split_key0) % Tr::kBlockN;
    const int j = (key - fresh) * group;  // the key's token's first row in the sequence
    const bool owner = j >= t.row0 && j < t.row0 + t.rows_here;
    const int page = owner ? work.table[key / p.page_size] : -1;
    bf16* global = nullptr;
    if (page >= 0) {
      const int64_t row = (static_cast<int64_t>(page) * p.num_kv_heads + kvh) * p.page_size + key % p.page_size;
      global = static_cast<bf16*>(const_cast<void*>(is_k ? p.k_cache : p.v_cache)) + row * kHeadDim;
    }
    bf16* row = (is_k ? stage_k(tile) : stage_v(tile)) + r * Tr::kStride;
    const bf16* src = row;
    if (raw != nullptr) src = (is_k ? raw->k : raw->v) + static_cast<int64_t>(key - fresh) * raw->ld;
    if (is_k) {
      if (c != nullptr) {
        const RopeAngles<kPairs> rope = c->RopeFor(p, key);
        PrepRow<kHeadDim>(src, row, c->kw, &rope, p.prep.eps, global);
      } else {  // read here, not held through the caller's loop
        const RopeAngles<kPairs> rope = RopeAt<kPairs>(p.inv_freq, kHeadDim, key);
        PrepRow<kHeadDim>(src, row, LoadNormWeights<kPairs>(p.prep.k_norm, kHeadDim), &rope, p.prep.eps,
                          global);
      }
    } else {
      PrepRow<kHeadDim>(src, row, LoadNormWeights<kPairs>(nullptr, kHeadDim),
                        static_cast<const RopeAngles<kPairs>*>(nullptr), p.prep.eps, global);
    }
  }
}

}  // namespace gannet::kernels::sm80
