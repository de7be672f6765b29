// The L2 prefetch kernel (prefetch.h). A decode step of a small model is a chain of short kernels,
// many of which (norms, QKV prep, attention over a short context) leave DRAM idle while the next
// projection's weights wait to be read. This kernel, placed in that chain, asks the memory system
// to stream those weights into the L2 while the short kernels run.
//
// Ordering, with programmatic dependent launch (kernels/common/launch.h): the kernel is launched
// while its predecessor runs, so its prefetches start at once. It then allows its own dependent to
// launch *before* waiting, and only then waits for its predecessor: the next kernel's CTAs are
// resident early as in the rest of the chain, and the next kernel's wait (which covers only this
// grid) still implies the predecessor finished, because this grid cannot finish before it.
// The prefetches carry no completion; they continue after the kernel exits.
#include <cuda_runtime.h>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/memory/prefetch.h"

namespace gannet::kernels {
namespace {

constexpr int kThreads = 128;
constexpr uint64_t kChunk = 64 << 10;  // bytes per prefetch instruction

__global__ void __launch_bounds__(kThreads) PrefetchL2Kernel(PrefetchRanges r) {
  uint64_t i = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x;
  for (int k = 0; k < r.count; ++k) {
    const uint64_t chunks = (r.bytes[k] + kChunk - 1) / kChunk;
    if (i < chunks) {
      const uint64_t off = i * kChunk;
      PrefetchL2(static_cast<const char*>(r.ptr[k]) + off,
                 static_cast<uint32_t>(r.bytes[k] - off < kChunk ? r.bytes[k] - off : kChunk));
      break;
    }
    i -= chunks;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace

cudaError_t LaunchPrefetchL2(const PrefetchRanges& r, cudaStream_t stream) {
  if (r.count < 1 || r.count > kPrefetchMaxRanges) return cudaErrorInvalidValue;
  uint64_t chunks = 0;
  for (int k = 0; k < r.count; ++k) {
    if (r.ptr[k] == nullptr || r.bytes[k] % 16 != 0 ||
        reinterpret_cast<uintptr_t>(r.ptr[k]) % 16 != 0) {
      return cudaErrorInvalidValue;
    }
    chunks += (r.bytes[k] + kChunk - 1) / kChunk;
  }
  if (chunks == 0) chunks = 1;  // empty ranges: the kernel still keeps the chain's order
  const uint64_t blocks = (chunks + kThreads - 1) / kThreads;
  if (blocks > 65535) return cudaErrorInvalidValue;  // > 536 GB: not a cache-sized request
  return Launch(PrefetchL2Kernel, static_cast<unsigned>(blocks), kThreads, 0, stream, r);
}

}  // namespace gannet::kernels
