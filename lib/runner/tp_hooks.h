// What a runner (ModelRunner, and the MTP drafter that shares its group) does differently as one
// rank of a tensor-parallel group: sum the row-parallel partial outputs, put the vocabulary
// shards of the LM head back together, and agree on each greedy row's token from the ranks'
// shard arg-maxes. The runner layer only declares it; lib/parallel implements it over a group's
// backend::Collectives (parallel::GroupTpHooks), so the runner never includes parallel. One
// device: no hooks (RunnerOptions::tp is null) and the runner computes the whole rows itself.
//
// Every rank calls the same hooks in the same order with the same shapes (they are collectives);
// the device-side ones run in the backend's order of work, so they may be recorded in graphs.
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "lib/backend/backend.h"
#include "lib/backend/tensor.h"

namespace gannet::runner {

class TpHooks {
 public:
  virtual ~TpHooks() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // x = the sum over ranks of x, in place: the partial outputs of the row-parallel projections
  // (o_proj, the MLP/MoE down projections) and of the vocabulary-parallel embedding.
  virtual absl::Status SumPartials(backend::Tensor x) = 0;
  // be.PostNormResidual(the sum over ranks of x, ...); x holds unspecified values after. The
  // group may fuse the sum and the update into one collective.
  virtual absl::Status SumPostNormResidual(backend::Backend& be, backend::Tensor x,
                                           backend::Tensor post_weight, backend::Tensor residual,
                                           backend::Tensor scalar, backend::Tensor next_weight,
                                           backend::Tensor next_out, float eps) = 0;
  // The vocabulary-parallel head: blocks [world, rows, cols] f32 holds this rank's LM head output
  // at blocks[rank]; full [rows, world * cols] gets every rank's block side by side, in rank
  // (= vocabulary) order: full logits rows.
  virtual absl::Status GatherVocabShards(backend::Tensor blocks, backend::Tensor full) = 0;
  // The best-pick exchange, device half: this rank's (value, id) winner of each row of `shard`
  // [rows, cols] (its LM head block, whose column 0 is token id `id_begin`; `banned` as
  // Backend::ShardArgmax takes it, may be empty), gathered from every rank into picks
  // [rows, 2 * world]. `scratch` holds at least world * rows * 2 f32 (the ranks' blocks).
  virtual absl::Status ExchangeBestPicks(backend::Backend& be, backend::Tensor shard,
                                         backend::Tensor banned, int64_t id_begin,
                                         backend::Tensor scratch, backend::Tensor picks) = 0;
  // The host half: reads the first out.size() rows of `picks` (as ExchangeBestPicks left them)
  // and writes each row's token: the full row's arg-max, ties to the lowest id (as
  // Backend::Sample takes a greedy row). Waits for the device.
  virtual absl::Status ReadBestPicks(backend::Backend& be, backend::Tensor picks,
                                     std::span<int32_t> out) = 0;
};

}  // namespace gannet::runner
