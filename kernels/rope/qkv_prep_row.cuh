// One (token, head) row of QKV preparation, held by one warp: the loads, RMSNorm and rotate-half
// RoPE of qkv_prep.h, shared by the prep kernel and the decode attention that preps its own rows
// (PagedAttentionParams::prep), so both produce the same bits. Lanes own the rotate-half pairs
// (j, j + d/2), j = lane + 32 i, so each rotation needs no shuffles; kPairs pairs a lane cover
// head_dim <= 64 kPairs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/common/device_utils.cuh"

namespace gannet::kernels {

// The pairs a lane owns for head_dim d: 4 up to 256 (half the registers), 8 up to 512. The prep
// kernel and the attention kernels pick the same count, which fixes the norm's summation order.
__host__ __device__ constexpr int PrepPairsFor(int head_dim) { return head_dim <= 256 ? 4 : 8; }

// One head held by a warp: lane owns the rotate-half pairs (j, j + d/2), j = lane + 32 i.
template <int kPairs>
struct HeadRegs {
  float a[kPairs], b[kPairs];
};

// The constants a lane needs for its pairs (j, j + d/2), read before the kernel waits for its
// predecessor (PDL): they are weights, not results of earlier kernels. A norm without a weight
// multiplies by exactly 1, which leaves the product as the CPU reference computes it.
template <int kPairs>
struct NormWeights {
  float w0[kPairs], w1[kPairs];
};
// A lane's rotation: cos and sin of its pairs' angles at the token's position.
template <int kPairs>
struct RopeAngles {
  float cs[kPairs], sn[kPairs];
};

// This lane's values of a half row: out[i] = src[lane + 32 i] where that is below `half`,
// `fallback` elsewhere or when src is null. Every per-pair load below is one or two of these.
template <int kPairs, typename T>
__device__ __forceinline__ void LoadLanePairs(const T* src, int half, float fallback, float* out) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    const int j = lane + 32 * i;
    out[i] = src != nullptr && j < half ? ToFloat(src[j]) : fallback;
  }
}

template <int kPairs>
__device__ __forceinline__ NormWeights<kPairs> LoadNormWeights(const float* w, int d) {
  NormWeights<kPairs> c;
  LoadLanePairs<kPairs>(w, d / 2, 1.f, c.w0);
  LoadLanePairs<kPairs>(w == nullptr ? nullptr : w + d / 2, d / 2, 1.f, c.w1);
  return c;
}

// As HF (and the CPU reference): angle in f32, cos/sin in f32.
template <int kPairs>
__device__ __forceinline__ RopeAngles<kPairs> RopeAt(const float* inv_freq, int d, int pos) {
  float f[kPairs];
  LoadLanePairs<kPairs>(inv_freq, d / 2, 0.f, f);
  RopeAngles<kPairs> r;
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    const float angle = f[i] * static_cast<float>(pos);
    r.cs[i] = cosf(angle);
    r.sn[i] = sinf(angle);
  }
  return r;
}

// One head's raw values, loaded (a KV warp issues its K and V loads together, then reduces).
template <int kPairs, typename In>
__device__ __forceinline__ HeadRegs<kPairs> LoadHead(const In* in, int d) {
  HeadRegs<kPairs> h;
  LoadLanePairs<kPairs>(in, d / 2, 0.f, h.a);
  LoadLanePairs<kPairs>(in + d / 2, d / 2, 0.f, h.b);
  return h;
}

// Norms a loaded head and, given its rotation, rotates it.
template <int kPairs>
__device__ __forceinline__ HeadRegs<kPairs> NormRope(HeadRegs<kPairs> h,
                                                     const NormWeights<kPairs>& c, float eps,
                                                     const RopeAngles<kPairs>* rope, int d) {
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kPairs; ++i) ss += h.a[i] * h.a[i] + h.b[i] * h.b[i];
  const float inv = 1.0f / sqrtf(WarpSum(ss) / static_cast<float>(d) + eps);
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    float x0 = h.a[i] * inv * c.w0[i], x1 = h.b[i] * inv * c.w1[i];
    if (rope != nullptr) {
      const float cs = rope->cs[i], sn = rope->sn[i];
      const float r0 = x0 * cs - x1 * sn;
      const float r1 = x1 * cs + x0 * sn;
      x0 = r0;
      x1 = r1;
    }
    h.a[i] = x0;
    h.b[i] = x1;
  }
  return h;
}

template <int kPairs, typename Out>
__device__ __forceinline__ void StoreHead(const HeadRegs<kPairs>& h, int d, Out* out) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    const int j = lane + 32 * i;
    if (j >= d / 2) continue;
    out[j] = FromFloat<Out>(h.a[i]);
    out[j + d / 2] = FromFloat<Out>(h.b[i]);
  }
}

}  // namespace gannet::kernels
