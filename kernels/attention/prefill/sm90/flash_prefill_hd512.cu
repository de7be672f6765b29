// hd512 prefill / extend attention on Hopper tensor cores (wgmma, sm_90a): the full layers of
// every Gemma-4 variant, single-store K=V included. A CTA owns 64 query rows (GQA-packed) and
// two warpgroups that split the head dim: 64 x 512 f32 output accumulators would need 256
// registers a thread in one warpgroup, so each keeps the 64 x 256 of its half.
//
// Per 32-key tile: each warpgroup forms the partial S = Q K^T over its 256 dims (16 wgmma
// m64n32k16 steps from shared memory), the two partials meet in shared memory (a + b on both
// sides: the same S bit for bit), both run the same online softmax in registers, and each adds
// P V[:, its half] (2 wgmma m64n256k16 steps, P from registers, V read MN-major in place).
//
// Single-store K=V (PagedAttentionParams::k_from_v): the stage holds V alone; Q carries k_norm off
// the rotated dims (once), so those steps of S read K's operand from the V tile; the rotated dims
// are derived per tile into the stage's K tile (KFromVPair, as the sm80 kernels), in the core
// layout. Not yet: TMA, warp specialisation, swizzled layouts, overlapping softmax with GEMMs.
#include "kernels/attention/prefill/sm90/flash_prefill_sm90.cuh"

namespace gannet::kernels::sm90 {
namespace {

struct Hd512Traits {
  static constexpr int kMinArch = 900;
  static constexpr int kHeadDim = 512;
  static constexpr int kBlockM = 64;
  static constexpr int kBlockN = 32;
  static constexpr int kStages = 2;
  static constexpr int kThreads = 256;  // two warpgroups, one per half of the head dim
  static constexpr int kQBytes = kBlockM * kHeadDim * 2;
  static constexpr int kTileBytes = kBlockN * kHeadDim * 2;
  static constexpr int kSBytes = 2 * kBlockM * kBlockN * 4;  // each warpgroup's partial S
  static constexpr int kSmemBytes = kQBytes + kStages * 2 * kTileBytes + kSBytes + kBlockM * 4;
};

// Q's dims off the rotated pairs times k_norm, in place (core layout, landed).
__device__ __forceinline__ void WeightQCoreForKFromV(unsigned char* sQ,
                                                     const PagedAttentionParams& p) {
  constexpr int kHalf = Hd512Traits::kHeadDim / 2, kRows = Hd512Traits::kBlockM;
  __nv_bfloat16* q = reinterpret_cast<__nv_bfloat16*>(sQ);
  for (int e = threadIdx.x; e < kRows * kHalf; e += Hd512Traits::kThreads) {
    const int r = e / kHalf, c = (e % kHalf) * 2;
    if (sm80::KFromVRotated(c, kHalf, p.rope_pairs)) continue;
    __nv_bfloat162* pair = reinterpret_cast<__nv_bfloat162*>(q + CoreElem(r, c, kRows));
    const float2 w = __ldg(reinterpret_cast<const float2*>(p.k_norm + c));
    const float2 v = __bfloat1622float2(*pair);
    *pair = __floats2bfloat162_rn(v.x * w.x, v.y * w.y);
  }
}

__global__ void __launch_bounds__(Hd512Traits::kThreads, 1)
    FlashPrefillHd512Sm90Kernel(const PagedAttentionParams p, int num_splits, void* workspace) {
  PdlEnter();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Tr = Hd512Traits;
  constexpr int kHeadDim = Tr::kHeadDim, kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN;
  constexpr int kHalf = kHeadDim / 2;
  constexpr uint32_t kQLbo = kBlockM * 16, kKLbo = kBlockN * 16, kVSbo = kBlockN * 16;
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* sQ = smem;                 // [64][512], core layout
  unsigned char* sKV = smem + Tr::kQBytes;  // stage s: K at 2s, V at 2s + 1
  float* sS = reinterpret_cast<float*>(sKV + Tr::kStages * 2 * Tr::kTileBytes);  // [2][64][32]
  int* sPos = reinterpret_cast<int*>(reinterpret_cast<unsigned char*>(sS) + Tr::kSBytes);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wg = warp / 4, wq = warp % 4;  // warpgroup (= half of the head dim), row slab
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
  const int r_lo = wq * 16 + (lane >> 2);
  const bool k_from_v = p.k_from_v;
  sm80::KFromVPair<kHeadDim, Tr::kThreads> kfv;
  if (k_from_v) kfv = sm80::KFromVPair<kHeadDim, Tr::kThreads>(p);

  for (int it = 0; it < kb.n_tiles; ++it) {
    sm80::CpAsyncWait<0>();
    FenceProxyAsync();
    __syncthreads();  // tile `it` landed for every thread; the other stage and sS are free again
    if (k_from_v && it == 0) {
      WeightQCoreForKFromV(sQ, p);
      FenceProxyAsync();
      __syncthreads();
    }
    if (it + 1 < kb.n_tiles) load_tile((it + 1) % Tr::kStages, it + 1);
    sm80::CpAsyncCommit();
    unsigned char* cK = sKV + 2 * (it % Tr::kStages) * Tr::kTileBytes;
    const unsigned char* cV = cK + Tr::kTileBytes;
    const int key0 = kb.key_base + it * kBlockN;
    if (k_from_v && p.rope_pairs > 0) {  // this tile's rotated K dims, into the K tile
      const __nv_bfloat16* v = reinterpret_cast<const __nv_bfloat16*>(cV);
      __nv_bfloat16* k = reinterpret_cast<__nv_bfloat16*>(cK);
      kfv.template Derive<kBlockN>(
          key0, [&](int j, int d) { return __bfloat162float(v[CoreElem(j, d, kBlockN)]); },
          [&](int j, int i, float x0, float x1) {
            k[CoreElem(j, i, kBlockN)] = __float2bfloat16_rn(x0);
            k[CoreElem(j, i + kHalf, kBlockN)] = __float2bfloat16_rn(x1);
          });
      FenceProxyAsync();
      __syncthreads();
    }

    // ---- partial S over this warpgroup's half of the head dim ----
    float s[16] = {};
    WgmmaFence();
#pragma unroll
    for (int ks = 0; ks < kHalf / 16; ++ks) {
      const int step = wg * (kHalf / 16) + ks;  // 16-dim step of the full head dim
      // Single-store K=V: off the rotated dims, K's operand is V's (Q carries k_norm).
      const unsigned char* kt =
          k_from_v && !sm80::KFromVRotated(step * 16, kHalf, p.rope_pairs) ? cV : cK;
      WgmmaSS_m64n32k16(s, SmemDesc(sQ + step * 2 * kQLbo, kQLbo, 128),
                        SmemDesc(kt + step * 2 * kKLbo, kKLbo, 128), ks > 0 ? 1 : 0);
    }
    WgmmaCommit();
    WgmmaWaitAll();

    // ---- the two halves' partials meet: S = own + other on both sides ----
    float* mine = sS + wg * kBlockM * kBlockN;
    const float* other = sS + (1 - wg) * kBlockM * kBlockN;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int col = 8 * j + 2 * (lane & 3);
      *reinterpret_cast<float2*>(mine + r_lo * kBlockN + col) = make_float2(s[4 * j], s[4 * j + 1]);
      *reinterpret_cast<float2*>(mine + (r_lo + 8) * kBlockN + col) =
          make_float2(s[4 * j + 2], s[4 * j + 3]);
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int col = 8 * j + 2 * (lane & 3);
      const float2 lo = *reinterpret_cast<const float2*>(other + r_lo * kBlockN + col);
      const float2 hi = *reinterpret_cast<const float2*>(other + (r_lo + 8) * kBlockN + col);
      s[4 * j] += lo.x, s[4 * j + 1] += lo.y, s[4 * j + 2] += hi.x, s[4 * j + 3] += hi.y;
    }

    float alpha[2];
    uint32_t pa[2][4];
    OnlineSoftmax<4>(p, s, key0, sPos[r_lo], sPos[r_lo + 8], scale2, m_run, l_run, alpha, pa);
    RescaleRows(acc_o, alpha);
    WgmmaFence();
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      WgmmaRSTransB_m64n256k16(
          acc_flat, pa[kk], SmemDesc(cV + wg * (kHalf / 8) * kVSbo + kk * 2 * 128, 128, kVSbo), 1);
    }
    WgmmaCommit();
    WgmmaWaitAll();
  }
  sm80::CpAsyncWait<0>();
  sm80::StoreFlashResult<kHeadDim, kBlockM, 32>(p, w.t, w.group, w.kvh, w.split, num_splits,
                                                workspace, acc_o, m_run, l_run, r_lo, wg * kHalf,
                                                wg == 0);
#endif
}

}  // namespace
}  // namespace gannet::kernels::sm90

namespace gannet::kernels {

FlashConfig FlashConfigPrefillHd512Sm90() { return sm80::MakeFlashConfig<sm90::Hd512Traits>(); }

cudaError_t LaunchFlashPrefillHd512Sm90(const PagedAttentionParams& p, int num_splits,
                                        void* workspace, cudaStream_t stream) {
  if (p.kv_fp8) return cudaErrorInvalidValue;
  return sm80::LaunchFlashKernel<sm90::Hd512Traits>(sm90::FlashPrefillHd512Sm90Kernel, p,
                                                    num_splits, workspace, stream);
}

}  // namespace gannet::kernels
