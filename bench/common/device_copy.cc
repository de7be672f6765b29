#include "bench/common/device_copy.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#ifdef GANNET_BENCH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace gannet::bench {

double MeasureCopyBandwidth() {
#ifdef GANNET_BENCH_CUDA
  const size_t bytes = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) {
    cudaFree(a);
    cudaGetLastError();
    return 0;
  }
  cudaMemset(a, 1, bytes);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> gbs;
  for (int i = 0; i < 12; ++i) {
    cudaEventRecord(e0);
    cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i >= 2) gbs.push_back(2.0 * bytes / (ms * 1e-3) / 1e9);
  }
  cudaFree(a);
  cudaFree(b);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(gbs.begin(), gbs.end());
  return gbs[gbs.size() / 2];
#else
  return 0;
#endif
}

}  // namespace gannet::bench
