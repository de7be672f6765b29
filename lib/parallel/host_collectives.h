// The collectives of a tensor-parallel group whose ranks are threads of this process computing on
// host memory (CPU backends): CI runs TP = 2 and 4 with them, and they are the reference the NCCL
// collectives are tested against. Sums run in rank order on every rank, so all ranks hold
// bit-identical results.
#pragma once

#include <memory>
#include <vector>

#include "lib/backend/collectives.h"
#include "lib/common/mutex.h"
#include "lib/parallel/step_channel.h"

namespace gannet::parallel {

class HostGroup {
 public:
  explicit HostGroup(int world_size);
  int world_size() const { return world_; }
  // The collectives of one rank (each rank's thread uses its own).
  std::unique_ptr<backend::Collectives> Rank(int rank);
  // Rank `rank`'s end of the message channel from rank 0 (the multi-process protocol, with the
  // ranks as threads).
  std::unique_ptr<StepChannel> Channel(int rank);

  // Waits for every rank (or fails once the group is aborted).
  absl::Status Barrier();
  void Abort();
  // Where each rank published its tensor for the current collective.
  std::vector<backend::Tensor>& slots() { return slots_; }
  std::vector<int64_t>& values() { return values_; }
  // Message queues, one per receiving rank.
  void Push(std::span<const uint8_t> msg);
  absl::StatusOr<std::vector<uint8_t>> Pop(int rank, double timeout_s);

 private:
  const int world_;
  Mutex mu_;
  CondVar cv_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  // Written by each rank between two barriers, read by all after the second: the barriers order
  // them, not mu_.
  std::vector<backend::Tensor> slots_;
  std::vector<int64_t> values_;
  std::vector<std::vector<std::vector<uint8_t>>> queues_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gannet::parallel
