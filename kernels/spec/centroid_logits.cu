// The ordered-embedding head of the E2B/E4B MTP drafters (spec.h). Two launches per call:
//  1. one CTA per row picks the row's top_k clusters by repeated arg-max over the cluster logits
//     (ties to the lower index, as the CPU reference), writes them to `selected` and sets the
//     whole logits row to -inf;
//  2. one CTA per (row, selected cluster) computes the cluster's per-cluster tokens' logits,
//     h . table[id], one warp per token at a time, h held in shared memory as f32.
// Only top_k x (V / C) table rows are read (4096 x 256 bf16 = 2 MiB for the released drafters),
// not the whole 262144-row table.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/mat_access.cuh"
#include "kernels/spec/spec.h"

namespace gannet::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__global__ void __launch_bounds__(kThreads) SelectClustersKernel(const float* clusters, int64_t ldc,
                                                                 int num_clusters, int top_k,
                                                                 int32_t* selected, float* logits,
                                                                 int64_t ld, int vocab) {
  extern __shared__ unsigned char keep[];  // [num_clusters]
  __shared__ float best_v[kThreads];
  __shared__ int best_i[kThreads];
  const float* c = clusters + blockIdx.x * ldc;
  for (int i = threadIdx.x; i < num_clusters; i += kThreads) keep[i] = 0;
  __syncthreads();
  for (int k = 0; k < top_k; ++k) {
    float bv = -INFINITY;
    int bi = num_clusters;  // none
    for (int i = threadIdx.x; i < num_clusters; i += kThreads) {
      if (!keep[i] && (bi == num_clusters || c[i] > bv)) {
        bv = c[i];
        bi = i;
      }
    }
    best_v[threadIdx.x] = bv;
    best_i[threadIdx.x] = bi;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) {
        const float ov = best_v[threadIdx.x + s];
        const int oi = best_i[threadIdx.x + s];
        const int mi = best_i[threadIdx.x];
        if (oi < num_clusters && (mi == num_clusters || ov > best_v[threadIdx.x] ||
                                  (ov == best_v[threadIdx.x] && oi < mi))) {
          best_v[threadIdx.x] = ov;
          best_i[threadIdx.x] = oi;
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      keep[best_i[0]] = 1;
      selected[blockIdx.x * top_k + k] = best_i[0];
    }
    __syncthreads();
  }
  float* row = logits + blockIdx.x * ld;
  for (int i = threadIdx.x; i < vocab; i += kThreads) row[i] = -INFINITY;
}

__global__ void __launch_bounds__(kThreads) ClusterDotsKernel(Mat h, const bf16* table, int width,
                                                              const int32_t* ordering, int per,
                                                              const int32_t* selected, int top_k,
                                                              float* logits, int64_t ld) {
  extern __shared__ float hs[];  // [width]
  const int row = blockIdx.x / top_k;
  const int cluster = selected[blockIdx.x];
  for (int i = threadIdx.x; i < width; i += kThreads) hs[i] = LoadAt(h, row, i);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t* ids = ordering + static_cast<int64_t>(cluster) * per;
  for (int t = warp; t < per; t += kWarps) {
    const int32_t id = ids[t];
    const bf16* w = table + static_cast<int64_t>(id) * width;
    float acc = 0.0f;
    // Pairs of bf16 per lane: the table rows are 4-byte aligned (width is even, checked).
    for (int i = 2 * lane; i < width; i += 64) {
      const __nv_bfloat162 p = *reinterpret_cast<const __nv_bfloat162*>(w + i);
      acc += hs[i] * __low2float(p) + hs[i + 1] * __high2float(p);
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) logits[row * ld + id] = acc;
  }
}

}  // namespace

cudaError_t LaunchCentroidLogits(Mat h, int rows, const void* table, int width,
                                 const float* cluster_logits, int64_t ldc, int num_clusters,
                                 const int32_t* ordering, int per_cluster, int top_k,
                                 int32_t* selected, float* logits, int64_t ld, int vocab,
                                 cudaStream_t stream) {
  if (num_clusters < 1 || num_clusters > 48 * 1024 || top_k < 1 || top_k > num_clusters ||
      width < 2 || width % 2 != 0 || width > 12 * 1024 || per_cluster < 1 || vocab < 1) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0) return cudaSuccess;
  SelectClustersKernel<<<rows, kThreads, num_clusters, stream>>>(
      cluster_logits, ldc, num_clusters, top_k, selected, logits, ld, vocab);
  ClusterDotsKernel<<<rows * top_k, kThreads, width * sizeof(float), stream>>>(
      h, static_cast<const bf16*>(table), width, ordering, per_cluster, selected, top_k, logits,
      ld);
  return cudaGetLastError();
}

}  // namespace gannet::kernels
