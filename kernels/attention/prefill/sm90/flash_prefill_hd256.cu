// hd256 prefill / extend attention on Hopper tensor cores (wgmma, sm_90a): the sliding layers of
// every Gemma-4 variant. A CTA owns 128 query rows (GQA-packed: (token, head) pairs of one
// sequence and one KV head's group), as two warpgroups of 64 rows that share each K/V tile.
//
// Per 64-key tile: S = Q K^T is 16 wgmma m64n64k16 steps straight from shared memory (Q and K
// both K-major); the row softmax runs in the accumulator registers (a warp holds whole rows: no
// cross-warp exchange); P goes from those registers into the A operand of O += P V, 4 wgmma
// m64n256k16 steps with V read MN-major (transposed) in place. K/V tiles stream through a 2-stage
// cp.async pipeline, placed in the core-matrix layout wgmma reads (kernels/common/wgmma_sm90.cuh;
// the same placement serves K as K-major B and V as MN-major B). Masking, splits and the epilogue
// are the sm80 kernels' (flash_common_sm80.cuh).
//
// Not yet: TMA, warp specialisation, swizzled layouts, overlapping softmax with the next GEMM.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/paged_attention.h"
#include "kernels/attention/sm80/flash_common_sm80.cuh"
#include "kernels/common/mma_sm80.cuh"
#include "kernels/common/wgmma_sm90.cuh"

namespace gannet::kernels::sm90 {
namespace {

using sm80::CpAsync16;
using sm80::CpAsyncCommit;
using sm80::CpAsyncWait;
using sm80::PackBf16x2;

struct Traits {
  static constexpr int kMinArch = 900;
  static constexpr int kHeadDim = 256;
  static constexpr int kBlockM = 128;  // two warpgroups x 64 rows
  static constexpr int kBlockN = 64;
  static constexpr int kStages = 2;
  static constexpr int kThreads = 256;
  static constexpr int kChunks = kHeadDim / 8;         // 16-byte chunks of a row
  static constexpr int kQBytes = kBlockM * kHeadDim * 2;
  static constexpr int kTileBytes = kBlockN * kHeadDim * 2;
  static constexpr int kSmemBytes = kQBytes + kStages * 2 * kTileBytes + kBlockM * 4;
};

// Byte offset of chunk c (dims 8c .. 8c + 7) of row r in a [rows][kHeadDim] tile laid out in
// core matrices: core (row group r / 8, chunk c) at (c * rows / 8 + r / 8) * 128, row r % 8 at
// 16 (r % 8) inside. K-major with LBO = rows * 16 (next chunk) and SBO = 128 (next row group);
// for V the same bytes are MN-major with LBO = 128 (next 8 keys) and SBO = rows * 16 (next 8 dims).
__device__ __forceinline__ int CoreOffset(int r, int c, int rows) {
  return (c * (rows / 8) + r / 8) * 128 + (r % 8) * 16;
}

__global__ void __launch_bounds__(Traits::kThreads, 1)
    FlashPrefillSm90Kernel(const PagedAttentionParams p, int num_splits, void* workspace) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Tr = Traits;
  constexpr int kHeadDim = Tr::kHeadDim, kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN;
  constexpr float kLog2e = 1.4426950408889634f;
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* sQ = smem;                                  // 2 x [64][256], core layout
  unsigned char* sKV = smem + Tr::kQBytes;                   // stage s: K at 2s, V at 2s + 1
  int* sPos = reinterpret_cast<int*>(sKV + Tr::kStages * 2 * Tr::kTileBytes);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wg = warp / 4, wq = warp % 4;  // warpgroup, warp within it
  const int kvh = blockIdx.y, split = blockIdx.z;
  const int group = p.num_q_heads / p.num_kv_heads;
  sm80::TileRange t;
  if (!sm80::FindTileRange(p, group, kBlockM, blockIdx.x, &t)) return;

  // Rows' positions (-1: padding), and Q into the core layout (zero past the sequence's rows).
  for (int r = tid; r < kBlockM; r += Tr::kThreads) {
    sPos[r] = r < t.rows_here ? p.positions[t.q0 + (t.row0 + r) / group] : -1;
  }
  for (int c = tid; c < kBlockM * Tr::kChunks; c += Tr::kThreads) {
    const int r = c / Tr::kChunks, ch = c % Tr::kChunks;
    const bool ok = r < t.rows_here;
    const int gr = t.row0 + r;
    const bf16* src = static_cast<const bf16*>(p.q) +
                      (ok ? (t.q0 + gr / group) * p.q_stride +
                                static_cast<int64_t>(kvh * group + gr % group) * kHeadDim + ch * 8
                          : 0);
    CpAsync16(sQ + (r / 64) * (64 * kHeadDim * 2) + CoreOffset(r % 64, ch, 64), src, ok ? 16 : 0);
  }
  const int total_tiles = t.hi > t.lo ? (t.hi - t.lo + kBlockN - 1) / kBlockN : 0;
  const int per_split = (total_tiles + num_splits - 1) / num_splits;
  const int t_begin = min(total_tiles, split * per_split);
  const int n_tiles = min(total_tiles, t_begin + per_split) - t_begin;
  const int32_t* table = p.page_table + static_cast<int64_t>(t.seq) * p.max_pages_per_seq;
  const int key_base = t.lo + t_begin * kBlockN;

  // K/V tile loader: 4 threads per key (its page looked up once), 8 chunks of K and V each.
  auto load_tile = [&](int stage, int tile) {
    const int r = tid / 4, sub = tid % 4;
    const int key = key_base + tile * kBlockN + r;
    const int page = key < t.hi ? table[key / p.page_size] : -1;
    const bool ok = page >= 0;
    const int64_t row = ok ? (static_cast<int64_t>(page) * p.num_kv_heads + kvh) * p.page_size + key % p.page_size : 0;
    const bf16* ks = static_cast<const bf16*>(p.k_cache) + row * kHeadDim;
    const bf16* vs = static_cast<const bf16*>(p.v_cache) + row * kHeadDim;
    unsigned char* dk = sKV + (2 * stage) * Tr::kTileBytes;
    unsigned char* dv = dk + Tr::kTileBytes;
#pragma unroll
    for (int i = 0; i < Tr::kChunks / 4; ++i) {
      const int ch = sub + 4 * i;
      CpAsync16(dk + CoreOffset(r, ch, kBlockN), ks + (ok ? ch * 8 : 0), ok ? 16 : 0);
      CpAsync16(dv + CoreOffset(r, ch, kBlockN), vs + (ok ? ch * 8 : 0), ok ? 16 : 0);
    }
  };
  if (n_tiles > 0) load_tile(0, 0);
  CpAsyncCommit();

  float acc_o[32][4];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc_o[i][0] = acc_o[i][1] = acc_o[i][2] = acc_o[i][3] = 0.f;
  float(&acc_flat)[128] = *reinterpret_cast<float(*)[128]>(&acc_o[0][0]);
  float m_run[2] = {-INFINITY, -INFINITY};  // rows g and g + 8 of the warp, log2 domain
  float l_run[2] = {0.f, 0.f};
  const float scale2 = p.scale * kLog2e;
  const int r_lo = wg * 64 + wq * 16 + (lane >> 2);
  const unsigned char* my_q = sQ + wg * (64 * kHeadDim * 2);

  for (int it = 0; it < n_tiles; ++it) {
    CpAsyncWait<0>();
    FenceProxyAsync();
    __syncthreads();  // tile `it` landed for every thread; the other stage is free again
    if (it + 1 < n_tiles) load_tile((it + 1) % Tr::kStages, it + 1);
    CpAsyncCommit();
    const unsigned char* cK = sKV + (2 * (it % Tr::kStages)) * Tr::kTileBytes;
    const unsigned char* cV = cK + Tr::kTileBytes;
    const int pos0 = sPos[r_lo], pos1 = sPos[r_lo + 8];

    // ---- S = Q K^T: 64 rows x 64 keys per warpgroup ----
    float s[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] = 0.f;
    WgmmaFence();
#pragma unroll
    for (int ks = 0; ks < kHeadDim / 16; ++ks) {
      WgmmaSS_m64n64k16(s, SmemDesc(my_q + ks * 2 * 1024, 1024, 128),
                        SmemDesc(cK + ks * 2 * (kBlockN / 8) * 128, (kBlockN / 8) * 128, 128), ks > 0 ? 1 : 0);
    }
    WgmmaCommit();
    WgmmaWaitAll();

    // ---- mask, online softmax over the warp's own rows ----
    const int key0 = key_base + it * kBlockN;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + 8 * j + 2 * (lane & 3) + (e & 1);
        const int pos = e < 2 ? pos0 : pos1;
        const bool ok = key <= pos && (p.window <= 0 || key > pos - p.window);
        s[4 * j + e] = ok ? s[4 * j + e] * scale2 : -INFINITY;
        mx[e >> 1] = fmaxf(mx[e >> 1], s[4 * j + e]);
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
    uint32_t pa[4][4];  // P as the A operand, one 16-key step per entry
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float p0 = exp2f(s[4 * j] - m_use[0]), p1 = exp2f(s[4 * j + 1] - m_use[0]);
      const float p2 = exp2f(s[4 * j + 2] - m_use[1]), p3 = exp2f(s[4 * j + 3] - m_use[1]);
      sum[0] += p0 + p1;
      sum[1] += p2 + p3;
      pa[j / 2][(j & 1) * 2] = PackBf16x2(p0, p1);
      pa[j / 2][(j & 1) * 2 + 1] = PackBf16x2(p2, p3);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
      l_run[h] = l_run[h] * alpha[h] + sum[h];
    }
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      acc_o[j][0] *= alpha[0];
      acc_o[j][1] *= alpha[0];
      acc_o[j][2] *= alpha[1];
      acc_o[j][3] *= alpha[1];
    }

    // ---- O += P V: 4 steps of 16 keys, V MN-major in place ----
    WgmmaFence();
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      WgmmaRSTransB_m64n256k16(acc_flat, pa[kk], SmemDesc(cV + kk * 2 * 128, 128, (kBlockN / 8) * 128), 1);
    }
    WgmmaCommit();
    WgmmaWaitAll();
  }
  CpAsyncWait<0>();

  sm80::StoreFlashResult<kHeadDim, kBlockM, 32>(p, t, group, kvh, split, num_splits, workspace, acc_o,
                                                m_run, l_run, r_lo, 0, true);
#endif
}

}  // namespace
}  // namespace gannet::kernels::sm90

namespace gannet::kernels {

FlashConfig FlashConfigPrefillHd256Sm90() { return sm80::MakeFlashConfig<sm90::Traits>(); }

cudaError_t LaunchFlashPrefillHd256Sm90(const PagedAttentionParams& p, int num_splits, void* workspace,
                                        cudaStream_t stream) {
  if (p.kv_fp8 || p.k_from_v) return cudaErrorInvalidValue;
  return sm80::LaunchFlashKernel<sm90::Traits>(sm90::FlashPrefillSm90Kernel, p, num_splits, workspace, stream);
}

}  // namespace gannet::kernels
