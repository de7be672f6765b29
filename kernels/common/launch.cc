#include "kernels/common/launch.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <tuple>
#include <utility>

namespace gannet::kernels {

namespace {

bool EnvOn(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

int CurrentDevice() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return device;
}

}  // namespace

bool PdlAllowed(const void* kernel) {
  static const bool enabled = EnvOn("GANNET_PDL");
  return enabled && BuiltForSm90(kernel);
}

bool BuiltForSm90(const void* kernel) {
  const int device = CurrentDevice();
  if (device < 0) return false;
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
  const bool built = attrs.ptxVersion >= 90;
  std::unique_lock<std::shared_mutex> lock(mu);
  cache.emplace(key, built);  // two threads may both have asked: same answer, first one kept
  return built;
}

bool ClusterLaunchOk(const void* kernel, dim3 block, size_t smem, int cluster, int clusters) {
  static const bool enabled = EnvOn("GANNET_CLUSTER_MERGE");
  constexpr int kPortable = 8, kMaxNonPortable = 16;
  if (!enabled || cluster < 2 || cluster > kMaxNonPortable || !BuiltForSm90(kernel)) return false;
  const int device = CurrentDevice();
  if (device < 0) return false;
  // How many clusters of this shape the device runs at once (0: none fits).
  using Key = std::tuple<int, const void*, unsigned, size_t, int>;
  static std::shared_mutex mu;
  static std::map<Key, int> cache;
  const Key key{device, kernel, block.x * block.y * block.z, smem, cluster};
  int active = -1;
  {
    std::shared_lock<std::shared_mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) active = it->second;
  }
  if (active < 0) {
    if (cluster > kPortable &&
        cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
            cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 1;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = static_cast<unsigned>(cluster);
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(1, 1, static_cast<unsigned>(cluster));
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.attrs = &attr;
    config.numAttrs = 1;
    if (cudaOccupancyMaxActiveClusters(&active, kernel, &config) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    std::unique_lock<std::shared_mutex> lock(mu);
    cache.emplace(key, active);
  }
  return active >= 1 && (cluster <= kPortable || active >= clusters);
}

}  // namespace gannet::kernels
