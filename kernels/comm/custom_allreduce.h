// All-reduce between the ranks of a tensor-parallel group over peer-mapped device memory
// (NVLink/PCIe peer access in one process, CUDA IPC between processes), for the small messages
// of decode steps where NCCL's ring or tree pays more in latency than the bytes cost.
//
// Every rank owns one peer-visible workspace (CustomAllReduceWorkspaceBytes) and knows every
// rank's (its own included) as a device pointer. Messages move in 16-byte chunks, a contiguous
// range of them per block, the same on every rank; every rank sums in rank order (f32
// accumulation, one rounding), so all get bit-identical values. Two kernels:
//  - push (messages up to kCustomAllReducePushMaxBytes): each rank stores its chunks into a slot
//    of every peer's workspace; a slot is zero until data lands, and no rank sends a zero element
//    (+0 goes as -0), so each rank polls its own slots, sums and zeroes them. No flag, fence or
//    barrier: one one-way write per call. Fixed grid; details at PushKernel.
//  - pull (larger messages), per block b of the grid:
//   1. copies its slice of the input into its own workspace's data half (parity = the call's
//      epoch & 1, so a rank never overwrites data a slower peer may still read: the barrier of
//      the next call orders it after every peer finished this one);
//   2. writes the epoch into flag[b][rank] of every peer (release, system scope) and waits until
//      every peer has written it into its own flag[b][*] (acquire);
//   3. sums the slice over ranks into the output; each thread has its chunk's loads from every
//      peer in flight at once.
// Call counters and epochs live in device memory, one per block, advanced by the kernels
// themselves, so a call recorded into a CUDA graph stays correct on every replay. Every rank must
// issue the same calls (size, type) in the same order, as with NCCL. In the pull kernel a block's
// data half alternates with its own calls, so a call whose grid outgrows the previous pull call's
// gives its extra blocks no barrier against a peer still reading that call: sizes above the push
// limit may change only across something that orders the ranks (the runner's all-reduces within
// a step are all [tokens, hidden]; steps are separated by NCCL's logits gather and the host's
// wait). Fusing other work into a call with another grid must keep that.

#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gannet::kernels {

inline constexpr int kCustomAllReduceMaxRanks = 8;
inline constexpr int kCustomAllReduceMaxBlocks = 36;
// The largest message (bytes) a call takes; bigger ones go to NCCL.
inline constexpr size_t kCustomAllReduceMaxBytes = size_t{2} << 20;
// The largest message the push kernel takes (its slots: 2 x kCustomAllReduceMaxRanks of this size
// a workspace); larger ones go through the pull kernel.
inline constexpr size_t kCustomAllReducePushMaxBytes = size_t{1} << 20;

enum class AllReduceType : uint8_t { kF32, kBF16 };

// Bytes of one rank's workspace: flags, per-block epochs and call counters, the pull kernel's two
// data halves and the push kernel's slots. Must be zeroed before first use.
size_t CustomAllReduceWorkspaceBytes();

// x [n] in place. `workspaces[p]` is rank p's workspace as this device sees it (its own at
// [rank]). Sums in rank order. n * element size <= kCustomAllReduceMaxBytes. `abort` (device-
// readable, e.g. mapped pinned host memory) ends the wait for peers when it becomes non-zero:
// the group is then broken and the output undefined.
cudaError_t LaunchCustomAllReduce(void* x, int64_t n, AllReduceType type, int rank, int world,
                                  void* const* workspaces, const volatile int* abort,
                                  cudaStream_t stream);

// The push all-reduce of bf16 rows fused with PostNormResidual (kernels/norm/norm.h) of the sum:
//   residual = (residual + RmsNorm(sum over ranks of x) * post_weight) * (*scalar if not null);
//   then, if next_out: next_out = RmsNorm(residual) (* next_weight if not null).
// The same bits as LaunchCustomAllReduce then LaunchPostNormResidual, without writing the sum
// (x is left as this rank's addend) and in one kernel instead of two. residual f32 [rows,
// residual_ld], next_out bf16 [rows, next_out_ld] or null; x bf16 [rows, n] contiguous. Only where
// CustomAllReduceFuses(x, rows, n): hidden sizes up to 8192 in whole 16-byte chunks, rows within
// the push kernel's message size, x 16-byte aligned.
struct PostNormResidualArgs {
  const void* x = nullptr;
  int64_t rows = 0, n = 0;
  const float* post_weight = nullptr;
  float* residual = nullptr;
  int64_t residual_ld = 0;
  const float* scalar = nullptr;
  const float* next_weight = nullptr;
  void* next_out = nullptr;
  int64_t next_out_ld = 0;
  float eps = 0.f;
};
bool CustomAllReduceFuses(const void* x, int64_t rows, int64_t n);
cudaError_t LaunchCustomAllReducePostNormResidual(const PostNormResidualArgs& args, int rank,
                                                  int world, void* const* workspaces,
                                                  const volatile int* abort, cudaStream_t stream);

}  // namespace gannet::kernels
