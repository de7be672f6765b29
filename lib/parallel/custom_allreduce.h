// The all-reduce kernels of kernels/comm/custom_allreduce.h for a tensor-parallel group: a zeroed
// workspace per rank that every rank's device reaches, either
//  - all ranks' devices in this process (peer access enabled between every pair), or
//  - one rank per process (CUDA IPC: each process exports its workspace's handle, the ranks
//    exchange them, and each opens its peers'; every rank must agree before any uses it).
// Messages up to the limit below go through it; larger ones, and groups without peer access, stay
// with NCCL. GANNET_ALLREDUCE=nccl turns it off (measurements), =custom raises the limit to the
// kernel's; across processes the ranks take the smallest limit any of them asks for, so a mixed
// setting can never send one message two ways.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/tensor.h"

namespace gannet::parallel {

class CustomAllReduce {
 public:
  // Null (no error) when peer access is missing between some pair or GANNET_ALLREDUCE=nccl.
  static absl::StatusOr<std::shared_ptr<CustomAllReduce>> Create(const std::vector<int>& devices);

  // What the ranks of a one-process-per-rank group tell each other while setting up (over NCCL in
  // the engine): every rank calls each function in the same order.
  struct RankExchange {
    // Every rank's bytes (all the same size), in rank order.
    std::function<absl::StatusOr<std::vector<std::string>>(const std::string& mine)> all_gather;
    std::function<absl::StatusOr<int64_t>(int64_t mine)> min_over_ranks;
  };
  // Rank `rank` of `world` on `device` (current on the calling thread), one rank per process. Null
  // (no error) when any rank cannot open every peer's workspace or asks for NCCL only; then every
  // rank gets null, so the group's all-reduces all go through NCCL.
  static absl::StatusOr<std::shared_ptr<CustomAllReduce>> CreateAcrossProcesses(
      int rank, int world, int device, const RankExchange& exchange);
  ~CustomAllReduce();

  // Whether a message of `bytes` goes through the custom kernel.
  bool Takes(const backend::Tensor& x) const;
  // Rank `rank`'s call, on its stream (its device current).
  absl::Status Run(int rank, backend::Tensor x, void* stream) const;
  // Whether RunPostNormResidual takes these operands (bf16 rows of x within the push kernel's
  // size, f32 residual and weights, bf16 next output or none).
  bool TakesPostNormResidual(const backend::Tensor& x, const backend::Tensor& residual,
                             const backend::Tensor& next_out) const;
  // Backend::PostNormResidual of the sum over ranks of x in one kernel (x keeps this rank's
  // addend); see kernels::LaunchCustomAllReducePostNormResidual.
  absl::Status RunPostNormResidual(int rank, backend::Tensor x, backend::Tensor post_weight,
                                   backend::Tensor residual, backend::Tensor scalar,
                                   backend::Tensor next_weight, backend::Tensor next_out, float eps,
                                   void* stream) const;
  size_t max_bytes() const { return max_bytes_; }
  // Ends every wait for a peer, now and later (the group is broken). Thread-safe.
  void Abort();

 private:
  CustomAllReduce() = default;
  absl::Status AllocateAbortFlag();
  std::vector<int> devices_;       // this process's devices, rank order (one across processes)
  std::vector<void*> workspaces_;  // rank order; each device reaches every one (peer access)
  std::vector<bool> imported_;     // opened from a peer process's IPC handle (closed, not freed)
  size_t max_bytes_ = 0;
  int* abort_ = nullptr;  // mapped pinned host memory the kernels poll while waiting
};

}  // namespace gannet::parallel
