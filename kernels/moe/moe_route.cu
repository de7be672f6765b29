// The fused MoE router (moe.h): one kernel does the weightless RMSNorm x scale x hidden^-1/2,
// the hidden -> experts projection, softmax, top-k, renormalisation and per_expert_scale.
//
// Grid (token groups of kTokens, expert chunks of kWarps): each CTA normalises its tokens into
// shared memory, each warp streams one expert's router row once for all kTokens tokens, and the
// last CTA of a token group to finish (atomic counter, reset after use) runs the softmax and
// top-k, one warp per token. Reading the router matrix with 16 experts' worth of CTAs per token
// group keeps a decode step's 720 KB router read spread over many SMs.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/moe/moe.h"

namespace gannet::kernels {
namespace {

constexpr int kTokens = 4;
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxExpertsPerLane = 8;  // 256 experts
// The hidden sizes whose loads below all issue at once: 16-byte chunks per lane (router rows)
// and elements per thread (x), up to 4096. Larger sizes take more rounds, same arithmetic.
constexpr int kRowChunksPerLane = 16;
constexpr int kXPerThread = 16;

// Top-k's candidate key of a probability: its bits plus one (probabilities are >= 0, where the
// bits order as the values do; -0 counts as +0), 0 for a slot that is picked, past the experts,
// or NaN. One warp max of the keys is then the largest probability.
__device__ __forceinline__ uint32_t ProbKey(float prob) {
  return prob > 0.f ? __float_as_uint(prob) + 1u : (prob == 0.f ? 1u : 0u);
}

// The warp's largest key, and the lowest expert holding it among the lanes' candidates (each lane
// offers its largest key's lowest expert): one redux.sync each on sm_80+.
__device__ __forceinline__ void WarpArgMaxKey(uint32_t key, uint32_t expert, uint32_t* best_key,
                                              uint32_t* best_expert) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  *best_key = __reduce_max_sync(0xffffffffu, key);
  *best_expert = __reduce_min_sync(0xffffffffu, key == *best_key ? expert : 0xffffffffu);
#else
  uint32_t k = key;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) k = max(k, __shfl_xor_sync(0xffffffffu, k, o));
  uint32_t e = key == k ? expert : 0xffffffffu;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) e = min(e, __shfl_xor_sync(0xffffffffu, e, o));
  *best_key = k;
  *best_expert = e;
#endif
}

// The counters live in a fixed region at the start of the workspace, never overlapped by the
// logits of a call with a different token count (they must stay zero between calls).
constexpr int kMaxTokenGroups = 16384;  // 65536 tokens per call
constexpr size_t kCounterBytes = kMaxTokenGroups * sizeof(int);

__global__ void __launch_bounds__(kThreads)
    MoeRouteKernel(const MoeRouteParams p, int* counters, float* logits) {
  extern __shared__ float su[];  // [kTokens, hidden], then router_scale [hidden]
  __shared__ float red[32];
  __shared__ int is_last;
  __shared__ float expert_scale[32 * kMaxExpertsPerLane];
  const int t0 = blockIdx.x * kTokens;
  const int ntok = min(kTokens, p.num_tokens - t0);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float root = rsqrtf(static_cast<float>(p.hidden));
  const bool w_f16 = p.router_type == DType::kF16;  // uniform: the fp16 compute path
  const size_t w_bytes = w_f16 ? sizeof(f16) : sizeof(bf16);
  // The router rows of this CTA's experts (contiguous, constant) start moving into L2 before the
  // wait for the previous kernel (the rows past hidden 4096, which the registers below do not
  // hold, and the other warps' rows while theirs are in flight).
  if (threadIdx.x == 0) {
    const int e0 = blockIdx.y * kWarps, rows = min(kWarps, p.num_experts - e0);
    PrefetchL2(
        static_cast<const char*>(p.router_proj) + static_cast<size_t>(e0) * p.hidden * w_bytes,
        static_cast<uint32_t>(rows * p.hidden * w_bytes));
  }
  // The other constants too: the norm's scale (each thread reads back only the elements it
  // stored, so no barrier) and the experts' scales (read after the barriers below). Loaded after
  // the wait they were two more dependent round trips, one in the norm and one after top-k.
  float* scale = su + kTokens * p.hidden;
#pragma unroll 4
  for (int h = threadIdx.x; h < p.hidden; h += kThreads) scale[h] = p.router_scale[h];
  for (int e = threadIdx.x; e < p.num_experts; e += kThreads)
    expert_scale[e] = p.per_expert_scale[e];
  // And this warp's router row itself, into registers: its first kRowChunksPerLane chunks per
  // lane (all of a row up to hidden 4096), so at batch 1 no weight load is left after the wait.
  const int e = blockIdx.y * kWarps + warp;
  const bool has_row = e < p.num_experts;
  const char* row = static_cast<const char*>(p.router_proj) +
                    static_cast<size_t>(has_row ? e : 0) * p.hidden * w_bytes;
  auto row_chunk = [&](int h) {  // elements h .. h + 7 of the row, raw
    return __ldg(reinterpret_cast<const int4*>(row + static_cast<size_t>(h) * w_bytes));
  };
  int4 wraw[kRowChunksPerLane];
#pragma unroll
  for (int c = 0; c < kRowChunksPerLane; ++c) {
    const int h = lane * 8 + c * 32 * 8;
    wraw[c] = has_row && h < p.hidden ? row_chunk(h) : make_int4(0, 0, 0, 0);
  }
  PdlEnter();

  for (int tt = 0; tt < ntok; ++tt) {
    // x is read once (into shared memory), a round of kXPerThread loads a thread in flight
    // together (one round up to hidden 4096), like the router row's chunks below.
    const float* x = p.x + (t0 + tt) * p.ldx;
    float* s = su + tt * p.hidden;
    float ss = 0.f;
    for (int h0 = threadIdx.x; h0 < p.hidden; h0 += kXPerThread * kThreads) {
      float v[kXPerThread];
#pragma unroll
      for (int i = 0; i < kXPerThread; ++i) {
        const int h = h0 + i * kThreads;
        v[i] = h < p.hidden ? x[h] : 0.f;
      }
#pragma unroll
      for (int i = 0; i < kXPerThread; ++i) {
        const int h = h0 + i * kThreads;
        if (h < p.hidden) {
          s[h] = v[i];
          ss += v[i] * v[i];
        }
      }
    }
    ss = BlockSum(ss, red);  // its barriers also publish s
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(p.hidden) + p.eps);
#pragma unroll 4
    for (int h = threadIdx.x; h < p.hidden; h += kThreads) s[h] = ((s[h] * inv) * scale[h]) * root;
  }
  __syncthreads();

  if (has_row) {
    float acc[kTokens] = {0.f, 0.f, 0.f, 0.f};
    constexpr int kRound = kRowChunksPerLane * 32 * 8;     // elements per round of chunks
    for (int base = 0; base < p.hidden; base += kRound) {  // hidden % 8 == 0 (checked on launch)
#pragma unroll
      for (int c = 0; c < kRowChunksPerLane; ++c) {
        const int h = base + lane * 8 + c * 32 * 8;
        if (h < p.hidden) {
          const int4 raw = base == 0 ? wraw[c] : row_chunk(h);
          float wf[8];
          if (w_f16) {
            Load8(reinterpret_cast<const f16*>(&raw), wf);
          } else {
            Unpack8(*reinterpret_cast<const Bf16x8*>(&raw), wf);
          }
#pragma unroll
          for (int tt = 0; tt < kTokens; ++tt) {
            if (tt < ntok) {
#pragma unroll
              for (int j = 0; j < 8; ++j) acc[tt] += su[tt * p.hidden + h + j] * wf[j];
            }
          }
        }
      }
    }
#pragma unroll
    for (int tt = 0; tt < kTokens; ++tt) {
      const float v = WarpSum(acc[tt]);
      if (lane == 0 && tt < ntok) logits[(t0 + tt) * p.num_experts + e] = v;
    }
  }

  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) is_last = atomicAdd(&counters[blockIdx.x], 1) == gridDim.y - 1;
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  if (warp < ntok) {
    const int t = t0 + warp;
    float prob[kMaxExpertsPerLane];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < kMaxExpertsPerLane; ++i) {
      const int ex = lane + 32 * i;
      prob[i] = ex < p.num_experts ? __ldcg(logits + t * p.num_experts + ex) : -INFINITY;
      mx = fmaxf(mx, prob[i]);
    }
    mx = WarpMax(mx);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < kMaxExpertsPerLane; ++i) {
      prob[i] = lane + 32 * i < p.num_experts ? expf(prob[i] - mx) : 0.f;
      sum += prob[i];
    }
    sum = WarpSum(sum);
#pragma unroll
    for (int i = 0; i < kMaxExpertsPerLane; ++i) prob[i] /= sum;
    // Top-k by repeated arg-max (ties to the lower expert index, as the CPU reference): each
    // lane keeps its slots' keys, offers its best, and the warp picks with two reductions.
    uint32_t key[kMaxExpertsPerLane];
#pragma unroll
    for (int i = 0; i < kMaxExpertsPerLane; ++i) {
      key[i] = lane + 32 * i < p.num_experts ? ProbKey(prob[i]) : 0u;
    }
    float picked_sum = 0.f;
    float picked_p = 0.f;
    int picked_e = 0;
    for (int k = 0; k < p.top_k; ++k) {
      uint32_t mine = 0, mine_e = 0xffffffffu;
#pragma unroll
      for (int i = 0; i < kMaxExpertsPerLane; ++i) {
        if (key[i] > mine) {  // strictly greater: the lowest slot (expert) of equal keys stays
          mine = key[i];
          mine_e = lane + 32 * i;
        }
      }
      uint32_t best_key, best_e;
      WarpArgMaxKey(mine, mine_e, &best_key, &best_e);
      // No key left (only with NaN logits, whose keys are 0; every probability, 0 included, has
      // one): expert 0 at probability 0 keeps the ids in range.
      const float best = best_key > 0u ? __uint_as_float(best_key - 1u) : 0.f;
      if (best_key == 0u) best_e = 0;
#pragma unroll
      for (int i = 0; i < kMaxExpertsPerLane; ++i) {  // remove the winner
        if (best_key > 0u && best_e == static_cast<uint32_t>(lane + 32 * i)) key[i] = 0u;
      }
      if (lane == k) {  // lane k remembers the k-th pick
        picked_p = best;
        picked_e = static_cast<int>(best_e);
      }
      picked_sum += best;
    }
    if (lane < p.top_k) {
      p.topk_ids[t * p.top_k + lane] = picked_e;
      p.topk_weights[t * p.top_k + lane] = (picked_p / picked_sum) * expert_scale[picked_e];
    }
  }
  if (threadIdx.x == 0) counters[blockIdx.x] = 0;
}

}  // namespace

size_t MoeRouteWorkspaceBytes(int num_tokens, int num_experts) {
  return kCounterBytes + static_cast<size_t>(num_tokens) * num_experts * sizeof(float);
}

cudaError_t LaunchMoeRoute(const MoeRouteParams& p, void* workspace, cudaStream_t stream) {
  if (p.num_experts < 1 || p.num_experts > 32 * kMaxExpertsPerLane || p.top_k < 1 || p.top_k > 32 ||
      p.top_k > p.num_experts || p.hidden % 8 != 0 || workspace == nullptr || p.num_tokens < 0 ||
      p.num_tokens > kMaxTokenGroups * kTokens ||
      (p.router_type != DType::kBF16 && p.router_type != DType::kF16)) {
    return cudaErrorInvalidValue;
  }
  if (p.num_tokens == 0) return cudaSuccess;
  const size_t smem = static_cast<size_t>(kTokens + 1) * p.hidden * sizeof(float);
  cudaError_t err = cudaFuncSetAttribute(
      MoeRouteKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  int* counters = static_cast<int*>(workspace);
  float* logits = reinterpret_cast<float*>(static_cast<char*>(workspace) + kCounterBytes);
  dim3 grid((p.num_tokens + kTokens - 1) / kTokens, (p.num_experts + kWarps - 1) / kWarps);
  Launch(MoeRouteKernel, grid, kThreads, smem, stream, p, counters, logits);
  return cudaGetLastError();
}

}  // namespace gannet::kernels
