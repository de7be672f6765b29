// Kernel launches with programmatic dependent launch (PDL, sm_90+).
//
// A decode step is ~600 kernels, most of them short: each one's launch, CTA ramp-up and first
// memory round trip would otherwise start only after the previous kernel has fully drained. A
// kernel launched through LaunchPdl may start while its predecessor in the stream is still
// running; it must call PdlWait() (see launch.cuh) before it reads anything the predecessor writes
// or writes anything the predecessor may still read, and may do independent work before that (the
// GEMV loads its first weight tiles). PdlWait() returns once every prerequisite grid has completed
// and its memory is visible, so correctness never depends on where a predecessor triggers.
// Kernels launched the ordinary way after a PDL kernel wait for it as usual.
//
// Off on devices below sm_90 (the launch attribute does not exist there) and with GANNET_PDL=0.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace gannet::kernels {

// Whether launches on the current device use PDL (decided once per process).
bool PdlEnabled();

template <typename... Params, typename... Args>
cudaError_t LaunchPdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                      cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = PdlEnabled() ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace gannet::kernels
