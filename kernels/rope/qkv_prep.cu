// Fused QKV preparation (qkv_prep.h): one warp per (token, head). A query head is normed, rotated
// and stored to q_out; a KV head's warp handles both its K (normed with weight, rotated) and its V
// (normed without weight) and writes them into the token's cache slot. Lanes own the rotate-half
// pairs (j, j + d/2), j = lane + 32 i, so each rotation needs no shuffles.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/rope/qkv_prep.h"

namespace gannet::kernels {
namespace {

constexpr int kWarps = 4;
// Pairs a lane owns: head_dim 512 needs 8; head_dim <= 256 is built with 4, which halves the
// registers (86 -> 48) so a 64-token step's CTAs fit the GPU in one wave.
constexpr int kMaxPairsPerLane = kMaxRopePairs / 32;
constexpr int kSmallPairs = 4;
constexpr float kFp8Max = 448.0f;  // largest finite E4M3

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

// The FP8 row of backend.h: FP8(x * 448 / amax) and the scale amax / 448 (0 for a zero row).
template <int kPairs>
__device__ __forceinline__ void StoreFp8(const HeadRegs<kPairs>& h, int d, uint8_t* out,
                                         float* scale) {
  const int lane = threadIdx.x & 31;
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    if (lane + 32 * i < d / 2) amax = fmaxf(amax, fmaxf(fabsf(h.a[i]), fabsf(h.b[i])));
  }
  amax = WarpMax(amax);
  const float inv = amax > 0.f ? kFp8Max / amax : 0.f;
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    const int j = lane + 32 * i;
    if (j >= d / 2) continue;
    out[j] = FloatToFp8(h.a[i] * inv);
    out[j + d / 2] = FloatToFp8(h.b[i] * inv);
  }
  if (lane == 0) *scale = amax / kFp8Max;
}

// In: qkv's type (bf16, or f32 on the fp16 path, where the projection feeding these norms stays
// in f32); Q: q_out's (bf16 or f16). The cache is bf16 or FP8 either way.
template <typename In, typename Q, int kPairs>
__global__ void __launch_bounds__(kWarps * 32) QkvPrepKernel(const QkvPrepParams p) {
  const int t = blockIdx.x;
  const int head = blockIdx.y * kWarps + (threadIdx.x >> 5);
  const int heads = p.num_q_heads + (p.has_kv ? p.num_kv_heads : 0);
  const int d = p.head_dim;
  const bool is_q = head < p.num_q_heads;
  // Constants first, then the wait: a batch-1 step's prep is a chain of dependent loads. The
  // weight is the head's own norm's (q_norm, or k_norm for a KV warp's K; V has none). The step's
  // metadata (positions, slots) does not change within a step: the host copies it in before the
  // step's first kernel, and no kernel writes it. So the rotation's cos/sin and the slot are ready
  // before the wait too, off the chain that waits for the QKV projection.
  const NormWeights<kPairs> weights = LoadNormWeights<kPairs>(is_q ? p.q_norm : p.k_norm, d);
  const RopeAngles<kPairs> rope = RopeAt<kPairs>(p.inv_freq, d, p.positions[t]);
  // Only a KV warp reads the slot: a Q-only prep (the drafter's) may have no slot mapping, and its
  // spare warps (head >= heads) are not KV warps.
  const int slot = is_q || head >= heads ? -1 : p.slot_mapping[t];
  PdlEnter();
  if (head >= heads) return;
  const In* row = static_cast<const In*>(p.qkv) + t * p.ld_qkv;
  if (is_q) {
    StoreHead(NormRope(LoadHead<kPairs>(row + head * d, d), weights, p.eps, &rope, d), d,
              static_cast<Q*>(p.q_out) + t * p.ld_q + static_cast<int64_t>(head) * d);
    return;
  }
  if (slot < 0) return;
  const int h = head - p.num_q_heads;
  const In* k_raw = row + static_cast<int64_t>(p.num_q_heads) * d;
  const In* v_raw = p.k_eq_v ? k_raw : k_raw + static_cast<int64_t>(p.num_kv_heads) * d;
  const int64_t row_id =
      (static_cast<int64_t>(slot / p.page_size) * p.num_kv_heads + h) * p.page_size +
      slot % p.page_size;
  const bool store_k = p.k_cache != nullptr;  // null: single-store K=V, attention derives K from V
  const HeadRegs<kPairs> v_in = LoadHead<kPairs>(v_raw + h * d, d);
  const HeadRegs<kPairs> k_in = store_k ? LoadHead<kPairs>(k_raw + h * d, d) : HeadRegs<kPairs>{};
  const HeadRegs<kPairs> v =
      NormRope<kPairs>(v_in, LoadNormWeights<kPairs>(nullptr, d), p.eps, nullptr, d);
  if (p.kv_fp8) {
    StoreFp8(v, d, static_cast<uint8_t*>(p.v_cache) + row_id * d, p.v_scale + row_id);
  } else {
    StoreHead(v, d, static_cast<bf16*>(p.v_cache) + row_id * d);
  }
  if (!store_k) return;
  const HeadRegs<kPairs> k = NormRope(k_in, weights, p.eps, &rope, d);
  if (p.kv_fp8) {
    StoreFp8(k, d, static_cast<uint8_t*>(p.k_cache) + row_id * d, p.k_scale + row_id);
  } else {
    StoreHead(k, d, static_cast<bf16*>(p.k_cache) + row_id * d);
  }
}

// The kernel built for the head: kSmallPairs pairs a lane up to head_dim 256, all of them above.
template <typename In, typename Q>
void LaunchQkvPrepAs(const QkvPrepParams& p, dim3 grid, cudaStream_t stream) {
  if (p.head_dim <= 2 * 32 * kSmallPairs) {
    Launch(QkvPrepKernel<In, Q, kSmallPairs>, grid, kWarps * 32, 0, stream, p);
  } else {
    Launch(QkvPrepKernel<In, Q, kMaxPairsPerLane>, grid, kWarps * 32, 0, stream, p);
  }
}

}  // namespace

cudaError_t LaunchQkvPrep(const QkvPrepParams& p, cudaStream_t stream) {
  if (p.head_dim <= 0 || p.head_dim % 2 != 0 || p.head_dim > 2 * kMaxRopePairs ||
      (p.has_kv && p.page_size <= 0)) {
    return cudaErrorInvalidValue;
  }
  if (p.num_tokens == 0) return cudaSuccess;
  const int heads = p.num_q_heads + (p.has_kv ? p.num_kv_heads : 0);
  dim3 grid(p.num_tokens, (heads + kWarps - 1) / kWarps);
  if (p.qkv_type == DType::kBF16 && p.q_type == DType::kBF16) {
    LaunchQkvPrepAs<bf16, bf16>(p, grid, stream);
  } else if (p.qkv_type == DType::kF32 && p.q_type == DType::kF16) {
    LaunchQkvPrepAs<float, f16>(p, grid, stream);
  } else {
    return cudaErrorInvalidValue;  // the two paths' pairs only
  }
  return cudaGetLastError();
}

}  // namespace gannet::kernels
