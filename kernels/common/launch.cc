#include "kernels/common/launch.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>
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
  // No lock is held across the CUDA call below. cudaFuncGetAttributes loads the kernel if lazy
  // loading has not yet (CUDA_MODULE_LOADING=LAZY, the default), and a load waits until the
  // device's queued work drains. With tensor-parallel ranks as threads of one process that work
  // can be a collective waiting for another rank; had this lock been held, that rank's next
  // launch would block on it before reaching the collective: a deadlock, the suspected cause of
  // the in-process TP=2 hangs seen on two H200s (session 12).
  static std::shared_mutex mu;
  static std::map<std::pair<int, const void*>, bool> cache;
  const auto key = std::make_pair(device, kernel);
  {
    std::shared_lock<std::shared_mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  cudaFuncAttributes attrs{};
  if (cudaFuncGetAttributes(&attrs, kernel) != cudaSuccess) {
    (void)cudaGetLastError();  // not cached: a later call may succeed
    return false;
  }
  const bool allowed = attrs.ptxVersion >= 90;
  std::unique_lock<std::shared_mutex> lock(mu);
  cache.emplace(key, allowed);  // two threads may both have asked: same answer, first one kept
  return allowed;
}

}  // namespace gannet::kernels
