// Collective operations between the ranks of a tensor-parallel group, each rank computing on its
// own Backend. The runner calls them between its ops through its tensor-parallel hooks
// (lib/runner/tp_hooks.h, implemented by lib/parallel/group_tp_hooks.cc); they run in the
// rank's backend's order of work (CUDA: on its stream, and so inside recorded graphs), like ops.
// Implementations: lib/parallel (threads on the host; NCCL between GPUs).
//
// Every rank must issue the same collectives in the same order with the same shapes; a rank that
// fails instead aborts the group (Abort), after which every collective of every rank fails with a
// device-lost status (lib/common/status.h) instead of waiting.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/backend/tensor.h"

namespace gannet::backend {

class Backend;

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // x = the sum over ranks of every rank's x, in place (f32, bf16). Every rank ends with the same
  // values.
  virtual absl::Status AllReduceSum(Tensor x) = 0;
  // be.PostNormResidual(sum over ranks of x, post_weight, residual, scalar, next_weight, next_out,
  // eps) on this rank's backend `be`, after which x holds unspecified values. This default is the
  // two calls; an implementation may fuse them (NCCL group: the push all-reduce kernel computes
  // the update itself, bit for bit the two ops, one kernel instead of two).
  virtual absl::Status AllReducePostNormResidual(Backend& be, Tensor x, Tensor post_weight,
                                                 Tensor residual, Tensor scalar, Tensor next_weight,
                                                 Tensor next_out, float eps);
  // blocks [world, rows, cols] f32 holds this rank's block at blocks[rank] on entry and every
  // rank's on return; full [rows, world * cols] gets the blocks side by side in rank order (rows
  // of vocabulary shards become full logits rows).
  virtual absl::Status AllGatherColumns(Tensor blocks, Tensor full) = 0;
  // The smallest of every rank's v (host values: memory left, a rank's failure as -1); waits.
  virtual absl::StatusOr<int64_t> MinOverRanks(int64_t v) = 0;
  // Breaks the group: collectives waiting now and later fail (device lost). Thread-safe.
  virtual void Abort() = 0;
};

}  // namespace gannet::backend
