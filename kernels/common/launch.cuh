// Device side of programmatic dependent launch (launch.h). Both are no-ops below sm_90 and in
// kernels launched without the PDL attribute.
#pragma once

namespace gannet::kernels {

// Blocks until every grid this one depends on has completed and its writes are visible.
__device__ __forceinline__ void PdlWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next PDL kernel in the stream launch once every CTA of this grid has called this (or
// exited). Its PdlWait() still waits for this grid to complete.
__device__ __forceinline__ void PdlLaunchDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace gannet::kernels
