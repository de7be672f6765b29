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

// Launches `kernel` like kernel<<<grid, block, smem, stream>>>(args...), with PDL when allowed.
// Every kernel launched here must call PdlEnter() before it touches memory another kernel writes
// (only constant inputs, such as weights, may be read before it).
template <typename... Params, typename... Args>
cudaError_t Launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = PdlAllowed(reinterpret_cast<const void*>(kernel)) ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace gannet::kernels
