#include "kernels/common/launch.h"

#include <cstdlib>
#include <cstring>

namespace gannet::kernels {

bool PdlEnabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("GANNET_PDL");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major >= 9;
  }();
  return enabled;
}

}  // namespace gannet::kernels
