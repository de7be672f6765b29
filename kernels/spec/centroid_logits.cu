// The ordered-embedding head of the E2B/E4B MTP drafters (spec.h). Three launches per call:
//  1. a grid-wide fill of the logits rows with -inf (one CTA per 1 MB row would be slow);
//  2. one CTA per row picks the row's top_k clusters: an 8-bit radix select finds the k-th
//     largest cluster logit in four histogram passes, then the clusters above it and the
//     lowest-index ones equal to it (ties to the lower index, as the CPU reference) go to
//     `selected` in ascending order;
//  3. one CTA per (row, selected cluster) computes the cluster's tokens' logits, h . table[id],
//     one warp per token at a time, h held in shared memory as f32.
// Only top_k x (V / C) table rows are read (4096 x 256 bf16 = 2 MiB for the released drafters),
// not the whole 262144-row table.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/common/mat_access.cuh"
#include "kernels/spec/spec.h"

namespace gannet::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxPerThread = 16;  // clusters per thread: up to 4096 clusters

// Larger float, larger key (NaN aside).
__device__ __forceinline__ uint32_t OrderKey(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Exclusive prefix sums of two per-thread counts over the block, in thread order.
__device__ __forceinline__ void BlockScan2(int a, int b, int* ea, int* eb, int* sa, int* sb) {
  // sa/sb: [kThreads] shared scratch.
  sa[threadIdx.x] = a;
  sb[threadIdx.x] = b;
  __syncthreads();
  for (int off = 1; off < kThreads; off <<= 1) {
    const int va = threadIdx.x >= off ? sa[threadIdx.x - off] : 0;
    const int vb = threadIdx.x >= off ? sb[threadIdx.x - off] : 0;
    __syncthreads();
    sa[threadIdx.x] += va;
    sb[threadIdx.x] += vb;
    __syncthreads();
  }
  *ea = sa[threadIdx.x] - a;
  *eb = sb[threadIdx.x] - b;
  __syncthreads();
}

__global__ void FillKernel(float* logits, int64_t ld, int rows, int vocab) {
  PdlEnter();
  const int64_t total = static_cast<int64_t>(rows) * vocab;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    logits[(i / vocab) * ld + i % vocab] = -INFINITY;
  }
}

// One CTA per row: the top_k clusters by an 8-bit radix select of the k-th largest key (4
// histogram passes), then every key above it and the lowest-index keys equal to it, written to
// `selected` in ascending cluster order. Thread t owns clusters [t * per, (t + 1) * per).
__global__ void __launch_bounds__(kThreads)
    SelectClustersKernel(const float* clusters, int64_t ldc, int num_clusters, int top_k,
                         int32_t* selected) {
  PdlEnter();
  __shared__ int hist[256];
  __shared__ int scan_a[kThreads], scan_b[kThreads];
  __shared__ uint32_t s_prefix;
  __shared__ int s_remaining;
  const float* c = clusters + blockIdx.x * ldc;
  const int per = (num_clusters + kThreads - 1) / kThreads;
  const int begin = threadIdx.x * per, end = min(num_clusters, begin + per);
  uint32_t keys[kMaxPerThread];
#pragma unroll
  for (int j = 0; j < kMaxPerThread; ++j) keys[j] = begin + j < end ? OrderKey(c[begin + j]) : 0u;
  if (threadIdx.x == 0) {
    s_prefix = 0;
    s_remaining = top_k;
  }
  uint32_t mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    hist[threadIdx.x] = 0;  // kThreads == 256 bins
    __syncthreads();
    const uint32_t prefix = s_prefix;
#pragma unroll
    for (int j = 0; j < kMaxPerThread; ++j) {
      if (begin + j < end && (keys[j] & mask) == prefix)
        atomicAdd(&hist[(keys[j] >> shift) & 0xFF], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int remaining = s_remaining;
      int d = 255;
      for (; d > 0 && hist[d] < remaining; --d) remaining -= hist[d];
      s_remaining = remaining;  // how many to take among keys with this digit
      s_prefix = prefix | (static_cast<uint32_t>(d) << shift);
    }
    mask |= 0xFFu << shift;
    __syncthreads();
  }
  const uint32_t threshold = s_prefix;
  const int take_equal = s_remaining;
  int above = 0, equal = 0;
#pragma unroll
  for (int j = 0; j < kMaxPerThread; ++j) {
    if (begin + j < end) {
      above += keys[j] > threshold;
      equal += keys[j] == threshold;
    }
  }
  int above_before, equal_before;
  BlockScan2(above, equal, &above_before, &equal_before, scan_a, scan_b);
  // Selected before this thread's clusters: the keys above, and the equal ones still taken.
  int out = above_before + min(equal_before, take_equal);
  int eq = equal_before;
  int32_t* sel = selected + blockIdx.x * top_k;
#pragma unroll
  for (int j = 0; j < kMaxPerThread; ++j) {
    if (begin + j >= end) continue;
    const bool take = keys[j] > threshold || (keys[j] == threshold && eq++ < take_equal);
    if (take) sel[out++] = begin + j;
  }
}

// The table's type: bf16, or f16 on the fp16 compute path.
__device__ __forceinline__ float2 Pair(const bf16* w) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(w));
}
__device__ __forceinline__ float2 Pair(const f16* w) {
  return __half22float2(*reinterpret_cast<const __half2*>(w));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    ClusterDotsKernel(Mat h, const T* table, int width, const int32_t* ordering, int per,
                      const int32_t* selected, int top_k, float* logits, int64_t ld) {
  PdlEnter();
  extern __shared__ float hs[];  // [width]
  const int row = blockIdx.x / top_k;
  const int cluster = selected[blockIdx.x];
  for (int i = threadIdx.x; i < width; i += kThreads) hs[i] = LoadAt(h, row, i);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t* ids = ordering + static_cast<int64_t>(cluster) * per;
  for (int t = warp; t < per; t += kWarps) {
    const int32_t id = ids[t];
    const T* w = table + static_cast<int64_t>(id) * width;
    float acc = 0.0f;
    // Pairs per lane: the table rows are 4-byte aligned (width is even, checked).
    for (int i = 2 * lane; i < width; i += 64) {
      const float2 p = Pair(w + i);
      acc += hs[i] * p.x + hs[i + 1] * p.y;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) logits[row * ld + id] = acc;
  }
}

}  // namespace

cudaError_t LaunchCentroidLogits(Mat h, int rows, const void* table, DType table_type, int width,
                                 const float* cluster_logits, int64_t ldc, int num_clusters,
                                 const int32_t* ordering, int per_cluster, int top_k,
                                 int32_t* selected, float* logits, int64_t ld, int vocab,
                                 cudaStream_t stream) {
  if (num_clusters < 1 || num_clusters > kThreads * kMaxPerThread || top_k < 1 ||
      top_k > num_clusters || width < 2 || width % 2 != 0 || width > 12 * 1024 || per_cluster < 1 ||
      vocab < 1 || (table_type != DType::kBF16 && table_type != DType::kF16)) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0) return cudaSuccess;
  const int64_t cells = static_cast<int64_t>(rows) * vocab;
  const int fill_blocks =
      static_cast<int>(std::min<int64_t>((cells + kThreads * 8 - 1) / (kThreads * 8), 4096));
  Launch(FillKernel, fill_blocks, kThreads, 0, stream, logits, ld, rows, vocab);
  Launch(SelectClustersKernel, rows, kThreads, 0, stream, cluster_logits, ldc, num_clusters, top_k,
         selected);
  const size_t smem = width * sizeof(float);
  if (table_type == DType::kF16) {
    Launch(ClusterDotsKernel<f16>, rows * top_k, kThreads, smem, stream, h,
           static_cast<const f16*>(table), width, ordering, per_cluster, selected, top_k, logits,
           ld);
  } else {
    Launch(ClusterDotsKernel<bf16>, rows * top_k, kThreads, smem, stream, h,
           static_cast<const bf16*>(table), width, ordering, per_cluster, selected, top_k, logits,
           ld);
  }
  return cudaGetLastError();
}

}  // namespace gannet::kernels
