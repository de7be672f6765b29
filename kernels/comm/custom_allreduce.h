// One-shot all-reduce between the ranks of a tensor-parallel group over peer-mapped device memory
// (NVLink/PCIe peer access in one process, CUDA IPC between processes), for the small messages
// of decode steps where NCCL's ring or tree pays more in latency than the bytes cost.
//
// Every rank owns one peer-visible workspace (CustomAllReduceWorkspaceBytes) and knows every
// rank's (its own included) as a device pointer. A call, per block b of the grid:
// The message moves in 16-byte chunks, a contiguous range of them per block. A call, per block b:
//   1. copies its slice of the input into its own workspace's data half (parity = the call's
//      epoch & 1, so a rank never overwrites data a slower peer may still read: the barrier of
//      the next call orders it after every peer finished this one);
//   2. writes the epoch into flag[b][rank] of every peer (release, system scope) and waits until
//      every peer has written it into its own flag[b][*] (acquire);
//   3. sums the slice over ranks in rank order (f32 accumulation, one rounding) into the output,
//      so every rank gets bit-identical values; each thread has its chunk's loads from every
//      peer in flight at once.
// Epochs live in device memory, one counter per block, advanced by the kernel itself, so a call
// recorded into a CUDA graph stays correct on every replay. Every rank must issue the same calls
// (size, type, grid) in the same order, as with NCCL. A block's data half alternates with its own
// calls, so a call whose grid outgrows the previous call's gives its extra blocks no barrier
// against a peer still reading that call: sizes may change only across something that orders
// the ranks (the runner's all-reduces within a step are all [tokens, hidden]; steps are
// separated by NCCL's logits gather and the host's wait). Fusing other work into the call with
// another grid must keep that.

#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gannet::kernels {

inline constexpr int kCustomAllReduceMaxRanks = 8;
inline constexpr int kCustomAllReduceMaxBlocks = 36;
// The largest message (bytes) a call takes; bigger ones go to NCCL.
inline constexpr size_t kCustomAllReduceMaxBytes = size_t{2} << 20;

enum class AllReduceType : uint8_t { kF32, kBF16 };

// Bytes of one rank's workspace: flags, per-block epochs, and two data halves. Must be zeroed
// before first use.
size_t CustomAllReduceWorkspaceBytes();

// x [n] in place. `workspaces[p]` is rank p's workspace as this device sees it (its own at
// [rank]). Sums in rank order. n * element size <= kCustomAllReduceMaxBytes. `abort` (device-
// readable, e.g. mapped pinned host memory) ends the wait for peers when it becomes non-zero:
// the group is then broken and the output undefined.
cudaError_t LaunchCustomAllReduce(void* x, int64_t n, AllReduceType type, int rank, int world,
                                  void* const* workspaces, const volatile int* abort,
                                  cudaStream_t stream);

}  // namespace gannet::kernels
