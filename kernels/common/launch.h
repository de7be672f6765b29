// Kernel launches with programmatic dependent launch (PDL) where the loaded code supports it.
// Host-only header for the kernels' .cu files; the device half is PdlEnter (device_utils.cuh).
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace gannet::kernels {

// Whether `kernel` may be launched with programmatic stream serialization: its loaded code was
// built for compute_90 or newer (so PdlEnter is a real wait; the decision follows the binary
// the driver picked, which covers PTX of an older arch JIT-compiled on a newer GPU) and
// GANNET_PDL is not "0" (the switch for measuring with and without). Cached per device and kernel.
bool PdlAllowed(const void* kernel);

// Whether `kernel`'s loaded code was built for compute_90 or newer (device code under
// __CUDA_ARCH__ >= 900: PDL, thread-block clusters). Cached per device and kernel.
bool BuiltForSm90(const void* kernel);

// Whether a flash decode launch may merge its splits inside a thread-block cluster
// (flash_common_sm80.cuh, MergeSplitsInCluster): `kernel` is built for sm_90+, GANNET_CLUSTER_MERGE
// is not "0" (the switch for measuring with and without), and the device can co-schedule
// `cluster` CTAs of `block` threads and `smem` bytes -- for more than 8 (non-portable sizes) at
// least `clusters` of them at once, so the grid keeps one wave. Cached per device, kernel and
// shape.
bool ClusterLaunchOk(const void* kernel, dim3 block, size_t smem, int cluster, int clusters);

// Launch, with the grid cut into thread-block clusters of `cluster` CTAs (each grid dimension a
// multiple of the cluster's; sm_90+, see ClusterLaunchOk). A 1x1x1 cluster is a plain launch.
template <typename... Params, typename... Args>
cudaError_t LaunchInClusters(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                             cudaStream_t stream, dim3 cluster, Args&&... args) {
  cudaLaunchAttribute attr[2];
  int n = 0;
  if (PdlAllowed(reinterpret_cast<const void*>(kernel))) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster.x;
    attr[n].val.clusterDim.y = cluster.y;
    attr[n++].val.clusterDim.z = cluster.z;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = n;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// Launches `kernel` like kernel<<<grid, block, smem, stream>>>(args...), with PDL when allowed.
// Every kernel launched here must call PdlEnter() before it touches memory another kernel writes
// (only constant inputs, such as weights, may be read before it).
template <typename... Params, typename... Args>
cudaError_t Launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, Args&&... args) {
  return LaunchInClusters(kernel, grid, block, smem, stream, dim3(1, 1, 1),
                          std::forward<Args>(args)...);
}

}  // namespace gannet::kernels
