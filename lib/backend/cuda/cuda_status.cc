#include "lib/backend/cuda/cuda_status.h"

#include <string>

#include "lib/common/status.h"

namespace gannet::backend {
namespace {

const char* BaseName(const char* path) {
  const char* base = path;
  for (const char* p = path; *p; ++p) {
    if (*p == '/') base = p + 1;
  }
  return base;
}

}  // namespace

absl::Status CudaErrorStatus(cudaError_t err, const char* expr, const char* file, int line) {
  return InternalError("CUDA error {} ({}) at {}:{}: {}", cudaGetErrorName(err),
                       cudaGetErrorString(err), BaseName(file), line, expr);
}

absl::Status CublasErrorStatus(cublasStatus_t st, const char* expr, const char* file, int line) {
  return InternalError("cuBLASLt error {} ({}) at {}:{}: {}", cublasLtGetStatusName(st),
                       cublasLtGetStatusString(st), BaseName(file), line, expr);
}

}  // namespace gannet::backend
