// The L2 prefetch kernel (prefetch.h). A decode step of a small model is a chain of short kernels,
// many of which (norms, QKV prep, attention over a short context) leave DRAM idle while the next
// projection's weights wait to be read. This kernel, run beside that chain, asks the memory system
// to stream those weights into the L2 while the short kernels run.
//
// Not launched programmatically and never waited for by the step's chain: placed in the chain
// itself (issuing, allowing its dependent to launch, then waiting for its predecessor), each call
// added ~20 us to an E2B decode step whatever its size (16-32 MB from two to four 128-thread CTAs;
// H200, 105 calls a step: 2.43 -> 4.6 ms), consistent with a CTA living until its bulk requests
// are served. So the caller runs it on a stream branch of its own, and it spreads the requests
// over one-warp CTAs, one 16 KB request a thread.
#include <cuda_runtime.h>

#include "kernels/common/device_utils.cuh"
#include "kernels/memory/prefetch.h"

namespace gannet::kernels {
namespace {

constexpr int kThreads = 32;
constexpr uint64_t kChunk = 16 << 10;  // bytes per prefetch instruction

__global__ void __launch_bounds__(kThreads) PrefetchL2Kernel(PrefetchRanges r) {
  uint64_t i = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x;
  for (int k = 0; k < r.count; ++k) {
    const uint64_t chunks = (r.bytes[k] + kChunk - 1) / kChunk;
    if (i < chunks) {
      const uint64_t off = i * kChunk;
      PrefetchL2(static_cast<const char*>(r.ptr[k]) + off,
                 static_cast<uint32_t>(r.bytes[k] - off < kChunk ? r.bytes[k] - off : kChunk));
      return;
    }
    i -= chunks;
  }
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
  if (chunks == 0) return cudaSuccess;
  const uint64_t blocks = (chunks + kThreads - 1) / kThreads;
  if (blocks > (1u << 31) - 1) return cudaErrorInvalidValue;
  PrefetchL2Kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(r);
  return cudaGetLastError();
}

}  // namespace gannet::kernels
