// CUDA-core paged attention for every arch the build carries (sm_75+): one warp per (token,
// query head), lanes split the head dim in 16-byte chunks, online softmax one key at a time.
// It is the fallback where no tensor-core entry applies and a second, independent GPU
// implementation the tests compare the flash kernels against; speed is not its job.
// With PagedAttentionParams::image_block a query also reads the rest of its image block.
// Single-store K=V (k_from_v): each lane derives its dims of K from its V chunk and the chunk of
// the rotate-half partner dims, the CPU reference's arithmetic (backend.h).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/attention/paged_attention.h"
#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"

namespace gannet::kernels {
namespace {

constexpr int kMaxChunksPerLane = 2;  // head_dim up to 32 lanes x 2 x 8 = 512

// Eight cache elements at element offset `at`, as f32 (FP8 before its row scale).
__device__ __forceinline__ void LoadKvChunk(const void* cache, bool fp8, int64_t at, float* out) {
  if (fp8) {
    Load8(static_cast<const uint8_t*>(cache) + at, out);
  } else {
    Load8(static_cast<const bf16*>(cache) + at, out);
  }
}

__global__ void GenericAttentionKernel(const PagedAttentionParams p) {
  PdlEnter();
  const int warps_per_block = blockDim.x / 32;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (item >= static_cast<int64_t>(p.num_tokens) * p.num_q_heads) return;
  const int t = p.query_start[0] + static_cast<int>(item / p.num_q_heads);  // an absolute token
  const int h = static_cast<int>(item % p.num_q_heads);
  const int kvh = h / (p.num_q_heads / p.num_kv_heads);
  // The token's sequence: the last s with query_start[s] <= t.
  int s = 0;
  while (s + 1 < p.num_seqs && p.query_start[s + 1] <= t) ++s;
  const int pos = p.positions[t];
  const int lo = p.window > 0 ? max(0, pos - p.window + 1) : 0;
  // Image-block mask: the keys up to the last token of the query's block (one run of the
  // sequence's chunk, whose K/V this step has written).
  int hi = pos;
  if (p.image_block != nullptr && p.image_block[t] >= 0) {
    const int b = p.image_block[t], end = p.query_start[s + 1];
    for (int u = t + 1; u < end && p.image_block[u] == b; ++u) hi = p.positions[u];
  }
  const int chunks = p.head_dim / 8;
  const int32_t* table = p.page_table + static_cast<int64_t>(s) * p.max_pages_per_seq;

  float q[kMaxChunksPerLane][8];
  float acc[kMaxChunksPerLane][8];
  const int64_t q_at = t * p.q_stride + static_cast<int64_t>(h) * p.head_dim;
#pragma unroll
  for (int c = 0; c < kMaxChunksPerLane; ++c) {
    const int ch = lane + 32 * c;
#pragma unroll
    for (int i = 0; i < 8; ++i) q[c][i] = acc[c][i] = 0.f;
    if (ch >= chunks) continue;
    if (p.io_f16) {
      Load8(static_cast<const f16*>(p.q) + q_at + ch * 8, q[c]);
    } else {
      Load8(static_cast<const bf16*>(p.q) + q_at + ch * 8, q[c]);
    }
  }
  // k_from_v: the k_norm weights of this lane's dims and of their rotate-half partners.
  const int half = p.head_dim / 2;
  float w_own[kMaxChunksPerLane][8], w_partner[kMaxChunksPerLane][8];
#pragma unroll
  for (int c = 0; c < kMaxChunksPerLane; ++c) {
    const int ch = lane + 32 * c;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int d = ch * 8 + i;
      const bool live = p.k_from_v && ch < chunks;
      w_own[c][i] = live ? p.k_norm[d] : 0.f;
      w_partner[c][i] = live ? p.k_norm[d < half ? d + half : d - half] : 0.f;
    }
  }
  float m = -INFINITY, l = 0.f;
  for (int key = lo; key <= hi; ++key) {
    const int page = table[key / p.page_size];
    const int64_t off =
        ((static_cast<int64_t>(page) * p.num_kv_heads + kvh) * p.page_size + key % p.page_size) *
        p.head_dim;
    float dot = 0.f;
#pragma unroll
    for (int c = 0; c < kMaxChunksPerLane; ++c) {
      const int ch = lane + 32 * c;
      if (ch >= chunks) continue;
      float k[8];
      if (p.k_from_v) {
        const int d0 = ch * 8;
        const int partner0 = d0 < half ? d0 + half : d0 - half;
        float v[8], vp[8];
        LoadKvChunk(p.v_cache, p.kv_fp8, off + d0, v);
        LoadKvChunk(p.v_cache, p.kv_fp8, off + partner0, vp);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const int j = (d0 + i) % half;
          float cs = 1.f, sn = 0.f;
          if (j < p.rope_pairs) {
            const float angle = p.inv_freq[j] * static_cast<float>(key);
            cs = cosf(angle);
            sn = sinf(angle);
          }
          const float a = v[i] * w_own[c][i], b = vp[i] * w_partner[c][i];
          k[i] = d0 < half ? a * cs - b * sn : a * cs + b * sn;
        }
      } else {
        LoadKvChunk(p.k_cache, p.kv_fp8, off + ch * 8, k);
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) dot += q[c][i] * k[i];
    }
    // FP8 rows carry one scale each: applied to the dot product and to the softmax weight (a
    // derived K's is its V row's).
    const float k_scale = p.kv_fp8 ? (p.k_from_v ? p.v_scale : p.k_scale)[off / p.head_dim] : 1.f;
    const float v_scale = p.kv_fp8 ? p.v_scale[off / p.head_dim] : 1.f;
    const float sc = WarpSum(dot) * k_scale * p.scale;
    const float m_new = fmaxf(m, sc);
    const float alpha = expf(m - m_new);
    const float w = expf(sc - m_new);
    l = l * alpha + w;
    m = m_new;
#pragma unroll
    for (int c = 0; c < kMaxChunksPerLane; ++c) {
      const int ch = lane + 32 * c;
      if (ch >= chunks) continue;
      float v[8];
      LoadKvChunk(p.v_cache, p.kv_fp8, off + ch * 8, v);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[c][i] = acc[c][i] * alpha + w * v_scale * v[i];
    }
  }
  const float inv = l > 0.f ? 1.f / l : 0.f;
  const int64_t o_at = t * p.out_stride + static_cast<int64_t>(h) * p.head_dim;
#pragma unroll
  for (int c = 0; c < kMaxChunksPerLane; ++c) {
    const int ch = lane + 32 * c;
    if (ch >= chunks) continue;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[c][i] *= inv;
    if (p.io_f16) {
      Store8(static_cast<f16*>(p.out) + o_at + ch * 8, acc[c]);
    } else {
      Store8(static_cast<bf16*>(p.out) + o_at + ch * 8, acc[c]);
    }
  }
}

}  // namespace

cudaError_t LaunchGenericAttention(const PagedAttentionParams& p, cudaStream_t stream) {
  if (p.head_dim % 8 != 0 || p.head_dim > 32 * kMaxChunksPerLane * 8 || p.num_kv_heads <= 0) {
    return cudaErrorInvalidValue;
  }
  const int64_t items = static_cast<int64_t>(p.num_tokens) * p.num_q_heads;
  if (items == 0) return cudaSuccess;
  constexpr int kWarps = 4;
  const int blocks = static_cast<int>((items + kWarps - 1) / kWarps);
  Launch(GenericAttentionKernel, blocks, kWarps * 32, 0, stream, p);
  return cudaGetLastError();
}

}  // namespace gannet::kernels
