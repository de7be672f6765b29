// Cache warming for constant inputs: start moving byte ranges of weights into the L2 ahead of the
// kernels that will read them. Host-callable declarations only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace gannet::kernels {

inline constexpr int kPrefetchMaxRanges = 8;

// Up to kPrefetchMaxRanges byte ranges; each pointer 16-byte aligned, each length a multiple of 16.
struct PrefetchRanges {
  const void* ptr[kPrefetchMaxRanges] = {};
  uint64_t bytes[kPrefetchMaxRanges] = {};
  int count = 0;
};

// Whether the device has the bulk L2 prefetch this uses (sm_90 and newer); elsewhere a launch
// would only cost time, so callers skip it.
inline bool PrefetchL2Supported(int sm) { return sm >= 90; }

// One small kernel issuing L2 prefetches for `r`, then waiting for the kernel before it in the
// stream: it sits in a chain of programmatically launched kernels without breaking it (see
// prefetch.cu). Requires the alignment above and count in [1, kPrefetchMaxRanges].
cudaError_t LaunchPrefetchL2(const PrefetchRanges& r, cudaStream_t stream);

}  // namespace gannet::kernels
