// CUDA / cuBLASLt errors as absl::Status (docs/errors-and-abi.md: Internal, with the vendor's
// error name and the call site), and the macros the CUDA backend wraps every runtime call in.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace gannet::backend {

absl::Status CudaErrorStatus(cudaError_t err, const char* expr, const char* file, int line);
absl::Status CublasErrorStatus(cublasStatus_t st, const char* expr, const char* file, int line);

}  // namespace gannet::backend

#define GANNET_CUDA_RETURN_IF_ERROR(expr)                                                     \
  do {                                                                                        \
    const cudaError_t gannet_cuda_err_ = (expr);                                              \
    if (gannet_cuda_err_ != cudaSuccess) {                                                    \
      return ::gannet::backend::CudaErrorStatus(gannet_cuda_err_, #expr, __FILE__, __LINE__); \
    }                                                                                         \
  } while (0)

#define GANNET_CUBLAS_RETURN_IF_ERROR(expr)                                                      \
  do {                                                                                           \
    const cublasStatus_t gannet_cublas_st_ = (expr);                                             \
    if (gannet_cublas_st_ != CUBLAS_STATUS_SUCCESS) {                                            \
      return ::gannet::backend::CublasErrorStatus(gannet_cublas_st_, #expr, __FILE__, __LINE__); \
    }                                                                                            \
  } while (0)
