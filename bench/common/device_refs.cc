#include "bench/common/device_refs.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#ifdef GANNET_BENCH_CUDA
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "absl/cleanup/cleanup.h"
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

double MeasureGemmTflops() {
#ifdef GANNET_BENCH_CUDA
  constexpr int64_t n = 8192;
  const size_t elems = static_cast<size_t>(n) * n;
  const size_t bytes = elems * sizeof(__nv_bfloat16), ws_bytes = size_t{64} << 20;
  // Everything acquired below is released on every return path.
  void *a = nullptr, *b = nullptr, *c = nullptr, *ws = nullptr;
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  absl::Cleanup release = [&] {
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (layout) cublasLtMatrixLayoutDestroy(layout);
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (lt) cublasLtDestroy(lt);
    for (void* p : {a, b, c, ws}) cudaFree(p);
    cudaGetLastError();
  };
  // Random bf16 in [-1, 1) (a cheap LCG): constant data would toggle fewer bits and run faster.
  std::vector<__nv_bfloat16> host(elems);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (auto& v : host) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = __float2bfloat16(static_cast<float>(state >> 40) / 8388608.0f - 1.0f);
  }
  cublasLtMatmulHeuristicResult_t heur = {};
  int found = 0;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
      cudaMalloc(&c, bytes) != cudaSuccess || cudaMalloc(&ws, ws_bytes) != cudaSuccess ||
      cudaMemcpy(a, host.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(b, host.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess ||
      cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatrixLayoutCreate(&layout, CUDA_R_16BF, n, n, n) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &ws_bytes, sizeof(ws_bytes)) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulAlgoGetHeuristic(lt, desc, layout, layout, layout, layout, pref, 1, &heur,
                                     &found) != CUBLAS_STATUS_SUCCESS ||
      found == 0) {
    return 0;
  }
  const float alpha = 1.0f, beta = 0.0f;
  std::vector<double> runs;
  for (int i = 0; i < 12; ++i) {
    cudaEventRecord(e0);
    if (cublasLtMatmul(lt, desc, &alpha, a, layout, b, layout, &beta, c, layout, c, layout,
                       &heur.algo, ws, ws_bytes, nullptr) != CUBLAS_STATUS_SUCCESS) {
      return 0;
    }
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i >= 2) runs.push_back(2.0 * n * n * n / (ms * 1e-3) / 1e12);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
#else
  return 0;
#endif
}

}  // namespace gannet::bench
