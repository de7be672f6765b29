// Fused QKV preparation (qkv_prep.h): one warp per (token, head) (qkv_prep_row.cuh). A query head
// is normed, rotated and stored to q_out; a KV head's warp handles both its K (normed with weight,
// rotated) and its V (normed without weight) and writes them into the token's cache slot.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/rope/qkv_prep.h"
#include "kernels/rope/qkv_prep_row.cuh"

namespace gannet::kernels {
namespace {

constexpr int kWarps = 4;
// Pairs a lane owns (PrepPairsFor): head_dim 512 needs 8; head_dim <= 256 is built with 4, which
// halves the registers (86 -> 48) so a 64-token step's CTAs fit the GPU in one wave.
constexpr int kSmallPairs = PrepPairsFor(256);
constexpr int kMaxPairsPerLane = PrepPairsFor(2 * kMaxRopePairs);
static_assert(kMaxPairsPerLane * 32 == kMaxRopePairs, "head_dim 512's pairs");
constexpr float kFp8Max = 448.0f;  // largest finite E4M3

// The FP8 row of backend.h: FP8(x * 448 / amax) and the scale amax / 448 (0 for a zero row).
template <int kPairs>
__device__ __forceinline__ void StoreFp8(const HeadRegs<kPairs>& h, int d, uint8_t* out, float* scale) {
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
  const int64_t row_id = (static_cast<int64_t>(slot / p.page_size) * p.num_kv_heads + h) * p.page_size +
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
  if (p.qkv_type == DataType::kBF16 && p.q_type == DataType::kBF16) {
    LaunchQkvPrepAs<bf16, bf16>(p, grid, stream);
  } else if (p.qkv_type == DataType::kF32 && p.q_type == DataType::kF16) {
    LaunchQkvPrepAs<float, f16>(p, grid, stream);
  } else {
    return cudaErrorInvalidValue;  // the two paths' pairs only
  }
  return cudaGetLastError();
}

}  // namespace gannet::kernels
