// Pieces shared by the sm80 flash decode and prefill kernels: locating a CTA's query tile, the
// paged K/V tile loader, the CTA's key range, and the split-KV combine kernel.
//
// Split-KV (flash-decoding): each split writes its normalised partial O and its log2-sum-exp into
// the workspace ([cta][split][row][head_dim] f32, then [cta][split][row] f32), and a separate
// combine kernel merges them. A separate kernel (rather than "the last CTA merges") keeps the merge
// parallel -- one CTA per output row -- and needs no counters that other workspace users could
// clobber.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/attention/paged_attention.h"
#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/common/mma_sm80.cuh"

namespace gannet::kernels::sm80 {

// The (sequence, row tile) of grid tile `tile`: sequence s has q_len(s) * group rows cut into
// ceil(rows / block_m) tiles, numbered in sequence order. False past the last tile.
__device__ __forceinline__ bool FindTile(const int32_t* query_start, int num_seqs, int group,
                                         int block_m, int tile, int* seq, int* row_tile) {
  int first = 0;
  for (int s = 0; s < num_seqs; ++s) {
    const int rows = (query_start[s + 1] - query_start[s]) * group;
    const int n = (rows + block_m - 1) / block_m;
    if (tile < first + n) {
      *seq = s;
      *row_tile = tile - first;
      return true;
    }
    first += n;
  }
  return false;
}

// Rows [row0, row0 + rows_here) of a sequence's q_len x group row space, and the keys they see.
struct TileRange {
  int seq, q0, row0, rows_here;
  int lo, hi;  // keys [lo, hi): the union of the rows' windows (positions grow in a sequence)
};

__device__ __forceinline__ bool FindTileRange(const PagedAttentionParams& p, int group, int block_m,
                                              int tile, TileRange* t) {
  int row_tile = 0;
  if (!FindTile(p.query_start, p.num_seqs, group, block_m, tile, &t->seq, &row_tile)) return false;
  t->q0 = p.query_start[t->seq];
  const int q_rows = (p.query_start[t->seq + 1] - t->q0) * group;
  t->row0 = row_tile * block_m;
  t->rows_here = min(block_m, q_rows - t->row0);
  const int pos_first = p.positions[t->q0 + t->row0 / group];
  const int pos_last = p.positions[t->q0 + (t->row0 + t->rows_here - 1) / group];
  t->lo = p.window > 0 ? max(0, pos_first - p.window + 1) : 0;
  // Image-block mask: the last row's block may reach past its position (a block is one run of
  // the chunk, and its end is the furthest any row of the tile sees). Entries without the
  // kFlagImageBlocks capability are never given image_block.
  int last = pos_last;
  if (p.image_block != nullptr) {
    int u = t->q0 + (t->row0 + t->rows_here - 1) / group;
    const int b = p.image_block[u], end = p.query_start[t->seq + 1];
    if (b >= 0) {
      while (u + 1 < end && p.image_block[u + 1] == b) ++u;
      last = p.positions[u];
    }
  }
  t->hi = min(last + 1, p.seq_lens[t->seq]);
  return true;
}

// What a (tile, kv head, split) CTA works on: its share of the tile's key blocks and the
// sequence's page table.
struct SplitWork {
  int t_begin;  // first key block of this split, counted from TileRange::lo
  int n_tiles;  // key blocks in this split
  const int32_t* table;
};

// Where chunk ch (dims 8 ch .. 8 ch + 7) of a tile's query row r comes from: the (token, head)
// pair of KV head kvh's group; past the sequence's rows *ok is false (zero-fill, nothing read).
__device__ __forceinline__ const bf16* QChunkSource(const PagedAttentionParams& p,
                                                    const TileRange& t, int group, int kvh,
                                                    int head_dim, int r, int ch, bool* ok) {
  *ok = r < t.rows_here;
  const int gr = t.row0 + r;
  return static_cast<const bf16*>(p.q) +
         (*ok ? (t.q0 + gr / group) * p.q_stride +
                    static_cast<int64_t>(kvh * group + gr % group) * head_dim + ch * 8
              : 0);
}

// The metadata half of the prologue every flash kernel shares: per-row positions into sPos (-1
// marks padding rows, masked everywhere and never stored) and this split's key blocks. It reads
// only the step's metadata, which the host copies in before the step's first kernel and no kernel
// writes, so the decode kernels run it before their PDL wait.
template <int kBlockM, int kBlockN, int kThreads>
__device__ __forceinline__ SplitWork BeginFlashSplit(const PagedAttentionParams& p,
                                                     const TileRange& t, int group, int split,
                                                     int num_splits, int* sPos) {
  for (int r = threadIdx.x; r < kBlockM; r += kThreads) {
    sPos[r] = r < t.rows_here ? p.positions[t.q0 + (t.row0 + r) / group] : -1;
  }
  const int total_tiles = t.hi > t.lo ? (t.hi - t.lo + kBlockN - 1) / kBlockN : 0;
  const int per_split = (total_tiles + num_splits - 1) / num_splits;
  SplitWork w;
  w.t_begin = min(total_tiles, split * per_split);
  w.n_tiles = min(total_tiles, w.t_begin + per_split) - w.t_begin;
  w.table = p.page_table + static_cast<int64_t>(t.seq) * p.max_pages_per_seq;
  return w;
}

// The cp.async loads of the tile's Q rows -- (token, head) pairs of KV head kvh's query group,
// zero-filled past the sequence's rows -- into sQ (the caller commits them with its first K/V
// group). Q is the previous kernel's output: after the PDL wait.
template <int kHeadDim, int kBlockM, int kThreads, int kStride>
__device__ __forceinline__ void LoadFlashQ(const PagedAttentionParams& p, const TileRange& t,
                                           int group, int kvh, bf16* sQ) {
  constexpr int kChunksPerRow = kHeadDim / 8;  // 16-byte chunks
  for (int c = threadIdx.x; c < kBlockM * kChunksPerRow; c += kThreads) {
    const int r = c / kChunksPerRow, ch = c % kChunksPerRow;
    bool ok;
    const bf16* src = QChunkSource(p, t, group, kvh, kHeadDim, r, ch, &ok);
    CpAsync16(sQ + r * kStride + ch * 8, src, ok ? 16 : 0);
  }
}

// The whole prologue (the kernels that read their metadata after the wait): BeginFlashSplit, then
// LoadFlashQ.
template <int kHeadDim, int kBlockM, int kBlockN, int kThreads, int kStride>
__device__ __forceinline__ SplitWork BeginFlashTile(const PagedAttentionParams& p,
                                                    const TileRange& t, int group, int kvh,
                                                    int split, int num_splits, int* sPos,
                                                    bf16* sQ) {
  const SplitWork w =
      BeginFlashSplit<kBlockM, kBlockN, kThreads>(p, t, group, split, num_splits, sPos);
  LoadFlashQ<kHeadDim, kBlockM, kThreads, kStride>(p, t, group, kvh, sQ);
  return w;
}

// The key row a thread copies in a K/V tile load: each thread owns one key row (its page looked
// up once, no division in the copy loop) and every kThreadsPerRow-th 16-byte chunk of it, so a
// warp instruction moves whole row segments. Rows at or past `hi`, and holes (page -1), are
// zero-filled without touching global memory (ok false, row 0).
template <int kBlockN, int kThreads, int kChunks>
struct KvRowSlot {
  static_assert(kThreads % kBlockN == 0, "whole threads per key row");
  static constexpr int kThreadsPerRow = kThreads / kBlockN;
  static_assert(kChunks % kThreadsPerRow == 0, "whole chunks per thread");
  static constexpr int kChunksPerThread = kChunks / kThreadsPerRow;
  int r;    // the tile row
  int sub;  // the first chunk; then every kThreadsPerRow-th
  bool ok;
  int64_t row;  // (page * heads + kvh) * page_size + offset: the cache row of the key
  // The page of this thread's key row in the block at key0 (-1 at or past hi): the page table is
  // step metadata, so a decode kernel reads its first blocks' pages before the PDL wait.
  __device__ __forceinline__ static int PageOf(const int32_t* table, int page_size, int key0,
                                               int hi) {
    const int key = key0 + static_cast<int>(threadIdx.x) / kThreadsPerRow;
    return key < hi ? table[key / page_size] : -1;
  }
  __device__ __forceinline__ KvRowSlot(int page, int page_size, int num_kv_heads, int kvh,
                                       int key0) {
    r = threadIdx.x / kThreadsPerRow;
    sub = threadIdx.x % kThreadsPerRow;
    const int key = key0 + r;
    ok = page >= 0;
    row = ok ? (static_cast<int64_t>(page) * num_kv_heads + kvh) * page_size + key % page_size : 0;
  }
  __device__ __forceinline__ int chunk(int i) const { return sub + i * kThreadsPerRow; }
};

// Copies keys [key0, key0 + kBlockN) of one KV head into padded shared-memory tiles (V alone when
// k_base is null: single-store K=V, whose K the kernel derives into the K tile).
// `page`: the page of this thread's key row (KvRowSlot::PageOf).
template <int kHeadDim, int kBlockN, int kThreads, int kStride>
__device__ __forceinline__ void LoadKvTile(const bf16* k_base, const bf16* v_base, bf16* dk,
                                           bf16* dv, int page, int page_size, int num_kv_heads,
                                           int kvh, int key0) {
  using Slot = KvRowSlot<kBlockN, kThreads, kHeadDim / 8>;
  const Slot s(page, page_size, num_kv_heads, kvh, key0);
  const bool ok = s.ok;
  const int r = s.r;
  const bf16* ks = k_base != nullptr ? k_base + s.row * kHeadDim : nullptr;
  const bf16* vs = v_base + s.row * kHeadDim;
#pragma unroll
  for (int i = 0; i < Slot::kChunksPerThread; ++i) {
    const int ch = s.chunk(i);
    if (k_base != nullptr)
      CpAsync16(dk + r * kStride + ch * 8, ks + (ok ? ch * 8 : 0), ok ? 16 : 0);
    CpAsync16(dv + r * kStride + ch * 8, vs + (ok ? ch * 8 : 0), ok ? 16 : 0);
  }
}

// Output row pointer of row r of a tile.
__device__ __forceinline__ bf16* OutRow(const PagedAttentionParams& p, const TileRange& t,
                                        int group, int kvh, int head_dim, int r) {
  const int gr = t.row0 + r;
  return static_cast<bf16*>(p.out) + (t.q0 + gr / group) * p.out_stride +
         static_cast<int64_t>(kvh * group + gr % group) * head_dim;
}

// Workspace views of a split launch.
struct SplitWorkspace {
  float* o;    // [ctas, splits, block_m, head_dim]
  float* lse;  // [ctas, splits, block_m]
};
__host__ __device__ __forceinline__ SplitWorkspace SplitViews(void* ws, int ctas, int splits,
                                                              int block_m, int head_dim) {
  SplitWorkspace w;
  w.o = static_cast<float*>(ws);
  w.lse = w.o + static_cast<size_t>(ctas) * splits * block_m * head_dim;
  return w;
}

// Shared memory one block may use on sm_75 (Turing): the budget of the sm75 configurations.
inline constexpr int kSm75SmemBytes = 64 * 1024;

// The pages the first kStages - 1 tile loads start from (PrimeKvStages), read ahead: a decode
// kernel reads them before its PDL wait (the page table is step metadata). Single-staged, there
// are none: its one tile is loaded in the loop.
template <int kStages>
struct PrimedPages {
  static constexpr int kCount = kStages - 1;
  int page[kCount > 0 ? kCount : 1];
  template <typename Loader>
  __device__ __forceinline__ PrimedPages(const Loader& load_tile, int n_tiles) {
#pragma unroll
    for (int st = 0; st < kCount; ++st) page[st] = st < n_tiles ? load_tile.Page(st) : -1;
  }
};

// Primes the first kStages - 1 stages of a tile loader (bf16 or FP8), one cp.async group each
// (the Q copies issued before ride in the first; single-staged, they are a group of their own),
// from pages read ahead.
template <int kStages, typename Loader>
__device__ __forceinline__ void PrimeKvStages(const Loader& load_tile, int n_tiles,
                                              const PrimedPages<kStages>& pages) {
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < n_tiles) load_tile(st, st, pages.page[st]);
    CpAsyncCommit();
  }
  if constexpr (kStages == 1) CpAsyncCommit();
}
// The same, reading the pages now (the kernels that read metadata after their wait).
template <int kStages, typename Loader>
__device__ __forceinline__ void PrimeKvStages(const Loader& load_tile, int n_tiles) {
  PrimeKvStages<kStages>(load_tile, n_tiles, PrimedPages<kStages>(load_tile, n_tiles));
}

// cp.async groups a kernel may leave in flight when it waits for tile `it` at the top of its loop.
__host__ __device__ constexpr int KvWaitDepth(int stages) { return stages >= 2 ? stages - 2 : 0; }

// Called right after the loop-top barrier of tile `it`: issues the load kStages - 1 tiles ahead
// into the stage the barrier just freed. Single-staged (the sm_75 configurations that could not
// otherwise fit 64 KB), that is tile `it` itself, into the one stage: it waits for it and adds
// a barrier, so the tile's load is not overlapped with compute.
template <int kStages, typename Loader>
__device__ __forceinline__ void AdvanceKvPipeline(const Loader& load_tile, int it, int n_tiles) {
  if (it + kStages - 1 < n_tiles) load_tile((it + kStages - 1) % kStages, it + kStages - 1);
  CpAsyncCommit();
  if constexpr (kStages == 1) {
    CpAsyncWait<0>();
    __syncthreads();
  }
}

// Loads key block `tile` of a CTA's split into pipeline stage `stage` (LoadKvTile with the CTA's
// fixed arguments bound).
template <int kHeadDim, int kBlockN, int kThreads, int kStride>
struct KvTileLoader {
  const bf16* k_base;
  const bf16* v_base;
  bf16* sK;
  bf16* sV;
  const int32_t* table;
  int page_size, num_kv_heads, kvh;
  int key0;  // first key of the split's first block
  int hi;    // keys at or past hi are zero-filled
  using Slot = KvRowSlot<kBlockN, kThreads, kHeadDim / 8>;
  // The page of this thread's key row in block `tile` (read ahead of the load: see PrimeKvStages).
  __device__ __forceinline__ int Page(int tile) const {
    return Slot::PageOf(table, page_size, key0 + tile * kBlockN, hi);
  }
  __device__ __forceinline__ void operator()(int stage, int tile, int page) const {
    LoadKvTile<kHeadDim, kBlockN, kThreads, kStride>(
        k_base, v_base, sK + stage * kBlockN * kStride, sV + stage * kBlockN * kStride, page,
        page_size, num_kv_heads, kvh, key0 + tile * kBlockN);
  }
  __device__ __forceinline__ void operator()(int stage, int tile) const {
    (*this)(stage, tile, Page(tile));
  }
};

// FP8 KV (PagedAttentionParams::kv_fp8). The cp.async pipeline streams FP8 rows and their scales
// into kStages staging slots (half the bytes of bf16 per key), and the kernels' MMAs read them in
// place in fp16 (E4M3 converts to fp16 exactly): see the decode and prefill kernels' notes.
template <int kHeadDim, int kBlockN, int kStages>
struct Fp8Staging {
  // Row padding that keeps the decode kernel's fragment loads conflict-free: a half-warp reads
  // 8 bytes of each of 4 consecutive K rows (row stride = 8 words mod 32) and 8-16 bytes of every
  // other V row (stride = 4 words mod 16).
  static constexpr int kKRowBytes = kHeadDim + 32;
  static constexpr int kVRowBytes = kHeadDim + 16;
  static constexpr int kKTileBytes = kBlockN * kKRowBytes;
  static constexpr int kVTileBytes = kBlockN * kVRowBytes;
  // Per stage: K rows, V rows, K scales, V scales.
  static constexpr int kStageBytes = kKTileBytes + kVTileBytes + 2 * kBlockN * 4;
  static constexpr int kBytes = kStages * kStageBytes;

  // One stage's parts, for the loader (writing) and the kernels (reading).
  struct Stage {
    uint8_t* k;      // kBlockN rows of kKRowBytes
    uint8_t* v;      // kBlockN rows of kVRowBytes
    float* k_scale;  // [kBlockN]
    float* v_scale;
  };
  __device__ __forceinline__ static Stage At(uint8_t* staging, int stage) {
    uint8_t* k = staging + stage * kStageBytes;
    float* ks = reinterpret_cast<float*>(k + kKTileBytes + kVTileBytes);
    return {k, k + kKTileBytes, ks, ks + kBlockN};
  }
};

template <int kHeadDim, int kBlockN, int kThreads, int kStages>
struct Fp8KvTileLoader {
  using Staging = Fp8Staging<kHeadDim, kBlockN, kStages>;
  const uint8_t* k_base;
  const uint8_t* v_base;
  const float* ks_base;
  const float* vs_base;
  uint8_t* staging;  // Staging::kBytes
  const int32_t* table;
  int page_size, num_kv_heads, kvh;
  int key0;
  int hi;

  // LoadKvTile's mapping (KvRowSlot); the row's first thread also copies its two scales. A null
  // k_base (single-store K=V) loads V and its scale alone.
  using Slot = KvRowSlot<kBlockN, kThreads, kHeadDim / 16>;
  __device__ __forceinline__ int Page(int tile) const {
    return Slot::PageOf(table, page_size, key0 + tile * kBlockN, hi);
  }
  __device__ __forceinline__ void operator()(int stage, int tile) const {
    (*this)(stage, tile, Page(tile));
  }
  __device__ __forceinline__ void operator()(int stage, int tile, int page) const {
    const Slot s(page, page_size, num_kv_heads, kvh, key0 + tile * kBlockN);
    const bool ok = s.ok;
    const int r = s.r, sub = s.sub;
    const int64_t row = s.row;
    const auto dst = Staging::At(staging, stage);
    uint8_t* dk = dst.k + r * Staging::kKRowBytes;
    uint8_t* dv = dst.v + r * Staging::kVRowBytes;
#pragma unroll
    for (int i = 0; i < Slot::kChunksPerThread; ++i) {
      const int ch = s.chunk(i);
      if (k_base != nullptr)
        CpAsync16(dk + ch * 16, k_base + row * kHeadDim + (ok ? ch * 16 : 0), ok ? 16 : 0);
      CpAsync16(dv + ch * 16, v_base + row * kHeadDim + (ok ? ch * 16 : 0), ok ? 16 : 0);
    }
    if (sub == 0) {
      if (k_base != nullptr) CpAsync4(dst.k_scale + r, ks_base + row, ok ? 4 : 0);
      CpAsync4(dst.v_scale + r, vs_base + row, ok ? 4 : 0);
    }
  }
};

// The KV tile loader of a kernel's traits (bf16 or FP8 cache) over its shared memory: the bf16
// tiles at sK/sV, or the FP8 staging stages.
template <typename Tr>
__device__ __forceinline__ auto MakeKvLoader(const PagedAttentionParams& p, const SplitWork& work,
                                             const TileRange& t, int kvh, bf16* sK, bf16* sV,
                                             uint8_t* staging) {
  const int key0 = t.lo + work.t_begin * Tr::kBlockN;
  if constexpr (Tr::kFp8) {
    return Fp8KvTileLoader<Tr::kHeadDim, Tr::kBlockN, Tr::kThreads, Tr::kStages>{
        static_cast<const uint8_t*>(p.k_cache),
        static_cast<const uint8_t*>(p.v_cache),
        p.k_scale,
        p.v_scale,
        staging,
        work.table,
        p.page_size,
        p.num_kv_heads,
        kvh,
        key0,
        t.hi};
  } else {
    return KvTileLoader<Tr::kHeadDim, Tr::kBlockN, Tr::kThreads, Tr::kStride>{
        static_cast<const bf16*>(p.k_cache),
        static_cast<const bf16*>(p.v_cache),
        sK,
        sV,
        work.table,
        p.page_size,
        p.num_kv_heads,
        kvh,
        key0,
        t.hi};
  }
}

// Q of an FP8 kernel, once it has landed in sQ (bf16): made fp16 and permuted within every 32-dim
// block so that an ldmatrix A fragment pairs with the K fragment of an 8-byte FP8 load: shared
// column 16 s + 8 h + 2 t + e holds dim 8 t + 4 s + 2 h + e (step s of the pair, a0/a2 half h,
// lane t, element e). Each thread permutes whole blocks, so in place is safe.
template <int kHeadDim, int kBlockM, int kThreads, int kStride>
__device__ __forceinline__ void PermuteQForFp8(bf16* sQ) {
  constexpr int kBlocks = kBlockM * kHeadDim / 32;
  for (int b = threadIdx.x; b < kBlocks; b += kThreads) {
    bf16* blk = sQ + (b / (kHeadDim / 32)) * kStride + (b % (kHeadDim / 32)) * 32;
    float v[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = __bfloat162float(blk[i]);
    __half* out = reinterpret_cast<__half*>(blk);
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const int s = c >> 4, h = (c >> 3) & 1, t = (c >> 1) & 3, e = c & 1;
      out[c] = __float2half_rn(v[8 * t + 4 * s + 2 * h + e]);
    }
  }
}

// The K operand of an FP8 S = Q K^T for a pair of 16-dim steps: lane (g, t) loads dims
// 8t .. 8t + 7 of the 32-dim block of key g (`src`); b[0..1] serve the first step, b[2..3] the
// second (PermuteQForFp8's order).
__device__ __forceinline__ void Fp8KFragments(const uint8_t* src, uint32_t (&b)[4]) {
  const uint2 w = *reinterpret_cast<const uint2*>(src);
  b[0] = Fp8x2ToF16x2(w.x & 0xFFFFu);
  b[1] = Fp8x2ToF16x2(w.x >> 16);
  b[2] = Fp8x2ToF16x2(w.y & 0xFFFFu);
  b[3] = Fp8x2ToF16x2(w.y >> 16);
}

// The V operand of an FP8 P.V: lane (g, t) takes keys 2t, 2t + 1, 2t + 8, 2t + 9 of a 16-key step
// and owns kDT output dims g kDT .. g kDT + kDT - 1 (one contiguous load per key row);
// `src` points at key 2t's first owned byte.
template <int kDT>
__device__ __forceinline__ void LoadFp8VRows(const uint8_t* src, int row_bytes,
                                             uint32_t (&rows)[4][kDT / 4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint4* q = reinterpret_cast<const uint4*>(src + ((i & 1) + (i >> 1) * 8) * row_bytes);
    if constexpr (kDT == 8) {
      const uint2 v = *reinterpret_cast<const uint2*>(q);
      rows[i][0] = v.x, rows[i][1] = v.y;
    } else {
      static_assert(kDT % 16 == 0, "8, 16 or 32 dims a lane");
#pragma unroll
      for (int w = 0; w < kDT / 16; ++w) {
        const uint4 v = q[w];
        rows[i][4 * w] = v.x, rows[i][4 * w + 1] = v.y, rows[i][4 * w + 2] = v.z,
                    rows[i][4 * w + 3] = v.w;
      }
    }
  }
}
// B fragment of output n-tile dt: byte dt of keys (2t, 2t + 1) and (2t + 8, 2t + 9), as fp16.
template <int kWords>
__device__ __forceinline__ void Fp8VFragment(const uint32_t (&rows)[4][kWords], int dt,
                                             uint32_t* b) {
  const uint32_t sel = (dt & 3) | ((4 + (dt & 3)) << 4);
  b[0] = Fp8x2ToF16x2(__byte_perm(rows[0][dt >> 2], rows[1][dt >> 2], sel) & 0xFFFFu);
  b[1] = Fp8x2ToF16x2(__byte_perm(rows[2][dt >> 2], rows[3][dt >> 2], sel) & 0xFFFFu);
}

// ---- Single-store K=V (PagedAttentionParams::k_from_v) ----
// The stage holds V = v_norm(k_raw) alone, and K = RoPE(k_norm * V). Off the rotated dims K is
// k_norm * V, so Q carries the weight there (WeightQForKFromV, once per CTA) and S reads those
// dims of K straight from the V rows. The rotated dims -- pairs (i, i + h), i < R, whole 32-dim
// blocks [0, R) and [h, h + R) -- are derived once per tile by the whole CTA into the stage's
// unused K space (bf16 at their own columns of the K tile; FP8: fp16, unscaled -- the row's scale
// multiplies S's column as for a stored K -- at half index RotIndex(dim) of the K row), with
// QkvPrep's rotation (KFromVPair), so K matches the separately stored K to its rounding.
__device__ __forceinline__ bool KFromVRotated(int dim, int half, int rope_pairs) {
  return dim % half < rope_pairs;
}
__device__ __forceinline__ int KFromVRotIndex(int dim, int half, int rope_pairs) {
  return dim < half ? dim : rope_pairs + dim - half;
}

// Q's dims off the rotated pairs times k_norm, in place (sQ landed: bf16, or f16 with io_f16).
template <int kHeadDim, int kBlockM, int kThreads, int kStride>
__device__ __forceinline__ void WeightQForKFromV(bf16* sQ, const PagedAttentionParams& p) {
  constexpr int kHalf = kHeadDim / 2;
  for (int e = threadIdx.x; e < kBlockM * kHalf; e += kThreads) {
    const int r = e / kHalf, c = (e % kHalf) * 2;
    if (KFromVRotated(c, kHalf, p.rope_pairs)) continue;
    const float2 w = __ldg(reinterpret_cast<const float2*>(p.k_norm + c));
    if (p.io_f16) {
      __half2* q = reinterpret_cast<__half2*>(sQ + r * kStride + c);
      const float2 v = __half22float2(*q);
      *q = __floats2half2_rn(v.x * w.x, v.y * w.y);
    } else {
      __nv_bfloat162* q = reinterpret_cast<__nv_bfloat162*>(sQ + r * kStride + c);
      const float2 v = __bfloat1622float2(*q);
      *q = __floats2bfloat162_rn(v.x * w.x, v.y * w.y);
    }
  }
}

// A thread's share of the derivation: one rotated pair (kThreads % R == 0, FlashSupportsKFromV)
// for tile rows first, first + step, ... Those rows' positions advance by `step` keys, so after one
// accurate cos/sin per tile (QkvPrep's f32 angle and cosf/sinf at the thread's first row) the rest
// follow by rotating with the step's cos/sin: four FMAs a row instead of two range-reduced
// transcendentals, which made the derivation cost more than the V bytes it saves. The recurrence
// drifts by a few ulp over a tile's <= 32 rows, and it rotates by the exact step where QkvPrep
// rounds each row's angle to f32: at most half an ulp of pos * inv_freq apart (6e-5 rad at
// position 1500, 2e-3 at 32k for the fastest pair; bf16 keeps 3.9e-3).
template <int kHeadDim, int kThreads>
struct KFromVPair {
  int i = 0, first = kThreads, step = 1;
  float inv_freq = 0.f, wa = 0.f, wb = 0.f;
  float step_cos = 1.f, step_sin = 0.f;
  KFromVPair() = default;  // nothing to derive (kernels without K from V)
  __device__ __forceinline__ explicit KFromVPair(const PagedAttentionParams& p) {
    if (!p.k_from_v || p.rope_pairs <= 0) return;  // nothing to derive
    i = threadIdx.x % p.rope_pairs;
    first = threadIdx.x / p.rope_pairs;
    step = kThreads / p.rope_pairs;
    inv_freq = p.inv_freq[i];
    wa = __ldg(p.k_norm + i);
    wb = __ldg(p.k_norm + i + kHeadDim / 2);
    const float a = inv_freq * static_cast<float>(step);
    step_cos = cosf(a);
    step_sin = sinf(a);
  }
  // (cos, sin) of key position `pos`: QkvPrep's f32 angle and functions.
  __device__ __forceinline__ float2 CosSin(int pos) const {
    const float angle = inv_freq * static_cast<float>(pos);
    return make_float2(cosf(angle), sinf(angle));
  }
  __device__ __forceinline__ void Advance(float2& cs) const {
    cs = make_float2(cs.x * step_cos - cs.y * step_sin, cs.y * step_cos + cs.x * step_sin);
  }
  // Rows [0, kBlockN) of one K tile (key0 = row 0's position): load(j, dim) is V's element of row
  // j as f32 (FP8: unscaled), store(j, i, x0, x1) writes the rotated pair's two K values.
  template <int kBlockN, typename Load, typename Store>
  __device__ __forceinline__ void Derive(int key0, Load load, Store store) const {
    if (first >= kBlockN) return;
    float2 cs = CosSin(key0 + first);
    for (int j = first; j < kBlockN; j += step) {
      const float a = load(j, i) * wa;
      const float b = load(j, i + kHeadDim / 2) * wb;
      store(j, i, a * cs.x - b * cs.y, b * cs.x + a * cs.y);
      Advance(cs);
    }
  }
};

// One K tile's rotated dims into the stage's K space, then the barrier S waits on: bf16 at their
// own columns of the K tile, FP8 as fp16 at half RotIndex of the K rows (the flash kernels with
// kKFromV call it once a tile has landed).
template <typename Tr, typename Pair>
__device__ __forceinline__ void DeriveTileRotatedK(const Pair& kfv, const PagedAttentionParams& p,
                                                   const typename Tr::Fp8::Stage& f8,
                                                   const bf16* cV, bf16* cK, int key0) {
  if (p.rope_pairs <= 0) return;
  constexpr int kHalf = Tr::kHeadDim / 2;
  if constexpr (Tr::kFp8) {
    using Fp8 = typename Tr::Fp8;
    kfv.template Derive<Tr::kBlockN>(
        key0, [&](int j, int d) { return Fp8ToFloat(f8.v[j * Fp8::kVRowBytes + d]); },
        [&](int j, int i, float x0, float x1) {
          __half* row = reinterpret_cast<__half*>(f8.k + j * Fp8::kKRowBytes);
          row[i] = __float2half_rn(x0);
          row[p.rope_pairs + i] = __float2half_rn(x1);
        });
  } else {
    kfv.template Derive<Tr::kBlockN>(
        key0, [&](int j, int d) { return __bfloat162float(cV[j * Tr::kStride + d]); },
        [&](int j, int i, float x0, float x1) {
          cK[j * Tr::kStride + i] = __float2bfloat16_rn(x0);
          cK[j * Tr::kStride + i + kHalf] = __float2bfloat16_rn(x1);
        });
  }
  __syncthreads();
}

// The K operand of S for one 32-dim block `dim` of key row `row` in an FP8 stage (the pair of
// 16-dim steps Fp8KFragments serves): the stored K, or with kKFromV the derived fp16 dims or the
// V row's bytes.
template <typename Fp8, bool kKFromV>
__device__ __forceinline__ void Fp8KBlock(const PagedAttentionParams& p,
                                          const typename Fp8::Stage& f8, int row, int dim, int half,
                                          uint32_t (&b)[4]) {
  const int lane = threadIdx.x & 31;
  if constexpr (!kKFromV) {
    Fp8KFragments(f8.k + row * Fp8::kKRowBytes + dim + (lane & 3) * 8, b);
  } else if (KFromVRotated(dim, half, p.rope_pairs)) {
    const uint4 w = *reinterpret_cast<const uint4*>(
        f8.k + row * Fp8::kKRowBytes +
        2 * (KFromVRotIndex(dim, half, p.rope_pairs) + (lane & 3) * 8));
    b[0] = w.x, b[1] = w.y, b[2] = w.z, b[3] = w.w;
  } else {
    Fp8KFragments(f8.v + row * Fp8::kVRowBytes + dim + (lane & 3) * 8, b);
  }
}

// The epilogue every flash kernel shares. A warp holds rows r_lo and r_lo + 8 of the tile (the
// m16n8 accumulator layout) for its dims [col0, col0 + 8 kDT): without splits it writes the
// normalised bf16 output rows; with splits, this split's normalised f32 partial and, from the
// warps with lse_writer set (one per row), its log2-sum-exp for FlashCombineKernel. Only the
// tile's rows are written, split or not: the combine reads no others, and a decode tile of GQA 2
// is 2 rows of 16 (a 31B sliding layer at 80 sequences wrote 27 MB of padding rows a call).
// kDimMajor (the FP8 decode kernel, whose P.V columns are permuted so that each lane's V bytes are
// contiguous): acc_o[dt][2h + e] is dim col0 + (2 (lane & 3) + e) kDT + dt, not col0 + 8 dt +
// 2 (lane & 3) + e.
template <int kHeadDim, int kBlockM, int kDT, bool kDimMajor = false>
__device__ __forceinline__ void StoreFlashResult(const PagedAttentionParams& p, const TileRange& t,
                                                 int group, int kvh, int split, int num_splits,
                                                 void* workspace, const float (&acc_o)[kDT][4],
                                                 const float (&m_run)[2], const float (&l_run)[2],
                                                 int r_lo, int col0, bool lse_writer) {
  const int lane = threadIdx.x & 31;
  const float inv_l[2] = {l_run[0] > 0.f ? 1.f / l_run[0] : 0.f,
                          l_run[1] > 0.f ? 1.f / l_run[1] : 0.f};
  if constexpr (kDimMajor) {
    const int cta = blockIdx.x * gridDim.y + kvh;
    const SplitWorkspace w =
        SplitViews(workspace, gridDim.x * gridDim.y, num_splits, kBlockM, kHeadDim);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r_lo + 8 * h;
      if (r >= t.rows_here) continue;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c0 = col0 + (2 * (lane & 3) + e) * kDT;
        if (num_splits == 1) {
          bf16* o = OutRow(p, t, group, kvh, kHeadDim, r) + c0;
#pragma unroll
          for (int dt = 0; dt < kDT; dt += 2) {
            *reinterpret_cast<uint32_t*>(o + dt) =
                PackBf16x2(acc_o[dt][2 * h + e] * inv_l[h], acc_o[dt + 1][2 * h + e] * inv_l[h]);
          }
        } else {
          float* o =
              w.o + ((static_cast<size_t>(cta) * num_splits + split) * kBlockM + r) * kHeadDim + c0;
#pragma unroll
          for (int dt = 0; dt < kDT; dt += 2) {
            *reinterpret_cast<float2*>(o + dt) =
                make_float2(acc_o[dt][2 * h + e] * inv_l[h], acc_o[dt + 1][2 * h + e] * inv_l[h]);
          }
        }
      }
      if (num_splits > 1 && lse_writer && (lane & 3) == 0) {
        w.lse[(static_cast<size_t>(cta) * num_splits + split) * kBlockM + r] =
            l_run[h] > 0.f ? m_run[h] + log2f(l_run[h]) : -INFINITY;
      }
    }
    return;
  }
  if (num_splits == 1) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r_lo + 8 * h;
      if (r >= t.rows_here) continue;
      bf16* o = OutRow(p, t, group, kvh, kHeadDim, r) + col0 + (lane & 3) * 2;
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt) {
        *reinterpret_cast<uint32_t*>(o + dt * 8) =
            PackBf16x2(acc_o[dt][2 * h] * inv_l[h], acc_o[dt][2 * h + 1] * inv_l[h]);
      }
    }
    return;
  }
  const int cta = blockIdx.x * gridDim.y + kvh;
  const SplitWorkspace w =
      SplitViews(workspace, gridDim.x * gridDim.y, num_splits, kBlockM, kHeadDim);
  float* my_o = w.o + (static_cast<size_t>(cta) * num_splits + split) * kBlockM * kHeadDim;
  float* my_lse = w.lse + (static_cast<size_t>(cta) * num_splits + split) * kBlockM;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = r_lo + 8 * h;
    if (r >= t.rows_here) continue;
    float* o = my_o + r * kHeadDim + col0 + (lane & 3) * 2;
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt) {
      *reinterpret_cast<float2*>(o + dt * 8) =
          make_float2(acc_o[dt][2 * h] * inv_l[h], acc_o[dt][2 * h + 1] * inv_l[h]);
    }
    if (lse_writer && (lane & 3) == 0) {
      my_lse[r] = l_run[h] > 0.f ? m_run[h] + log2f(l_run[h]) : -INFINITY;
    }
  }
}

// The merge of one row of a (tile, kv head): its splits' partials weighted by their
// log2-sum-exps (FlashCombineKernel).
template <int kHeadDim, int kBlockM>
__device__ __forceinline__ void CombineRow(const PagedAttentionParams& p, const TileRange& t,
                                           int group, int kvh, int r, int num_splits,
                                           void* workspace) {
  const int cta = blockIdx.x * gridDim.y + kvh;
  const SplitWorkspace w =
      SplitViews(workspace, gridDim.x * gridDim.y, num_splits, kBlockM, kHeadDim);
  const float* lse = w.lse + static_cast<size_t>(cta) * num_splits * kBlockM + r;
  const float* o =
      w.o + (static_cast<size_t>(cta) * num_splits * kBlockM + r) * kHeadDim + threadIdx.x * 4;
  // The merge is latency-bound: each batch issues all its splits' lse and partial loads at once
  // (the partial loads do not wait for the lse) and folds them in with a running maximum, so a
  // decode step's merge costs one memory round trip per 16 splits.
  constexpr int kBatch = 16;
  float lmax = -INFINITY, wsum = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int s0 = 0; s0 < num_splits; s0 += kBatch) {
    float l[kBatch];
    float4 x[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int s = s0 + j;
      l[j] = s < num_splits ? lse[s * kBlockM] : -INFINITY;
      x[j] = s < num_splits
                 ? *reinterpret_cast<const float4*>(o + static_cast<size_t>(s) * kBlockM * kHeadDim)
                 : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float bmax = lmax;
#pragma unroll
    for (int j = 0; j < kBatch; ++j) bmax = fmaxf(bmax, l[j]);
    if (bmax == -INFINITY) continue;
    const float rescale = lmax == -INFINITY ? 0.f : exp2f(lmax - bmax);
    wsum *= rescale;
    acc.x *= rescale;
    acc.y *= rescale;
    acc.z *= rescale;
    acc.w *= rescale;
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      // Empty splits (no keys) carry -inf and an unwritten partial: weight 0 and the partial
      // replaced, never 0 * garbage.
      const bool live = l[j] != -INFINITY;
      const float wgt = live ? exp2f(l[j] - bmax) : 0.f;
      const float4 v = live ? x[j] : make_float4(0.f, 0.f, 0.f, 0.f);
      wsum += wgt;
      acc.x += wgt * v.x;
      acc.y += wgt * v.y;
      acc.z += wgt * v.z;
      acc.w += wgt * v.w;
    }
    lmax = bmax;
  }
  const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
  bf16* out =
      OutRow(p, t, group, kvh, kHeadDim, r) + threadIdx.x * 4;  // 2-byte elements either way
  if (p.io_f16) {
    reinterpret_cast<__half2*>(out)[0] = __floats2half2_rn(acc.x * inv, acc.y * inv);
    reinterpret_cast<__half2*>(out)[1] = __floats2half2_rn(acc.z * inv, acc.w * inv);
  } else {
    reinterpret_cast<__nv_bfloat162*>(out)[0] = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
    reinterpret_cast<__nv_bfloat162*>(out)[1] = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
  }
}

// CTAs per (tile, kv head) along z, kCombineRows rows each, enough for the rows a tile can hold
// (group x the longest query, at most kBlockM); head_dim / 4 threads a row, 4 dims each. A
// decode tile of GQA 2 takes one CTA and one of GQA 8 two, every row at once. (A CTA per
// possible row made a decode step's merge mostly empty CTAs: a 31B sliding layer at 80 sequences
// launched 23040 of 64 threads, 2 of every 16 with a row, and took 68 us on an H200.) The loop
// keeps every row covered whatever the grid. kMinArch only keeps the sm75 entries'
// instantiation (PTX-only in the developer build) apart from the sm80 entries'.
constexpr int kCombineRows = 4;
template <int kHeadDim, int kBlockM, int kMinArch>
__global__ void __launch_bounds__(kHeadDim / 4 * kCombineRows)
    FlashCombineKernel(const PagedAttentionParams p, int num_splits, void* workspace) {
  const int group = p.num_q_heads / p.num_kv_heads;
  const int kvh = blockIdx.y;
  TileRange t;
  // The tile's rows are step metadata (read before the wait); the partials are the split
  // kernel's output.
  const bool has_tile = FindTileRange(p, group, kBlockM, blockIdx.x, &t);
  PdlEnter();
  if (!has_tile) return;
  const int stride = gridDim.z * kCombineRows;
  for (int r = blockIdx.z * kCombineRows + threadIdx.y; r < t.rows_here; r += stride) {
    CombineRow<kHeadDim, kBlockM>(p, t, group, kvh, r, num_splits, workspace);
  }
}

template <int kHeadDim, int kBlockM, int kMinArch>
cudaError_t LaunchFlashCombine(const PagedAttentionParams& p, dim3 flash_grid, int num_splits,
                               void* workspace, cudaStream_t stream) {
  const int group = p.num_q_heads / p.num_kv_heads;
  const int rows = std::max(1, std::min(kBlockM, group * std::max(1, p.max_query_len)));
  dim3 grid(flash_grid.x, flash_grid.y, (rows + kCombineRows - 1) / kCombineRows);
  Launch(FlashCombineKernel<kHeadDim, kBlockM, kMinArch>, grid, dim3(kHeadDim / 4, kCombineRows), 0,
         stream, p, num_splits, workspace);
  return cudaGetLastError();
}

template <typename Tr>
FlashConfig MakeFlashConfig() {
  return {Tr::kHeadDim, Tr::kBlockM, Tr::kBlockN, Tr::kThreads, Tr::kStages, Tr::kSmemBytes};
}

// Launches a flash kernel over (tiles, kv heads, splits), then the split merge when it split.
template <typename Tr>
cudaError_t LaunchFlashKernel(void (*kernel)(const PagedAttentionParams, int, void*),
                              const PagedAttentionParams& p, int num_splits, void* workspace,
                              cudaStream_t stream) {
  if (p.head_dim != Tr::kHeadDim || p.num_kv_heads <= 0 || num_splits < 1)
    return cudaErrorInvalidValue;
  if (num_splits > 1 && workspace == nullptr) return cudaErrorInvalidValue;
  // fp16 q/out: only the Volta kernels read and write them (their operands are fp16 anyway).
  if (p.io_f16 && Tr::kMinArch != 700) return cudaErrorInvalidValue;
  // Opting into large shared memory is per device; set it on every launch (cheap, and legal while
  // a stream is being captured) instead of keeping per-process state.
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (err != cudaSuccess) return err;
  const int group = p.num_q_heads / p.num_kv_heads;
  dim3 grid(FlashGridTiles(MakeFlashConfig<Tr>(), p.num_tokens, p.num_seqs, group), p.num_kv_heads,
            num_splits);
  Launch(kernel, grid, Tr::kThreads, Tr::kSmemBytes, stream, p, num_splits, workspace);
  err = cudaGetLastError();
  if (err != cudaSuccess || num_splits == 1) return err;
  return LaunchFlashCombine<Tr::kHeadDim, Tr::kBlockM, Tr::kMinArch>(p, grid, num_splits, workspace,
                                                                     stream);
}

}  // namespace gannet::kernels::sm80
