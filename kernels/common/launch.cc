#include "kernels/common/launch.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

namespace gannet::kernels {

bool PdlAllowed(const void* kernel) {
  static const bool enabled = [] {
    const char* v = std::getenv("GANNET_PDL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  if (!enabled) return false;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, bool> cache;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(device, kernel);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  cudaFuncAttributes attrs{};
  bool allowed = false;
  if (cudaFuncGetAttributes(&attrs, kernel) == cudaSuccess) {
    allowed = attrs.ptxVersion >= 90;
  } else {
    (void)cudaGetLastError();  // not cached: a later call may succeed
    return false;
  }
  cache.emplace(key, allowed);
  return allowed;
}

}  // namespace gannet::kernels
