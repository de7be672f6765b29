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
constexpr int kMaxPairsPerLane = kMaxRopePairs / 32;
constexpr float kFp8Max = 448.0f;  // largest finite E4M3

// One head held by a warp: lane owns the rotate-half pairs (j, j + d/2), j = lane + 32 i.
struct HeadRegs {
  float a[kMaxPairsPerLane], b[kMaxPairsPerLane];
};

// Norms one head (optionally weighted) and optionally rotates it, in registers.
template <typename In>
__device__ __forceinline__ HeadRegs NormRope(const In* in, const float* w, float eps, bool rope,
                                             const float* inv_freq, int pos, int d) {
  const int lane = threadIdx.x & 31;
  const int half = d / 2;
  HeadRegs h;
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxPairsPerLane; ++i) {
    const int j = lane + 32 * i;
    h.a[i] = h.b[i] = 0.f;
    if (j < half) {
      h.a[i] = ToFloat(in[j]);
      h.b[i] = ToFloat(in[j + half]);
    }
    ss += h.a[i] * h.a[i] + h.b[i] * h.b[i];
  }
  const float inv = 1.0f / sqrtf(WarpSum(ss) / static_cast<float>(d) + eps);
#pragma unroll
  for (int i = 0; i < kMaxPairsPerLane; ++i) {
    const int j = lane + 32 * i;
    if (j >= half) continue;
    float x0 = h.a[i] * inv, x1 = h.b[i] * inv;
    if (w != nullptr) {
      x0 *= w[j];
      x1 *= w[j + half];
    }
    if (rope) {
      // As HF (and the CPU reference): angle in f32, cos/sin in f32.
      const float angle = inv_freq[j] * static_cast<float>(pos);
      const float c = cosf(angle), s = sinf(angle);
      const float r0 = x0 * c - x1 * s;
      const float r1 = x1 * c + x0 * s;
      x0 = r0;
      x1 = r1;
    }
    h.a[i] = x0;
    h.b[i] = x1;
  }
  return h;
}

template <typename Out>
__device__ __forceinline__ void StoreHead(const HeadRegs& h, int d, Out* out) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < kMaxPairsPerLane; ++i) {
    const int j = lane + 32 * i;
    if (j >= d / 2) continue;
    out[j] = FromFloat<Out>(h.a[i]);
    out[j + d / 2] = FromFloat<Out>(h.b[i]);
  }
}

// The FP8 row of backend.h: FP8(x * 448 / amax) and the scale amax / 448 (0 for a zero row).
__device__ __forceinline__ void StoreFp8(const HeadRegs& h, int d, uint8_t* out, float* scale) {
  const int lane = threadIdx.x & 31;
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxPairsPerLane; ++i) {
    if (lane + 32 * i < d / 2) amax = fmaxf(amax, fmaxf(fabsf(h.a[i]), fabsf(h.b[i])));
  }
  amax = WarpMax(amax);
  const float inv = amax > 0.f ? kFp8Max / amax : 0.f;
#pragma unroll
  for (int i = 0; i < kMaxPairsPerLane; ++i) {
    const int j = lane + 32 * i;
    if (j >= d / 2) continue;
    out[j] = FloatToFp8(h.a[i] * inv);
    out[j + d / 2] = FloatToFp8(h.b[i] * inv);
  }
  if (lane == 0) *scale = amax / kFp8Max;
}

// In: qkv's type (bf16, or f32 on the fp16 path, where the projection feeding these norms stays
// in f32); Q: q_out's (bf16 or f16). The cache is bf16 or FP8 either way.
template <typename In, typename Q>
__global__ void __launch_bounds__(kWarps * 32) QkvPrepKernel(const QkvPrepParams p) {
  PdlEnter();
  const int t = blockIdx.x;
  const int head = blockIdx.y * kWarps + (threadIdx.x >> 5);
  const int heads = p.num_q_heads + (p.has_kv ? p.num_kv_heads : 0);
  if (head >= heads) return;
  const int d = p.head_dim;
  const int pos = p.positions[t];
  const In* row = static_cast<const In*>(p.qkv) + t * p.ld_qkv;
  if (head < p.num_q_heads) {
    StoreHead(NormRope(row + head * d, p.q_norm, p.eps, true, p.inv_freq, pos, d), d,
              static_cast<Q*>(p.q_out) + t * p.ld_q + static_cast<int64_t>(head) * d);
    return;
  }
  const int slot = p.slot_mapping[t];
  if (slot < 0) return;
  const int h = head - p.num_q_heads;
  const In* k_raw = row + static_cast<int64_t>(p.num_q_heads) * d;
  const In* v_raw = p.k_eq_v ? k_raw : k_raw + static_cast<int64_t>(p.num_kv_heads) * d;
  const int64_t row_id = (static_cast<int64_t>(slot / p.page_size) * p.num_kv_heads + h) * p.page_size +
                         slot % p.page_size;
  const HeadRegs v = NormRope(v_raw + h * d, nullptr, p.eps, false, p.inv_freq, pos, d);
  if (p.kv_fp8) {
    StoreFp8(v, d, static_cast<uint8_t*>(p.v_cache) + row_id * d, p.v_scale + row_id);
  } else {
    StoreHead(v, d, static_cast<bf16*>(p.v_cache) + row_id * d);
  }
  if (p.k_cache == nullptr) return;  // single-store K=V: attention derives K from V
  const HeadRegs k = NormRope(k_raw + h * d, p.k_norm, p.eps, true, p.inv_freq, pos, d);
  if (p.kv_fp8) {
    StoreFp8(k, d, static_cast<uint8_t*>(p.k_cache) + row_id * d, p.k_scale + row_id);
  } else {
    StoreHead(k, d, static_cast<bf16*>(p.k_cache) + row_id * d);
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
  if (p.qkv_type == DataType::kBF16 && p.q_type == DataType::kBF16) {
    Launch(QkvPrepKernel<bf16, bf16>, grid, kWarps * 32, 0, stream, p);
  } else if (p.qkv_type == DataType::kF32 && p.q_type == DataType::kF16) {
    Launch(QkvPrepKernel<float, f16>, grid, kWarps * 32, 0, stream, p);
  } else {
    return cudaErrorInvalidValue;  // the two paths' pairs only
  }
  return cudaGetLastError();
}

}  // namespace gannet::kernels
