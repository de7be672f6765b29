#include "kernels/comm/custom_allreduce.h"

#include <cuda_bf16.h>

#include "kernels/common/device_utils.cuh"

namespace gannet::kernels {

namespace {

constexpr int kThreads = 512;

// Workspace layout (bytes): flags [kMaxBlocks][kMaxRanks] u32 | epochs [kMaxBlocks] u32 |
// padding to 256 | data [2][kCustomAllReduceMaxBytes].
constexpr size_t kFlagsBytes = sizeof(uint32_t) * kCustomAllReduceMaxBlocks * kCustomAllReduceMaxRanks;
constexpr size_t kEpochOffset = kFlagsBytes;
constexpr size_t kDataOffset =
    (kEpochOffset + sizeof(uint32_t) * kCustomAllReduceMaxBlocks + 255) / 256 * 256;

struct Peers {
  char* ws[kCustomAllReduceMaxRanks];
};

__device__ __forceinline__ void StoreRelease(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t LoadAcquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Peer data is read around L1 (ld.global.cg): a line cached from an earlier call must not hide
// what the peer wrote since.
__device__ __forceinline__ float LoadPeer(const float* p) { return __ldcg(p); }
__device__ __forceinline__ float LoadPeer(const __nv_bfloat16* p) {
  return __bfloat162float(__ushort_as_bfloat16(__ldcg(reinterpret_cast<const unsigned short*>(p))));
}

template <typename T>
__global__ void __launch_bounds__(kThreads) OneShotKernel(T* x, int64_t n, int rank, int world,
                                                          Peers peers, const volatile int* abort) {
  const int b = blockIdx.x;
  char* own = peers.ws[rank];
  uint32_t* epochs = reinterpret_cast<uint32_t*>(own + kEpochOffset);
  __shared__ uint32_t epoch;
  if (threadIdx.x == 0) epoch = epochs[b] + 1;
  __syncthreads();
  const uint32_t e = epoch;
  const size_t half = (e & 1) * kCustomAllReduceMaxBytes;
  // The block's slice: a contiguous range, the same on every rank.
  const int64_t per = (n + gridDim.x - 1) / gridDim.x;
  const int64_t begin = min(n, per * b), end = min(n, begin + per);
  T* mine = reinterpret_cast<T*>(own + kDataOffset + half);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) mine[i] = x[i];
  // Every writer fences its own stores at system scope before the barrier: a fence orders only
  // the calling thread's writes, so the flag (below, after the barrier) cannot overtake any.
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x < world) {
    const int p = threadIdx.x;
    uint32_t* flags = reinterpret_cast<uint32_t*>(peers.ws[p]);
    StoreRelease(flags + b * kCustomAllReduceMaxRanks + rank, e);
    const uint32_t* own_flags = reinterpret_cast<const uint32_t*>(own);
    // A peer may already be one call ahead (it saw our flag, finished, and wrote its next epoch):
    // wait for "at least e" in wrap-around arithmetic, never for e exactly. A peer that never
    // arrives (its process died): the host raises `abort` and the wait ends.
    for (uint32_t spins = 1;
         static_cast<int32_t>(LoadAcquire(own_flags + b * kCustomAllReduceMaxRanks + p) - e) < 0;
         ++spins) {
      if ((spins & 1023) == 0 && *abort != 0) break;
    }
  }
  __syncthreads();
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    float s = 0.f;
    for (int p = 0; p < world; ++p) {
      const T* src = reinterpret_cast<const T*>(peers.ws[p] + kDataOffset + half);
      s += LoadPeer(src + i);
    }
    x[i] = FromFloat<T>(s);
  }
  if (threadIdx.x == 0) epochs[b] = e;
}

}  // namespace

size_t CustomAllReduceWorkspaceBytes() { return kDataOffset + 2 * kCustomAllReduceMaxBytes; }

cudaError_t LaunchCustomAllReduce(void* x, int64_t n, AllReduceType type, int rank, int world,
                                  void* const* workspaces, const volatile int* abort,
                                  cudaStream_t stream) {
  const size_t elem = type == AllReduceType::kF32 ? 4 : 2;
  if (n < 0 || world < 1 || world > kCustomAllReduceMaxRanks || rank < 0 || rank >= world ||
      static_cast<size_t>(n) * elem > kCustomAllReduceMaxBytes) {
    return cudaErrorInvalidValue;
  }
  if (n == 0) return cudaSuccess;
  Peers peers{};
  for (int p = 0; p < world; ++p) peers.ws[p] = static_cast<char*>(workspaces[p]);
  // Enough blocks to pull the peers' bytes at full rate, never more than the flags hold; the
  // same grid on every rank for the same n.
  const int64_t bytes = n * static_cast<int64_t>(elem);
  const int blocks = static_cast<int>(
      std::min<int64_t>(kCustomAllReduceMaxBlocks, std::max<int64_t>(1, bytes / (32 << 10))));
  if (type == AllReduceType::kF32) {
    OneShotKernel<float><<<blocks, kThreads, 0, stream>>>(static_cast<float*>(x), n, rank, world,
                                                          peers, abort);
  } else {
    OneShotKernel<__nv_bfloat16><<<blocks, kThreads, 0, stream>>>(
        static_cast<__nv_bfloat16*>(x), n, rank, world, peers, abort);
  }
  return cudaGetLastError();
}

}  // namespace gannet::kernels
