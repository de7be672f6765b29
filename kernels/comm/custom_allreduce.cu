#include "kernels/comm/custom_allreduce.h"

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/norm/post_norm_residual_row.cuh"

namespace gannet::kernels {

namespace {

// 256 threads: with every peer's chunk in registers a thread needs ~70 registers, and the
// single-GPU test runs all ranks' grids on one device, where they must be co-resident (8 ranks x
// 36 blocks).
constexpr int kThreads = 256;

// The push kernel's grid (its calls may have any grid: the call counter is one for all blocks).
constexpr int kPushBlocks = 32;

// Workspace layout (bytes): flags [kMaxBlocks][kMaxRanks] u32 | epochs [kMaxBlocks] u32 |
// push call counter and its blocks-done count (2 u32) | padding to 256 | data
// [2][kCustomAllReduceMaxBytes] | push slots [2][kMaxRanks][kCustomAllReducePushMaxBytes].
constexpr size_t kFlagsBytes =
    sizeof(uint32_t) * kCustomAllReduceMaxBlocks * kCustomAllReduceMaxRanks;
constexpr size_t kEpochOffset = kFlagsBytes;
constexpr size_t kPushCallOffset = kEpochOffset + sizeof(uint32_t) * kCustomAllReduceMaxBlocks;
constexpr size_t kDataOffset = (kPushCallOffset + sizeof(uint32_t) * 2 + 255) / 256 * 256;
constexpr size_t kPushOffset = kDataOffset + 2 * kCustomAllReduceMaxBytes;
constexpr size_t kPushSlotBytes = kCustomAllReducePushMaxBytes;
constexpr size_t kWorkspaceBytes = kPushOffset + 2 * kCustomAllReduceMaxRanks * kPushSlotBytes;

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

// Messages move in 16-byte chunks (8 bf16 or 4 f32): a block owns a contiguous range of chunks,
// the same on every rank whatever the alignment of each rank's x, and each thread issues the
// loads of its chunk from every peer before it sums them. One remote round trip per chunk and
// thread, so a message of up to kThreads * 16 bytes a block costs about one NVLink latency
// (the first version moved one element per load and paid a round trip per 2 bytes: 26 us for
// 16 KB on two H200s).
constexpr int kChunkBytes = 16;

template <typename T>
struct Chunk {
  static constexpr int kElems = kChunkBytes / static_cast<int>(sizeof(T));
};

// Peer data is read around L1 (ld.global.cg): a line cached from an earlier call must not hide
// what the peer wrote since.
__device__ __forceinline__ uint4 LoadPeer(const uint4* p) { return __ldcg(p); }

__device__ __forceinline__ void ToFloats(const uint4& v, float (&f)[4], const float*) {
  f[0] = __uint_as_float(v.x), f[1] = __uint_as_float(v.y);
  f[2] = __uint_as_float(v.z), f[3] = __uint_as_float(v.w);
}
__device__ __forceinline__ void ToFloats(const uint4& v, float (&f)[8], const __nv_bfloat16*) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
  }
}

// Chunk c of x (elements [c kElems, ...) clipped to n) into a 16-byte value, zero past n; a
// whole, aligned chunk is one load.
template <typename T>
__device__ __forceinline__ uint4 ReadChunk(const T* x, int64_t n, int64_t c, bool aligned) {
  constexpr int kE = Chunk<T>::kElems;
  const int64_t i0 = c * kE;
  if (aligned && i0 + kE <= n) return *reinterpret_cast<const uint4*>(x + i0);
  T v[kE];
#pragma unroll
  for (int e = 0; e < kE; ++e) v[e] = i0 + e < n ? x[i0 + e] : FromFloat<T>(0.f);
  uint4 out;
  memcpy(&out, v, sizeof(out));
  return out;
}

template <typename T>
__device__ __forceinline__ void WriteChunk(T* x, int64_t n, int64_t c, bool aligned,
                                           const float (&f)[Chunk<T>::kElems]) {
  constexpr int kE = Chunk<T>::kElems;
  const int64_t i0 = c * kE;
  T v[kE];
#pragma unroll
  for (int e = 0; e < kE; ++e) v[e] = FromFloat<T>(f[e]);
  if (aligned && i0 + kE <= n) {
    memcpy(reinterpret_cast<uint4*>(x + i0), v, sizeof(uint4));
    return;
  }
  for (int e = 0; e < kE && i0 + e < n; ++e) x[i0 + e] = v[e];
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    PullKernel(T* x, int64_t n, int rank, int world, Peers peers, const volatile int* abort) {
  constexpr int kE = Chunk<T>::kElems;
  // Launched like every kernel of a step (kernels::Launch): resident while the kernel before it
  // drains, and the next one (its weights' L2 prefetch) resident while this one waits for peers.
  // Everything below reads what earlier kernels wrote (x, the epochs), so the wait comes first.
  PdlEnter();
  const int b = blockIdx.x;
  char* own = peers.ws[rank];
  uint32_t* epochs = reinterpret_cast<uint32_t*>(own + kEpochOffset);
  __shared__ uint32_t epoch;
  if (threadIdx.x == 0) epoch = epochs[b] + 1;
  __syncthreads();
  const uint32_t e = epoch;
  const size_t half = (e & 1) * kCustomAllReduceMaxBytes;
  const bool aligned = (reinterpret_cast<uintptr_t>(x) & (kChunkBytes - 1)) == 0;
  // The block's slice: a contiguous range of chunks, the same on every rank.
  const int64_t chunks = (n + kE - 1) / kE;
  const int64_t per = (chunks + gridDim.x - 1) / gridDim.x;
  const int64_t begin = min(chunks, per * b), end = min(chunks, begin + per);
  uint4* mine = reinterpret_cast<uint4*>(own + kDataOffset + half);
  for (int64_t c = begin + threadIdx.x; c < end; c += kThreads)
    mine[c] = ReadChunk(x, n, c, aligned);
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
  for (int64_t c = begin + threadIdx.x; c < end; c += kThreads) {
    uint4 v[kCustomAllReduceMaxRanks];
#pragma unroll
    for (int p = 0; p < kCustomAllReduceMaxRanks; ++p) {  // every peer's load in flight at once
      if (p < world)
        v[p] = LoadPeer(reinterpret_cast<const uint4*>(peers.ws[p] + kDataOffset + half) + c);
    }
    float s[kE] = {};
#pragma unroll
    for (int p = 0; p < kCustomAllReduceMaxRanks;
         ++p) {  // in rank order: bit-identical on every rank
      if (p < world) {
        float f[kE];
        ToFloats(v[p], f, static_cast<const T*>(nullptr));
#pragma unroll
        for (int i = 0; i < kE; ++i) s[i] += f[i];
      }
    }
    WriteChunk(x, n, c, aligned, s);
  }
  if (threadIdx.x == 0) epochs[b] = e;
}

// The push all-reduce (messages up to kCustomAllReducePushMaxBytes). Each rank stores its chunks
// straight into a slot of every peer's workspace, and a chunk's arrival is its data itself: a slot
// holds zeros until a peer's data lands, and a rank never sends a zero element (it sends +0 as -0,
// which changes no sum: the sum starts at +0 and +0 + -0 = +0). So there is no flag, no fence
// and no barrier: a call costs one one-way NVLink write plus local polling, where the pull kernel
// pays a fence, a flag round trip and a remote read (6-8 us a call on two H200s, against 3.5-4.5
// for this one up to 64 KB).
//   - Arrival is checked per element (2 or 4 bytes), so a 16-byte store that lands in pieces is
//     waited for, not read half-written.
//   - The thread that sums a chunk zeroes the slots it read, right away, so after a call every
//     slot is zero again except data peers already sent for the next call.
//   - Two slot sets, alternating with the calls (one call counter in the workspace, advanced by
//     the call's last block to finish, so graph replays stay in step and a call may have any
//     grid). A peer can be at most one call ahead (it cannot finish call k+1 without this rank's
//     data of k+1, sent after this rank finished call k), so its call k+1 writes the other set
//     than the one being read, and its call k+2, which reuses this set, comes after this rank's
//     zeroing of call k (kernel order) was sent on its way. Pull calls in between change nothing:
//     they touch neither the slots nor the counter.
//   - Both sizes of element share the slots: what a call wrote and did not leave zeroed is never
//     read with another type, because the slots are zero between calls.
//   - Chunk c of a message is slot chunk c whatever kernel moves it, so the fused kernel below
//     (one block per row) and this one (a range of chunks per block) agree on the slots.
__device__ __forceinline__ void StoreVolatile(uint4* p, const uint4& v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ uint4 LoadVolatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

// Every element non-zero (arrived): per 4-byte word for f32, per half word for bf16.
__device__ __forceinline__ bool Arrived(const uint4& v, const float*) {
  return v.x != 0 && v.y != 0 && v.z != 0 && v.w != 0;
}
__device__ __forceinline__ bool HalvesNonZero(uint32_t w) {
  return (w & 0xFFFFu) != 0 && (w >> 16) != 0;
}
__device__ __forceinline__ bool Arrived(const uint4& v, const __nv_bfloat16*) {
  return HalvesNonZero(v.x) && HalvesNonZero(v.y) && HalvesNonZero(v.z) && HalvesNonZero(v.w);
}
// +0 elements as -0 (only the sign bit set), so no element that is sent reads as "not arrived".
__device__ __forceinline__ uint32_t NoZeroWord(uint32_t w, const float*) {
  return w == 0 ? 0x80000000u : w;
}
__device__ __forceinline__ uint32_t NoZeroWord(uint32_t w, const __nv_bfloat16*) {
  if ((w & 0xFFFFu) == 0) w |= 0x8000u;
  if ((w >> 16) == 0) w |= 0x80000000u;
  return w;
}

// A push call's place in the workspace: its slot set, and the counter the last block advances.
struct PushCall {
  size_t set;         // byte offset of the call's slot set within the push slots
  uint32_t* counter;  // [0] the call counter, [1] blocks done with this call
  uint32_t call;
};

// Every thread of every block reads the counter before any block advances it (PushCallEnd).
__device__ __forceinline__ PushCall PushCallBegin(char* own) {
  PushCall pc;
  pc.counter = reinterpret_cast<uint32_t*>(own + kPushCallOffset);
  pc.call = pc.counter[0];
  pc.set = (pc.call & 1) * kCustomAllReduceMaxRanks * kPushSlotBytes;
  return pc;
}

// The call's last block to get here advances the counter for the next call (which reads it after
// this kernel has finished: kernel order). A grid of one block (the fused kernel at batch 1) is its
// own last block: it stores the next call without the atomic's round trip, which the kernel's
// exit would wait for.
__device__ __forceinline__ void PushCallEnd(const PushCall& pc) {
  __syncthreads();
  if (gridDim.x == 1) {
    if (threadIdx.x == 0) pc.counter[0] = pc.call + 1;
    return;
  }
  if (threadIdx.x == 0 && atomicAdd(pc.counter + 1, 1u) == gridDim.x - 1) {
    pc.counter[1] = 0;
    pc.counter[0] = pc.call + 1;
  }
}

// Chunk c of sender `sender`'s slot, in the call's set of workspace ws.
__device__ __forceinline__ uint4* PushSlot(char* ws, const PushCall& pc, int sender, int64_t c) {
  return reinterpret_cast<uint4*>(ws + kPushOffset + pc.set + sender * kPushSlotBytes) + c;
}

// Chunk c (as read from x) into slot `rank` of every peer's current set.
template <typename T>
__device__ __forceinline__ void PushChunk(uint4 v, int64_t c, int rank, int world,
                                          const Peers& peers, const PushCall& pc) {
  const T* type = nullptr;
  v = make_uint4(NoZeroWord(v.x, type), NoZeroWord(v.y, type), NoZeroWord(v.z, type),
                 NoZeroWord(v.w, type));
#pragma unroll
  for (int p = 0; p < kCustomAllReduceMaxRanks; ++p) {
    if (p < world && p != rank) {
      StoreVolatile(PushSlot(peers.ws[p], pc, rank, c), v);
    }
  }
}

// s = the sum over ranks, in rank order, of chunk c (this rank's: `mine`), once every peer's has
// landed in this rank's slots; zeroes those slots. False if `abort` ended the wait (s undefined).
template <typename T>
__device__ __forceinline__ bool GatherChunk(const uint4& mine, int64_t c, int rank, int world,
                                            char* own, const PushCall& pc,
                                            const volatile int* abort,
                                            float (&s)[Chunk<T>::kElems]) {
  constexpr int kE = Chunk<T>::kElems;
  const T* type = nullptr;
  uint4 v[kCustomAllReduceMaxRanks];
#pragma unroll
  for (int p = 0; p < kCustomAllReduceMaxRanks; ++p) {  // every peer's load in flight at once
    if (p < world && p != rank) {
      v[p] = LoadVolatile(PushSlot(own, pc, p, c));
    }
  }
#pragma unroll
  for (int i = 0; i < kE; ++i) s[i] = 0.f;
#pragma unroll
  for (int p = 0; p < kCustomAllReduceMaxRanks;
       ++p) {  // in rank order: bit-identical on every rank
    if (p < world) {
      if (p != rank) {
        uint4* slot = PushSlot(own, pc, p, c);
        // A peer that never sends (its process died): the host raises `abort` and the wait ends.
        for (uint32_t spins = 1; !Arrived(v[p], type); ++spins) {
          if ((spins & 1023) == 0 && *abort != 0) return false;
          v[p] = LoadVolatile(slot);
        }
        StoreVolatile(slot, make_uint4(0, 0, 0, 0));
      }
      float f[kE];
      ToFloats(p == rank ? mine : v[p], f, type);
#pragma unroll
      for (int i = 0; i < kE; ++i) s[i] += f[i];
    }
  }
  return true;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    PushKernel(T* x, int64_t n, int rank, int world, Peers peers, const volatile int* abort) {
  constexpr int kE = Chunk<T>::kElems;
  PdlEnter();  // x is the previous kernel's output
  char* own = peers.ws[rank];
  const PushCall pc = PushCallBegin(own);
  const bool aligned = (reinterpret_cast<uintptr_t>(x) & (kChunkBytes - 1)) == 0;
  const int64_t chunks = (n + kE - 1) / kE;
  const int64_t per = (chunks + gridDim.x - 1) / gridDim.x;
  const int64_t begin = min(chunks, per * blockIdx.x), end = min(chunks, begin + per);
  for (int64_t c = begin + threadIdx.x; c < end; c += kThreads) {
    PushChunk<T>(ReadChunk(x, n, c, aligned), c, rank, world, peers, pc);
  }
  for (int64_t c = begin + threadIdx.x; c < end; c += kThreads) {
    float s[kE];
    if (!GatherChunk<T>(ReadChunk(x, n, c, aligned), c, rank, world, own, pc, abort, s)) break;
    WriteChunk(x, n, c, aligned, s);
  }
  PushCallEnd(pc);
}

// The push all-reduce of bf16 rows [rows, n] fused with PostNormResidual (norm.h) of the sum: one
// block of kPostNormRowThreads per row; thread t moves chunk t of its row (n <= 8 * that), rounds
// the sum to bf16 as the all-reduce stores it, and the row then goes through the same arithmetic
// as the row-in-registers PostNormResidual kernel (post_norm_residual_row.cuh), so the result is
// the two ops' bit for bit. x is left as this rank's addend.
constexpr int kFusedMaxHidden = 8 * kPostNormRowThreads;

template <int kPer, typename OT>
__global__ void __launch_bounds__(kPostNormRowThreads)
    PushPostNormResidualKernel(const __nv_bfloat16* __restrict__ x, int n, int rank, int world,
                               Peers peers, const volatile int* abort,
                               const float* __restrict__ post_w, float* res, int64_t ldr,
                               const float* scalar, const float* next_w, OT* next_out, int64_t ldo,
                               float eps) {
  __shared__ __nv_bfloat16 row_sum[kFusedMaxHidden];
  __shared__ float red[32];
  float xv[kPer], rv[kPer];
  // Constants: read while the previous kernel drains.
  const PostNormConsts<kPer> consts = LoadPostNormConsts<kPer>(post_w, scalar, next_w, n);
  PdlEnter();
  char* own = peers.ws[rank];
  const PushCall pc = PushCallBegin(own);
  const int64_t row = blockIdx.x;
  const int row_chunks = n / Chunk<__nv_bfloat16>::kElems;
  const int64_t c = row * row_chunks + threadIdx.x;  // this thread's chunk of the message
  const bool mover = threadIdx.x < row_chunks;
  uint4 mine{};
  if (mover) {
    mine = reinterpret_cast<const uint4*>(x)[c];
    PushChunk<__nv_bfloat16>(mine, c, rank, world, peers, pc);
  }
  LoadRowElems(res, ldr, row, n, rv);
  if (mover) {
    float s[Chunk<__nv_bfloat16>::kElems];
    // On abort the row is garbage, as the output of an aborted call is; every thread still
    // reaches the block's reductions.
    (void)GatherChunk<__nv_bfloat16>(mine, c, rank, world, own, pc, abort, s);
#pragma unroll
    for (int e = 0; e < Chunk<__nv_bfloat16>::kElems; ++e) {
      row_sum[threadIdx.x * Chunk<__nv_bfloat16>::kElems + e] = FromFloat<__nv_bfloat16>(s[e]);
    }
  }
  __syncthreads();
  LoadRowElems(row_sum, 0, 0, n, xv);
  PostNormResidualRow<kPer>(xv, rv, consts, res + row * ldr,
                            next_out == nullptr ? nullptr : next_out + row * ldo, eps, n, red);
  PushCallEnd(pc);
}

// Whether the kernels take rank `rank` of a group of `world`.
bool RankInGroup(int rank, int world) {
  return world >= 1 && world <= kCustomAllReduceMaxRanks && rank >= 0 && rank < world;
}

Peers PeersOf(void* const* workspaces, int world) {
  Peers peers{};
  for (int p = 0; p < world; ++p) peers.ws[p] = static_cast<char*>(workspaces[p]);
  return peers;
}

}  // namespace

size_t CustomAllReduceWorkspaceBytes() { return kWorkspaceBytes; }

cudaError_t LaunchCustomAllReduce(void* x, int64_t n, AllReduceType type, int rank, int world,
                                  void* const* workspaces, const volatile int* abort,
                                  cudaStream_t stream) {
  const size_t elem = type == AllReduceType::kF32 ? 4 : 2;
  if (n < 0 || !RankInGroup(rank, world) ||
      static_cast<size_t>(n) * elem > kCustomAllReduceMaxBytes) {
    return cudaErrorInvalidValue;
  }
  if (n == 0) return cudaSuccess;
  const Peers peers = PeersOf(workspaces, world);
  if (static_cast<size_t>(n) * elem <= kCustomAllReducePushMaxBytes) {
    if (type == AllReduceType::kF32) {
      return Launch(PushKernel<float>, dim3(kPushBlocks), dim3(kThreads), 0, stream,
                    static_cast<float*>(x), n, rank, world, peers, abort);
    }
    return Launch(PushKernel<__nv_bfloat16>, dim3(kPushBlocks), dim3(kThreads), 0, stream,
                  static_cast<__nv_bfloat16*>(x), n, rank, world, peers, abort);
  }
  // One chunk per thread where the flags allow (latency: one remote round trip), never more
  // blocks than the flags hold; the same grid on every rank for the same n.
  const int64_t chunks = (n * static_cast<int64_t>(elem) + kChunkBytes - 1) / kChunkBytes;
  const int blocks = static_cast<int>(
      std::min<int64_t>(kCustomAllReduceMaxBlocks, (chunks + kThreads - 1) / kThreads));
  if (type == AllReduceType::kF32) {
    return Launch(PullKernel<float>, dim3(blocks), dim3(kThreads), 0, stream,
                  static_cast<float*>(x), n, rank, world, peers, abort);
  }
  return Launch(PullKernel<__nv_bfloat16>, dim3(blocks), dim3(kThreads), 0, stream,
                static_cast<__nv_bfloat16*>(x), n, rank, world, peers, abort);
}

bool CustomAllReduceFuses(const void* x, int64_t rows, int64_t n) {
  return rows >= 1 && n >= 1 && n <= kFusedMaxHidden && n % Chunk<__nv_bfloat16>::kElems == 0 &&
         static_cast<size_t>(rows * n) * 2 <= kCustomAllReducePushMaxBytes &&
         (reinterpret_cast<uintptr_t>(x) & (kChunkBytes - 1)) == 0;
}

cudaError_t LaunchCustomAllReducePostNormResidual(const PostNormResidualArgs& a, int rank,
                                                  int world, void* const* workspaces,
                                                  const volatile int* abort, cudaStream_t stream) {
  if (!RankInGroup(rank, world) || !CustomAllReduceFuses(a.x, a.rows, a.n) || a.residual_ld < a.n ||
      (a.next_out != nullptr && a.next_out_ld < a.n)) {
    return cudaErrorInvalidValue;
  }
  const Peers peers = PeersOf(workspaces, world);
  return WithRowPer(a.n, [&](auto per) {
    return Launch(PushPostNormResidualKernel<decltype(per)::value, __nv_bfloat16>, dim3(a.rows),
                  dim3(kPostNormRowThreads), 0, stream, static_cast<const __nv_bfloat16*>(a.x), a.n,
                  rank, world, peers, abort, a.post_weight, a.residual, a.residual_ld, a.scalar,
                  a.next_weight, static_cast<__nv_bfloat16*>(a.next_out), a.next_out_ld, a.eps);
  });
}

}  // namespace gannet::kernels
