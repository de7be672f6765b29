// The one-shot all-reduce of kernels/comm/custom_allreduce.h for a group of CUDA devices in this
// process: a zeroed workspace per device, peer access enabled between every pair. Messages up to
// the limit below go through it; larger ones, and groups without peer access, stay with NCCL.
// GANNET_ALLREDUCE=nccl turns it off (measurements), =custom raises the limit to the kernel's.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/tensor.h"

namespace gannet::parallel {

class CustomAllReduce {
 public:
  // Null (no error) when peer access is missing between some pair or GANNET_ALLREDUCE=nccl.
  static absl::StatusOr<std::shared_ptr<CustomAllReduce>> Create(const std::vector<int>& devices);
  ~CustomAllReduce();

  // Whether a message of `bytes` goes through the custom kernel.
  bool Takes(const backend::Tensor& x) const;
  // Rank `rank`'s call, on its stream (its device current).
  absl::Status Run(int rank, backend::Tensor x, void* stream) const;
  size_t max_bytes() const { return max_bytes_; }
  // Ends every wait for a peer, now and later (the group is broken). Thread-safe.
  void Abort();

 private:
  CustomAllReduce() = default;
  std::vector<int> devices_;
  std::vector<void*> workspaces_;  // rank order; each device reaches every one (peer access)
  size_t max_bytes_ = 0;
  int* abort_ = nullptr;  // mapped pinned host memory the kernels poll while waiting
};

}  // namespace gannet::parallel
