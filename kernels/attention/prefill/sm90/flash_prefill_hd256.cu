// hd256 prefill / extend attention on Hopper tensor cores (wgmma, sm_90a): the sliding layers of
// every Gemma-4 variant. A CTA owns 128 query rows (GQA-packed: (token, head) pairs of one
// sequence and one KV head's group), as two warpgroups of 64 rows that share each K/V tile.
//
// Per 64-key tile: S = Q K^T is 16 wgmma m64n64k16 steps straight from shared memory (Q and K
// both K-major); the row softmax runs in the accumulator registers (a warp holds whole rows: no
// cross-warp exchange); P goes from those registers into the A operand of O += P V, 4 wgmma
// m64n256k16 steps with V read MN-major (transposed) in place. K/V tiles stream through a 2-stage
// cp.async pipeline in the core-matrix layout wgmma reads (flash_prefill_sm90.cuh).
//
// Not yet: TMA, warp specialisation, swizzled layouts, overlapping softmax with the next GEMM.
#include "kernels/attention/prefill/sm90/flash_prefill_sm90.cuh"

namespace gannet::kernels::sm90 {
namespace {

struct Hd256Traits {
  static constexpr int kMinArch = 900;
  static constexpr int kHeadDim = 256;
  static constexpr int kBlockM = 128;  // two warpgroups x 64 rows
  static constexpr int kBlockN = 64;
  static constexpr int kStages = 2;
  static constexpr int kThreads = 256;
  static constexpr int kQBytes = kBlockM * kHeadDim * 2;
  static constexpr int kTileBytes = kBlockN * kHeadDim * 2;
  static constexpr int kSmemBytes = kQBytes + kStages * 2 * kTileBytes + kBlockM * 4;
};

__global__ void __launch_bounds__(Hd256Traits::kThreads, 1)
    FlashPrefillHd256Sm90Kernel(const PagedAttentionParams p, int num_splits, void* workspace) {
  PdlEnter();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Tr = Hd256Traits;
  constexpr int kHeadDim = Tr::kHeadDim, kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN;
  constexpr uint32_t kQLbo = 64 * 16, kKLbo = kBlockN * 16, kVSbo = kBlockN * 16;
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* sQ = smem;                 // 2 x [64][256], core layout
  unsigned char* sKV = smem + Tr::kQBytes;  // stage s: K at 2s, V at 2s + 1
  int* sPos = reinterpret_cast<int*>(sKV + Tr::kStages * 2 * Tr::kTileBytes);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wg = warp / 4, wq = warp % 4;  // warpgroup, warp within it
  Sm90Work w;
  if (!BeginSm90Tile<kHeadDim, kBlockM, kBlockN, Tr::kThreads, Tr::kTileBytes>(p, num_splits, sQ,
                                                                               sPos, sKV, &w)) {
    return;
  }
  const KeyBlocks& kb = w.kb;
  auto load_tile = [&](int stage, int tile) {
    LoadKvStage<kHeadDim, kBlockN, Tr::kThreads, Tr::kTileBytes>(p, w, sKV, stage, tile);
  };

  float acc_o[32][4] = {};
  float(&acc_flat)[128] = *reinterpret_cast<float(*)[128]>(&acc_o[0][0]);
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  const float scale2 = p.scale * 1.4426950408889634f;
  const int r_lo = wg * 64 + wq * 16 + (lane >> 2);
  const unsigned char* my_q = sQ + wg * (64 * kHeadDim * 2);

  for (int it = 0; it < kb.n_tiles; ++it) {
    sm80::CpAsyncWait<0>();
    FenceProxyAsync();
    __syncthreads();  // tile `it` landed for every thread; the other stage is free again
    if (it + 1 < kb.n_tiles) load_tile((it + 1) % Tr::kStages, it + 1);
    sm80::CpAsyncCommit();
    const unsigned char* cK = sKV + 2 * (it % Tr::kStages) * Tr::kTileBytes;
    const unsigned char* cV = cK + Tr::kTileBytes;

    float s[32] = {};
    WgmmaFence();
#pragma unroll
    for (int ks = 0; ks < kHeadDim / 16; ++ks) {
      WgmmaSS_m64n64k16(s, SmemDesc(my_q + ks * 2 * kQLbo, kQLbo, 128),
                        SmemDesc(cK + ks * 2 * kKLbo, kKLbo, 128), ks > 0 ? 1 : 0);
    }
    WgmmaCommit();
    WgmmaWaitAll();

    float alpha[2];
    uint32_t pa[4][4];
    OnlineSoftmax<8>(p, s, kb.key_base + it * kBlockN, sPos[r_lo], sPos[r_lo + 8], scale2, m_run,
                     l_run, alpha, pa);
    RescaleRows(acc_o, alpha);
    WgmmaFence();
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      WgmmaRSTransB_m64n256k16(acc_flat, pa[kk], SmemDesc(cV + kk * 2 * 128, 128, kVSbo), 1);
    }
    WgmmaCommit();
    WgmmaWaitAll();
  }
  sm80::CpAsyncWait<0>();
  sm80::StoreFlashResult<kHeadDim, kBlockM, 32>(p, w.t, w.group, w.kvh, w.split, num_splits,
                                                workspace, acc_o, m_run, l_run, r_lo, 0, true);
#endif
}

}  // namespace
}  // namespace gannet::kernels::sm90

namespace gannet::kernels {

FlashConfig FlashConfigPrefillHd256Sm90() { return sm80::MakeFlashConfig<sm90::Hd256Traits>(); }

cudaError_t LaunchFlashPrefillHd256Sm90(const PagedAttentionParams& p, int num_splits,
                                        void* workspace, cudaStream_t stream) {
  if (p.kv_fp8 || p.k_from_v) return cudaErrorInvalidValue;
  return sm80::LaunchFlashKernel<sm90::Hd256Traits>(sm90::FlashPrefillHd256Sm90Kernel, p,
                                                    num_splits, workspace, stream);
}

}  // namespace gannet::kernels
