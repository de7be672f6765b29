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

// Errors that leave the CUDA context unusable ("sticky": every later call fails too), or the
// device itself gone. Anything else (a bad launch configuration, an allocation failure) is a
// failure of one call that later calls can recover from.
bool IsStickyCudaError(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorDevicesUnavailable:
    case cudaErrorContextIsDestroyed:
    case cudaErrorCudartUnloading:
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::Status CudaErrorStatus(cudaError_t err, const char* expr, const char* file, int line) {
  absl::Status st = InternalError("CUDA error {} ({}) at {}:{}: {}", cudaGetErrorName(err),
                                  cudaGetErrorString(err), BaseName(file), line, expr);
  return IsStickyCudaError(err) ? MarkDeviceLost(std::move(st)) : st;
}

absl::Status CublasErrorStatus(cublasStatus_t st, const char* expr, const char* file, int line) {
  return InternalError("cuBLASLt error {} ({}) at {}:{}: {}", cublasLtGetStatusName(st),
                       cublasLtGetStatusString(st), BaseName(file), line, expr);
}

}  // namespace gannet::backend
