// GPU sampling (sampling.h). Each pass streams the row (1 MB at vocab 262144) from L2; a sampled
// row costs up to 11 passes (max, 4 radix passes for top-k, 4 for top-p, mass, pick), a greedy one
// a single arg-max pass. Histograms use integer shared-memory atomics, so every result is exact and
// independent of thread scheduling.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/sampling/sampling.h"

namespace gannet::kernels {
namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ uint32_t OrderKey(float f) {
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Folds every thread's (value, index) candidate into the block's: the largest value, ties to
// the lowest index. On return every thread reads it from fred[0] / ired[0] (fred, ired: 32
// entries of shared memory).
__device__ __forceinline__ void BlockArgmax(float best, int best_i, float* fred, int* ired) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  auto fold = [&] {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, best_i, o);
      if (ov > best || (ov == best && oi < best_i)) {
        best = ov;
        best_i = oi;
      }
    }
  };
  fold();
  if (lane == 0) {
    fred[warp] = best;
    ired[warp] = best_i;
  }
  __syncthreads();
  if (warp == 0) {
    static_assert(kThreads == 1024, "one warp-sum slot per warp");
    best = fred[lane];
    best_i = ired[lane];
    fold();
    if (lane == 0) {
      fred[0] = best;
      ired[0] = best_i;
    }
  }
  __syncthreads();
}

struct RowCtx {
  const float* x;
  int vocab;
  float max_logit;
  float temperature;
  float min_p;
  uint32_t topk_key;  // keep keys >= this
};

// Fixed-point weight of token i (0 when filtered by min-p).
__device__ __forceinline__ uint64_t Weight(const RowCtx& c, float logit) {
  const float w = expf((logit - c.max_logit) / c.temperature);
  if (w < c.min_p) return 0;
  return __float2ull_rz(w * 4294967296.0f);
}

// The largest key t such that (sum over keys >= t, >= c.topk_key of weight or count) >= target.
// kMass: weights, else counts. Four 8-bit radix passes from the most significant digit.
template <bool kMass>
__device__ uint32_t RadixSelect(const RowCtx& c, uint64_t target, uint64_t* hist,
                                uint32_t* shared_prefix, uint64_t* shared_remaining) {
  uint32_t prefix = 0, mask = 0;
  uint64_t remaining = target;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kThreads) hist[b] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < c.vocab; i += kThreads) {
      const float v = c.x[i];
      const uint32_t key = OrderKey(v);
      if ((key & mask) != prefix || key < c.topk_key) continue;
      const uint64_t add = kMass ? Weight(c, v) : 1;
      if (add) atomicAdd(reinterpret_cast<unsigned long long*>(&hist[(key >> shift) & 255]), add);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int digit = 0;
      for (int b = 255; b >= 0; --b) {
        if (hist[b] >= remaining) {
          digit = b;
          break;
        }
        remaining -= hist[b];
      }
      *shared_prefix = prefix | (static_cast<uint32_t>(digit) << shift);
      *shared_remaining = remaining;
    }
    __syncthreads();
    prefix = *shared_prefix;
    remaining = *shared_remaining;
    mask |= 255u << shift;
    __syncthreads();
  }
  return prefix;
}

// Inclusive block-wide prefix sum of one uint64 per thread.
__device__ uint64_t BlockInclusiveScan(uint64_t v, uint64_t* warp_sums) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint64_t n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  if (lane == 31) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    uint64_t s = warp_sums[lane];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const uint64_t n = __shfl_up_sync(0xffffffffu, s, o);
      if (lane >= o) s += n;
    }
    warp_sums[lane] = s;
  }
  __syncthreads();
  return v + (warp > 0 ? warp_sums[warp - 1] : 0);
}

__global__ void __launch_bounds__(kThreads)
    SampleKernel(float* logits, int64_t ld, int vocab, const DrawParams* params,
                 const int32_t* banned, int ban_slots, int32_t* out_ids) {
  PdlEnter();
  __shared__ uint64_t hist[256];
  __shared__ uint64_t warp_sums[32];
  __shared__ float fred[32];
  __shared__ int ired[32];
  __shared__ uint32_t s_prefix;
  __shared__ uint64_t s_remaining;
  const DrawParams sp = params[blockIdx.x];
  const float* x = logits + blockIdx.x * ld;
  if (banned != nullptr) {
    // Masked in place, so the logits a caller copies out afterwards agree with the draw.
    if (threadIdx.x < ban_slots) {
      const int32_t id = banned[blockIdx.x * ban_slots + threadIdx.x];
      if (id >= 0 && id < vocab) logits[blockIdx.x * ld + id] = -INFINITY;
    }
    __syncthreads();
  }

  // Arg-max (value, then lowest index): needed by both paths.
  float best = -INFINITY;
  int best_i = vocab;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float v = x[i];
    if (v > best) {  // strided ascending i: the first maximum this thread sees wins
      best = v;
      best_i = i;
    }
  }
  BlockArgmax(best, best_i, fred, ired);
  const float max_logit = fred[0];
  if (sp.greedy()) {
    if (threadIdx.x == 0) out_ids[blockIdx.x] = ired[0];
    return;
  }

  RowCtx c{x, vocab, max_logit, sp.temperature, sp.min_p > 0.f ? sp.min_p : 0.f, 0u};
  if (sp.top_k > 0 && sp.top_k < vocab) {
    c.topk_key =
        RadixSelect<false>(c, static_cast<uint64_t>(sp.top_k), hist, &s_prefix, &s_remaining);
  }
  uint32_t threshold = c.topk_key;
  if (sp.top_p < 1.f) {
    // Mass of the top-k set, before min-p (top-p applies to the top-k distribution).
    RowCtx no_minp = c;
    no_minp.min_p = 0.f;
    uint64_t local = 0;
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const float v = x[i];
      if (OrderKey(v) >= c.topk_key) local += Weight(no_minp, v);
    }
    const uint64_t total = BlockInclusiveScan(local, warp_sums);
    __shared__ uint64_t s_total;
    if (threadIdx.x == kThreads - 1) s_total = total;
    __syncthreads();
    uint64_t target =
        static_cast<uint64_t>(static_cast<double>(sp.top_p) * static_cast<double>(s_total));
    if (target == 0) target = 1;
    const uint32_t tp = RadixSelect<true>(no_minp, target, hist, &s_prefix, &s_remaining);
    threshold = tp > threshold ? tp : threshold;
  }

  // Inverse CDF over the kept tokens in vocabulary order: each thread owns a contiguous chunk.
  const int chunk = (vocab + kThreads - 1) / kThreads;
  const int begin = min(vocab, threadIdx.x * chunk), end = min(vocab, begin + chunk);
  uint64_t mine = 0;
  for (int i = begin; i < end; ++i) {
    const float v = x[i];
    if (OrderKey(v) >= threshold) mine += Weight(c, v);
  }
  const uint64_t incl = BlockInclusiveScan(mine, warp_sums);
  __shared__ uint64_t s_kept;
  if (threadIdx.x == kThreads - 1) s_kept = incl;
  __syncthreads();
  const double u = static_cast<double>(SplitMix(sp.seed) >> 11) / 9007199254740992.0;
  const uint64_t r = static_cast<uint64_t>(u * static_cast<double>(s_kept));
  uint64_t run = incl - mine;
  if (r >= run && r < incl) {
    for (int i = begin; i < end; ++i) {
      const float v = x[i];
      if (OrderKey(v) < threshold) continue;
      run += Weight(c, v);
      if (run > r) {
        out_ids[blockIdx.x] = i;
        break;
      }
    }
  }
}

}  // namespace

cudaError_t LaunchSample(float* logits, int64_t ld, int rows, int vocab, const DrawParams* params,
                         const int32_t* banned, int ban_slots, int32_t* out_ids,
                         cudaStream_t stream) {
  if (vocab < 1 || ban_slots < 0 || ban_slots > kThreads) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  Launch(SampleKernel, rows, kThreads, 0, stream, logits, ld, vocab, params, banned, ban_slots,
         out_ids);
  return cudaGetLastError();
}

namespace {

__global__ void __launch_bounds__(kThreads)
    ShardArgmaxKernel(float* logits, int64_t ld, int cols, int64_t id_offset, const int32_t* banned,
                      int ban_slots, float* out, int64_t out_ld) {
  PdlEnter();
  __shared__ float fred[32];
  __shared__ int ired[32];
  float* x = logits + blockIdx.x * ld;
  if (banned != nullptr) {
    if (threadIdx.x < ban_slots) {
      const int64_t id = banned[blockIdx.x * ban_slots + threadIdx.x] - id_offset;
      if (id >= 0 && id < cols) x[id] = -INFINITY;
    }
    __syncthreads();
  }
  // (value, index) with the lowest index among equal values; index 0 when every value is -inf.
  float best = -INFINITY;
  int best_i = cols;
  for (int i = threadIdx.x; i < cols; i += kThreads) {
    const float v = x[i];
    if (v > best || (best_i == cols && v == best)) {
      best = v;
      best_i = i;
    }
  }
  BlockArgmax(best, best_i, fred, ired);
  if (threadIdx.x == 0) {
    const bool found = ired[0] < cols;
    out[blockIdx.x * out_ld] = found ? fred[0] : x[0];
    out[blockIdx.x * out_ld + 1] =
        __int_as_float(static_cast<int>((found ? ired[0] : 0) + id_offset));
  }
}

}  // namespace

cudaError_t LaunchShardArgmax(float* logits, int64_t ld, int rows, int cols, int64_t id_offset,
                              const int32_t* banned, int ban_slots, float* out, int64_t out_ld,
                              cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  Launch(ShardArgmaxKernel, rows, kThreads, 0, stream, logits, ld, cols, id_offset, banned,
         ban_slots, out, out_ld);
  return cudaGetLastError();
}

}  // namespace gannet::kernels
